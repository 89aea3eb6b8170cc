"""A result's recorded commit marks a tree whose shared/ differs from it: a figure measured on
uncommitted code must not claim a commit that does not hold that code."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from eragraph.bench.common import git_commit


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_commit_is_marked_dirty_when_shared_changed(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                       check=True, capture_output=True)

    package = tmp_path / "shared" / "eragraph" / "bench"  # where the function looks from
    package.mkdir(parents=True)
    (package / "code.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("readme\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    clean = git_commit(package)
    assert len(clean) == 40 and "+dirty" not in clean
    (tmp_path / "README.md").write_text("changed outside shared/\n")
    assert git_commit(package) == clean
    (package / "code.py").write_text("x = 2\n")
    assert git_commit(package) == clean + "+dirty"
