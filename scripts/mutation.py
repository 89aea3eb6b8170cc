"""Mutation testing with mutmut, per module, on the fast tests that exercise it.

    python scripts/mutation.py domain            # one target (see TARGETS)
    python scripts/mutation.py --changed [BASE]  # the targets whose files differ from BASE (main)
    python scripts/mutation.py --all
    python scripts/mutation.py dynamodb --survivors [--pending]  # rerun the survivors [and the
                                                  # mutants a stopped run never reached]

Each target runs in its own scratch copy (.mutation/<target>/: the package as src/eragraph, the
tests, a generated pyproject.toml with the [tool.mutmut] section), so the repository's own
pyproject.toml stays free of mutmut settings and targets run independently. mutmut needs the
package under src/ (its mutant names come from the file path; the project keeps it in shared/).
Results: .mutation/<target>/result.json (score, survivors with their diff; MUTATION_NO_DIFFS=1
skips the diffs, which take mutmut a second each). Run it niced: it is CPU-heavy.
The targets, their scores and what the survivors taught: docs/testing/mutation.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / ".mutation"

def _unit(*names: str) -> list[str]:
    return [f"tests/unit/test_{n}.py" for n in names]



# target -> files mutated (under shared/eragraph), tests run, mutant-name patterns scored
# (None: every mutant of the files).
TARGETS: dict[str, dict] = {
    # domain/, in parts, each with the unit tests of its modules (a mutant reruns only the tests
    # that reach the function it changed, but the first, traced run of the selection is slow)
    "domain-core": {
        "files": [f"domain/{m}.py" for m in ("ids", "partition", "lsh", "ranking", "fusion", "sequencer",
                                             "tenants")],
        "tests": [*_unit("ids", "partition", "partition_reference", "lsh", "ranking", "router", "sequencer",
                         "tenants", "domain_properties", "domain_bounds"), "-m", "not model"],
        "only": None,
    },
    "domain-filters": {
        "files": ["domain/filters.py"],
        "tests": [*_unit("filters", "filter_messages", "metadata_sources", "domain_properties"), "-m", "not model"],
        "only": None,
    },
    "domain-graph": {
        "files": [f"domain/{m}.py" for m in ("scoped", "diff", "graph_math", "model")],
        "tests": [*_unit("scoped", "scoped_reads", "diff", "graph_math", "graph_modes", "streamed_pass", "resummarize", "model",
                         "graph_math_rules"),
                  "-m", "not model"],
        "only": None,
    },
    "domain-text": {
        "files": [f"domain/{m}.py" for m in ("text", "bm25", "question_features", "router_model", "filekind")],
        "tests": [*_unit("text", "router", "filekind", "extractive", "bm25"), "tests/contract/test_lexical_index.py",
                  "-m", "not model"],
        "only": None,
    },
    # services, one module each with the tests that drive it
    "resummarize": {
        "files": ["services/resummarize.py"],
        "tests": [*_unit("resummarize", "resummarize_outbox", "resummarize_rules", "streamed_pass", "scoped", "progress", "reindex"),
                  "-m", "not model"],
        "only": None,
    },
    "ingest": {
        "files": ["services/ingest.py"],
        "tests": [*_unit("ingest_rules", "ingest_recovery", "ingest_race", "metadata_sources", "remove", "diff"), "tests/e2e/test_metadata_ingest.py",
                  "-m", "not model"],
        "only": None,
    },
    "remove": {
        "files": ["services/remove.py"],
        "tests": [*_unit("remove", "ingest_race", "reindex"), "-m", "not model"],
        "only": None,
    },
    "dynamodb": {
        "files": [f"adapters/aws/{m}.py" for m in ("dynamodb_table", "meta_dynamodb", "documents_dynamodb", "nodes_dynamodb")],
        # the deterministic condition tests (Stubber, the requests sent) and the contract's
        # conditional-write tests on moto; the whole moto contract and the threaded counter tests
        # take minutes per mutant on a shared 2-core machine
        "tests": ["tests/aws/test_dynamodb_conditions.py", *(
            f"tests/contract/test_graph_store.py::{t}" for t in (
                "test_put_lsh_first_writer_wins", "test_put_document_is_conditional_on_the_stored_version",
                "test_tombstones_are_conditional_and_hidden", "test_apply_region_conflicts_and_writes_nothing",
                "test_a_region_replacing_its_summary_removes_the_old_one_above",
                "test_a_lost_condition_names_what_changed", "test_deletes_leave_tombstones_only_for_members_of_segments",
                "test_summaries_written_outside_the_index_enter_it_with_their_segment")),
            "tests/aws/test_document_counter.py::test_the_counter_follows_every_document_write",
            "-k", "dynamodb or counter_follows_every_document_write"],
        # every test of the target on the smaller partition layout (tests/small_layout.py): a
        # contract test reading a layer whole pays one moto Query per partition (256 at layer 0),
        # most of its time; the conditions written are the same at any partition count
        "pytest_args": ["-p", "small_layout"],
        # the conditional writes: version stamps, new-ref conditions, the transaction and its
        # cancellation reasons
        "only": ["*_is_condition_failure__mutmut_*", "*_stamp_condition__mutmut_*",
                 "*put_document__mutmut_*", "*_transact_refs__mutmut_*", "*put_nodes__mutmut_*",
                 "*_ref_condition__mutmut_*", "*apply_region__mutmut_*", "*put_lsh__mutmut_*"],
    },
    "graph_sqlite": {
        "files": [f"adapters/local/{m}.py" for m in ("meta_sqlite", "documents_sqlite", "nodes_sqlite")],
        "tests": ["tests/contract/test_graph_store.py", "tests/unit/test_sqlite_leaf_rows.py", "-k", "sqlite"],
        # the conditional writes: the document stamp, the region's expected refs, the counted
        # ref state changes
        "only": ["*put_document__mutmut_*", "*apply_region__mutmut_*", "*put_lsh__mutmut_*",
                 "*.x__make_live__mutmut_*", "*.x__make_gone__mutmut_*", "*.x__count__mutmut_*"],
        # SQLite keywords and identifiers are case-insensitive: a survivor that only changes the
        # case of its lines (an SQL statement) is equivalent, listed but not scored
        "case_insensitive": True,
    },
}


_ALSO_COPY = ["template.yaml"]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def prepare(name: str) -> Path:
    work = SCRATCH / name
    if work.exists():
        shutil.rmtree(work)
    (work / "src").mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "shared" / "eragraph", work / "src" / "eragraph", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    for name_ in _ALSO_COPY:  # files the tests read from the project root
        shutil.copy2(ROOT / name_, work / name_)
    write_config(name, work)
    return work


def write_config(name: str, work: Path) -> None:
    target = TARGETS[name]
    only = [f"src/eragraph/{f}" for f in target["files"]]
    # a listed test file that does not exist (yet) is left out, not an error
    tests = [t for t in target["tests"] if not t.startswith("tests/") or (ROOT / t.split("::")[0]).exists()]
    markers = subprocess.run([sys.executable, "-c", "import tomllib,json;print(json.dumps(tomllib.load("
                              "open('pyproject.toml','rb'))['tool']['pytest']['ini_options']['markers']))"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    (work / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["src"]\n'
        f"also_copy = {_toml_list(_ALSO_COPY)}\n"
        f"only_mutate = {_toml_list(only)}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        f'pytest_add_cli_args = {_toml_list(["-p", "no:cacheprovider", "-p", "no:timeout", "-q", *target.get("pytest_args", [])])}\n'
        "timeout_multiplier = 5.0\n"
        "timeout_constant = 5.0\n"
        "\n[tool.pytest.ini_options]\n"
        f"markers = {markers.strip()}\n")


def rerun_survivors(name: str, children: int, pending: bool = False) -> dict:
    """Run the survivors of the last run again, against the current tests (the package copy,
    hence the mutants, stay as they were); with ``pending``, also the mutants of the target that
    run never reached (a run stopped before its end)."""
    work = SCRATCH / name
    if not (work / "result.json").exists() or not (work / "mutants").exists():
        # no earlier run in this checkout (.mutation/ is not committed): nothing to rerun yet
        print(f"{name}: no earlier run in {work.relative_to(ROOT)} to take the survivors from; "
              "running every mutant of the target instead", flush=True)
        return run(name, children)
    survivors = [s["mutant"] for s in json.loads((work / "result.json").read_text())["survivors"]]
    if pending:
        only = TARGETS[name]["only"]
        saved = json.loads((work / "statuses.json").read_text()) if (work / "statuses.json").exists() else {}
        survivors += [key for key, status in sorted(saved.items()) if status == "not checked"
                      and (not only or any(fnmatch.fnmatch(key, p) for p in only))]
    shutil.copytree(ROOT / "tests", work / "tests", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    write_config(name, work)
    if survivors:
        cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *survivors]
        print("+ mutmut run", len(survivors), "survivors" + (" and mutants not yet run" if pending else ""), flush=True)
        subprocess.run(cmd, cwd=work, env=_env(work), check=False)
    result = score(name, work)
    print(json.dumps({k: result[k] for k in ("target", "counts", "score")}), flush=True)
    return result


def _statuses(work: Path) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work,
                         capture_output=True, text=True, env=_env(work)).stdout
    statuses = {}
    for line in out.splitlines():
        line = line.strip()
        if ": " in line and "__mutmut_" in line:
            key, status = line.rsplit(": ", 1)
            statuses[key] = status
    return statuses


CAUGHT = ("killed", "timeout", "segfault")
EQUIVALENT = "equivalent (case only)"


_SQL = re.compile(r"\b(select|insert|update|delete|on conflict)\b", re.IGNORECASE)


def case_only(diff: str) -> bool:
    """Whether a mutant's diff changes nothing but the case of lines that hold an SQL statement."""
    minus = [line[1:] for line in diff.splitlines() if line[:1] == "-" and line[:3] != "---"]
    plus = [line[1:] for line in diff.splitlines() if line[:1] == "+" and line[:3] != "+++"]
    return (bool(minus) and minus != plus and [m.lower() for m in minus] == [p.lower() for p in plus]
            and all(_SQL.search(m) for m, p in zip(minus, plus) if m != p))


def score(name: str, work: Path) -> dict:
    """Score the target from mutmut's results, merged over the statuses of earlier runs
    (statuses.json): a survivors-only rerun leaves every other mutant "not checked", and those
    keep the verdict of the run that checked them."""
    target = TARGETS[name]
    saved = work / "statuses.json"
    statuses = json.loads(saved.read_text()) if saved.exists() else {}
    for key, status in _statuses(work).items():
        if status != "not checked" or key not in statuses:
            statuses[key] = status
    saved.write_text(json.dumps(statuses, indent=0, sort_keys=True, ensure_ascii=False) + "\n")
    counts: dict[str, int] = {}
    survivors = []
    per_file: dict[str, dict[str, int]] = {}
    for key, status in sorted(statuses.items()):
        if target["only"] and not any(fnmatch.fnmatch(key, p) for p in target["only"]):
            continue
        module = key.split(".x")[0] if ".x" in key else key.rsplit(".", 1)[0]
        module = module.replace("ǁ", ".").split(".x")[0]
        diff = None
        if status not in (*CAUGHT, "not checked", "skipped"):
            diff = "" if os.environ.get("MUTATION_NO_DIFFS") and not target.get("case_insensitive") else \
                subprocess.run([sys.executable, "-m", "mutmut", "show", key], cwd=work, capture_output=True,
                               text=True, env=_env(work)).stdout
            if target.get("case_insensitive") and case_only(diff):
                status = EQUIVALENT
        counts[status] = counts.get(status, 0) + 1
        per = per_file.setdefault(module, {})
        per[status] = per.get(status, 0) + 1
        if diff is not None:
            survivors.append({"mutant": key, "status": status, "diff": diff})

    def pct(c: dict[str, int]) -> float | None:
        tested = sum(v for k, v in c.items() if k not in ("skipped", "not checked", EQUIVALENT))
        caught = sum(v for k, v in c.items() if k in CAUGHT)
        return round(100.0 * caught / tested, 1) if tested else None

    result = {"target": name, "files": target["files"], "counts": counts, "score": pct(counts),
              "per_module": {m: {"counts": c, "score": pct(c)} for m, c in sorted(per_file.items())},
              "survivors": survivors}
    (work / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(work / "tests")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


def run(name: str, children: int) -> dict:
    work = prepare(name)
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(children)]
    cmd += TARGETS[name]["only"] or []
    print("+", " ".join(cmd), f"(in {work.relative_to(ROOT)})", flush=True)
    subprocess.run(cmd, cwd=work, env=_env(work), check=False)
    result = score(name, work)
    print(json.dumps({k: result[k] for k in ("target", "counts", "score")}), flush=True)
    return result


def changed_targets(base: str) -> list[str]:
    diff = subprocess.run(["git", "diff", "--name-only", f"{base}...HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.split()
    diff += subprocess.run(["git", "diff", "--name-only"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    hit = []
    for name, target in TARGETS.items():
        pats = [f"shared/eragraph/{f}" for f in target["files"]]
        if any(fnmatch.fnmatch(p, pat) for p in diff for pat in pats):
            hit.append(name)
    return hit


def collect(names: list[str], out: Path) -> int:
    import platform

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    # the targets not collected now keep their entries of the earlier collection
    targets = json.loads(out.read_text()).get("targets", {}) if out.exists() else {}
    for name in names:
        path = SCRATCH / name / "result.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        targets[name] = {"commit": commit, "files": r["files"], "tests": TARGETS[name]["tests"], "only": TARGETS[name]["only"],
                         "counts": r["counts"], "score": r["score"], "per_module": r["per_module"],
                         "survivors": [{"mutant": s["mutant"], "status": s["status"],
                                        "change": [line for line in s["diff"].splitlines()
                                                   if line[:1] in "-+" and line[:3] not in ("---", "+++")]}
                                       for s in r["survivors"]]}
    out.write_text(json.dumps({"tool": "mutmut 3.8.1", "command": "python scripts/mutation.py <target>",
                               "commit": commit, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                               "targets": targets}, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("targets", nargs="*", help=f"any of {list(TARGETS)}")
    ap.add_argument("--changed", nargs="?", const="main", metavar="BASE",
                    help="the targets whose files a change touches (git diff BASE...HEAD, and the work tree)")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--children", "--workers", type=int, default=2, help="mutmut workers (1 on a shared machine)")
    ap.add_argument("--min-score", type=float, default=85.0)
    ap.add_argument("--score-only", action="store_true", help="rescore an earlier run, run nothing")
    ap.add_argument("--survivors", action="store_true",
                    help="rerun only the last run's survivors against the current tests")
    ap.add_argument("--pending", action="store_true",
                    help="with --survivors: also the mutants the last run did not reach (stopped early)")
    ap.add_argument("--collect", metavar="OUT", help="write the targets' results (scores, survivors) to OUT")
    args = ap.parse_args(argv)
    names = list(TARGETS) if args.all else (changed_targets(args.changed) if args.changed else args.targets)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        ap.error(f"unknown target(s) {unknown}; known: {list(TARGETS)}")
    if not names:
        print("no mutation target touched")
        return 0
    if args.collect:
        return collect(names, Path(args.collect))
    low = []
    for name in names:
        if args.score_only:
            if not (SCRATCH / name / "mutants").exists():
                print(f"{name}: no earlier run to score (python scripts/mutation.py {name} runs it)")
                low.append(f"{name}: not run")
                continue
            result = score(name, SCRATCH / name)
        elif args.survivors:
            result = rerun_survivors(name, args.children, pending=args.pending)
        else:
            result = run(name, args.children)
        if result["score"] is None or result["score"] < args.min_score:
            low.append(f"{name}: {result['score']}")
    if low:
        print("below", args.min_score, "%:", ", ".join(low))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
