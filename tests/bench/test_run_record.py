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


def test_a_run_records_the_commit_it_began_on(monkeypatch):
    """A long run imports its code when it begins; HEAD may move on before it ends. The
    commit it records is the one read at its start (mark_start), not at its end."""
    from eragraph.bench import common

    monkeypatch.setattr(common, "_STARTED", {})
    heads = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(common, "git_commit", lambda where=None: next(heads))
    common.mark_start()
    common.mark_start()  # a second call keeps the first reading
    assert common.run_record()["commit"] == "a" * 40
    assert common.run_record()["commit"] == "a" * 40
