"""Which parts of the ``eragraph`` package the Lambda functions can import, so that CoreLayer
ships those and nothing else (no CLI, benchmarks, training, local adapters, samples; the ASGI
server module is there for the stream function, which runs it behind the Lambda Web Adapter).

The closure starts at the handlers (``functions/*/app.py``) and follows every import it can see
in the source: module-level imports, imports inside functions (eragraph imports most adapters
and providers lazily), and string constants that name an eragraph module (``importlib`` look-ups
of a module by name). It does not follow the edges of ``NOT_ON_LAMBDA``:
lazy imports that only another profile takes, each with the reason. An edge listed there that no
longer exists is an error, so the list cannot go stale silently.

    python3 layers/core/closure.py                 # list the modules (and third-party imports)
    python3 layers/core/closure.py --copy DEST     # copy them and DATA into DEST/eragraph

Run from anywhere: paths are found from this file. Any Python 3 works (stdlib only).
"""

from __future__ import annotations

import argparse
import ast
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "shared"
HANDLERS = sorted((REPO / "functions").glob("*/app.py"))

# (importer, imported): lazy imports the Lambda functions never execute.
NOT_ON_LAMBDA = {
    ("eragraph.bootstrap.local", "eragraph.adapters.local"):
        "the local profile's adapters (SQLite, FAISS, files), imported when it builds a store; "
        "bootstrap.profiles names every profile class, but the functions build the 'aws' profile",
    ("eragraph.bootstrap.providers", "eragraph.providers.minilm"):
        "ERAGRAPH_EMBEDDER=minilm needs torch, which no layer holds (Bedrock embeds on AWS)",
    ("eragraph.bootstrap.providers", "eragraph.providers.cross_encoder"):
        "ERAGRAPH_RERANKER=cross-encoder needs torch, which no layer holds (Bedrock reranks on AWS)",
}

# Package data the AWS path reads (importlib.resources), relative to the package.
DATA = {
    "adapters/aws/index_mapping.json": "adapters.aws.vector_opensearch creates the indexes with this mapping",
    "weights/router.json": "services.routing: the router weights when ERAGRAPH_ROUTER_WEIGHTS is empty",
    "py.typed": "PEP 561 marker (a few bytes)",
}


def module_file(name: str) -> Path | None:
    path = SRC.joinpath(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Every dotted name an import statement (or a string constant naming an eragraph module)
    in ``tree`` may load: for ``from a import b``, both ``a`` and ``a.b``."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names += [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("eragraph."):
            names.append(node.value.split(":")[0])
    return names


def closure(handlers: list[Path] | None = None) -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """(eragraph modules, third-party top-level imports, NOT_ON_LAMBDA edges met)."""
    handlers = HANDLERS if handlers is None else handlers
    seen: set[str] = set()
    third_party: set[str] = set()
    skipped: set[tuple[str, str]] = set()
    stack: list[tuple[str, Path]] = [(f"app:{h.parent.name}", h) for h in handlers]
    while stack:
        module, path = stack.pop()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name in _imported_names(tree, module, path.name == "__init__.py"):
            top = name.split(".")[0]
            if top != "eragraph":
                if top and top not in sys.stdlib_module_names and top != "__future__":
                    third_party.add(top)
                continue
            parts = name.split(".")
            prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
            edge = next(((module, p) for p in prefixes if (module, p) in NOT_ON_LAMBDA), None)
            if edge is not None:
                skipped.add(edge)
                continue
            for target in prefixes:  # importing a.b.c imports a and a.b first
                file = module_file(target)
                if file is None or target in seen:
                    continue
                seen.add(target)
                stack.append((target, file))
    return seen, third_party, skipped


def check() -> set[str]:
    modules, _, skipped = closure()
    stale = set(NOT_ON_LAMBDA) - skipped
    if stale:
        raise SystemExit(f"NOT_ON_LAMBDA names edges no module has any more: {sorted(stale)}")
    missing = [d for d in DATA if not (SRC / "eragraph" / d).is_file()]
    if missing:
        raise SystemExit(f"DATA names files that do not exist: {missing}")
    return modules


def copy(dest: Path) -> list[Path]:
    """Copy the closure's modules and DATA into ``dest`` (``dest/eragraph/...``)."""
    written = []
    for name in sorted(check()):
        rel = module_file(name).relative_to(SRC)
        written.append(rel)
    written += [Path("eragraph", d) for d in DATA]
    for rel in written:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SRC / rel, dest / rel)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copy", type=Path, metavar="DEST", help="copy the closure into DEST")
    args = parser.parse_args()
    if args.copy:
        for rel in copy(args.copy):
            print(rel)
        return
    modules = check()
    _, third_party, _ = closure()
    print("\n".join(sorted(modules)))
    print("third-party:", " ".join(sorted(third_party)))


if __name__ == "__main__":
    main()
