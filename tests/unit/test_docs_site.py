"""The documents a newcomer reads: a README of at most 200 lines, every relative link of the
README and of the pages under docs/ pointing at a file that exists (and, into a page, at a
heading it has), and the docs site building with `mkdocs build --strict` (mkdocs.yml)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200

# [text](target) outside code: fenced blocks and `code spans` are cut before links are read
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def slug(heading: str) -> str:
    """The anchor MkDocs' toc gives a heading (Python-Markdown's ``slugify`` of its text): ASCII,
    lower case, punctuation dropped, runs of spaces and hyphens as one hyphen."""
    text = re.sub(r"`|\*\*|\*|\[|\]\([^)]*\)", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(2)) for m in re.finditer(r"^(#{1,6})\s+(.+?)\s*#*\s*$", text, re.M)}


def test_the_readme_is_at_most_200_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move the detail to a page under docs/"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_the_slug_is_the_one_mkdocs_makes():
    assert slug("Safe by default: tenancy, privileges, cost and concurrency") == \
        "safe-by-default-tenancy-privileges-cost-and-concurrency"
    assert slug("A warm server: eragraph serve") == "a-warm-server-eragraph-serve"
    assert slug("What `sam deploy` creates") == "what-sam-deploy-creates"


def test_the_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: every page in the nav, every link and anchor resolved, offline
    (theme.font is false: no Google Fonts). Under CI mkdocs must be installed (the dev extra)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("CI") or os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1":
            pytest.fail("mkdocs and mkdocs-material are not installed (pip install -e '.[dev]')")
        pytest.skip("mkdocs and mkdocs-material are not installed (the dev extra)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                          str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert "fonts.googleapis.com" not in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
