"""The console's static files, read from the package (never from a CDN): ``asset(path)`` gives
the bytes and content type of the file a console URL names, or None. ``/`` is ``index.html``;
``/console/<file>`` is ``static/<file>``. A path that leaves ``static/`` (``..``, an absolute
path, a backslash) or names no file is None, never another file of the machine."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import PurePosixPath

INDEX = "index.html"
PREFIX = "/console/"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".json": "application/json", ".svg": "image/svg+xml", ".png": "image/png",
         ".ico": "image/x-icon", ".txt": "text/plain; charset=utf-8", ".map": "application/json",
         ".woff2": "font/woff2"}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str


def is_console_path(path: str) -> bool:
    """Whether a request path is the console's (``/``, ``/index.html`` or under ``/console/``)."""
    return path in ("/", "/" + INDEX) or path.startswith(PREFIX)


def relative(path: str) -> str | None:
    """The file under ``static/`` that ``path`` names, or None when it names none safely."""
    if path in ("/", "/" + INDEX):
        return INDEX
    if not path.startswith(PREFIX):
        return None
    rest = path[len(PREFIX):]
    if not rest or "\\" in rest or "\x00" in rest:
        return None
    parts = rest.split("/")
    if any(p in ("..", ".", "") for p in parts):
        return None
    return rest


def asset(path: str) -> Asset | None:
    """The static file a console path names (bytes and content type), or None."""
    name = relative(path)
    if name is None:
        return None
    node = resources.files(__package__).joinpath("static")
    for part in name.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        return None
    suffix = PurePosixPath(name).suffix.lower()
    return Asset(node.read_bytes(), TYPES.get(suffix, "application/octet-stream"))
