"""The console's vendored libraries are the files static/vendor/README.md names, with the
digests it records and their licences beside them; no file of the console loads anything from
another origin (a CDN), so the page works offline."""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import pytest

STATIC = resources.files("eragraph.entrypoints.console").joinpath("static")
README = STATIC.joinpath("vendor", "README.md").read_text(encoding="utf-8")
DIGESTS = dict((name, digest) for digest, name in re.findall(r"^([0-9a-f]{64})  (\S+)$", README, re.M))


def test_the_readme_records_a_digest_for_each_library():
    assert set(DIGESTS) == {"cytoscape/cytoscape.esm.min.mjs", "uplot/uPlot.esm.js", "uplot/uPlot.min.css"}


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_each_vendored_file_is_the_one_recorded(name):
    node = STATIC.joinpath("vendor", *name.split("/"))
    assert hashlib.sha256(node.read_bytes()).hexdigest() == DIGESTS[name]
    licence = node.parent.joinpath("LICENSE").read_text(encoding="utf-8")
    assert "Permission is hereby granted, free of charge" in licence  # MIT, as the table says


def _ours():
    def walk(node, prefix=""):
        for child in node.iterdir():
            path = prefix + child.name
            if child.is_dir():
                if child.name != "vendor":
                    yield from walk(child, path + "/")
            elif child.name.endswith((".html", ".js", ".css")):
                yield path, child.read_text(encoding="utf-8")
    return list(walk(STATIC))


def test_nothing_loads_from_another_origin():
    files = _ours()
    assert any(path == "index.html" for path, _ in files) and any(path.endswith(".js") for path, _ in files)
    remote = re.compile(r"""(src|href)\s*=\s*["']\s*(https?:)?//|import[^;]*from\s*["'](https?:)?//|url\(\s*["']?(https?:)?//|fetch\(\s*["'](https?:)?//""")
    found = [path for path, text in files if remote.search(text)]
    assert not found, f"these console files load from another origin: {found}"


def test_every_module_the_page_imports_is_a_file_of_the_package():
    files = dict(_ours())
    for path, text in files.items():
        if not path.endswith(".js"):
            continue
        for target in re.findall(r"""from\s+["'](\.{1,2}/[^"']+)["']""", text):
            parts = path.split("/")[:-1]
            for piece in target.split("/"):
                if piece == "..":
                    parts.pop()
                elif piece != ".":
                    parts.append(piece)
            assert STATIC.joinpath(*parts).is_file(), f"{path} imports {target}: no such file"
