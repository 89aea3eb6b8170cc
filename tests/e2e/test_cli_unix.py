"""The `eragraph` command as a Unix tool, through real processes: a closed stdout (``| head``)
ends it quietly, read commands never create a store, exit statuses tell a partial ingest from
a failure, --help and --version say what they should, and progress goes to stderr only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXIT_ERROR, EXIT_USAGE, EXIT_PARTIAL, EXIT_PIPE = 1, 2, 3, 141

DOCS = {
    "danube.txt": "The Danube rises in the Black Forest. It flows through Vienna and Budapest to the Black Sea.",
    "vistula.md": "# Rivers\n\nThe Vistula is the longest river in Poland. Warsaw and Krakow stand on it.",
    "nile.txt": "The Nile flows north into the Mediterranean. Lake Victoria feeds the White Nile.",
}


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERAGRAPH_")}
    env.update({"ERAGRAPH_EMBEDDER": "hash", "ERAGRAPH_S_MIN": "2", "ERAGRAPH_S_MAX": "3",
                "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), os.environ.get("PYTHONPATH", "")])})
    env.update(extra)
    return env


def eragraph(*argv: str, env: dict[str, str] | None = None, timeout: float = 300, **kwargs
             ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eragraph", *argv], env=env or environment(),
                          capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A small store built by `eragraph ingest` (hash embedder)."""
    root = tmp_path_factory.mktemp("cli-unix")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    for i in range(8):
        (docs / f"river{i}.txt").write_text(f"River number {i} has a delta and a harbour town {i}.", encoding="utf-8")
    out = eragraph("ingest", str(docs), "--store", str(root / "store"), "--quiet")
    assert out.returncode == 0, out.stderr
    return root / "store"


def closed_stdout_run(argv: list[str]) -> tuple[int, str]:
    """Run the CLI with a stdout pipe whose reader is gone before anything is written (what
    `| head -n 1` leaves once head has its line): returns (status, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "eragraph", *argv], env=environment(), stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("argv", [
    ["query", "Which river flows through Vienna?", "--json"],
    ["query", "Which river flows through Vienna?"],
    ["stats", "--json"],
    ["stats"],
], ids=["query-json", "query", "stats-json", "stats"])
def test_a_closed_stdout_ends_the_command_quietly(store, argv):
    status, err = closed_stdout_run([*argv, "--store", str(store)])
    assert status == EXIT_PIPE
    assert err == ""  # no BrokenPipeError traceback, no "Exception ignored" at shutdown


def test_head_of_a_long_output_has_no_traceback(store):
    """A real `| head -n 1` of the JSON output (many lines), three times."""
    command = (f"{sys.executable} -m eragraph.cli query 'river delta harbour' --store '{store}' --json --k 20 "
               f"| head -n 1")
    for _ in range(3):
        proc = subprocess.run(["bash", "-c", command], env=environment(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout == "{\n"
        assert proc.stderr == ""


def test_help_states_the_exit_statuses():
    out = eragraph("--help")
    assert out.returncode == 0
    assert "exit status" in out.stdout and "partial" in out.stdout and "141" in out.stdout
    _, err = closed_stdout_run(["--help"])
    assert err == ""  # argparse itself ignores a failed write of its help


def test_a_malformed_jsonl_line_is_a_partial_ingest(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "The Danube flows through Vienna."}) + "\n"
                      + '{"id": "b", "text": "broken\n'
                      + json.dumps({"id": "c", "text": "The Vistula flows through Warsaw."}) + "\n", encoding="utf-8")
    out = eragraph("ingest", str(corpus), "--store", str(tmp_path / "store"), "--quiet")
    assert out.returncode == EXIT_PARTIAL
    assert f"skipped {corpus}:2" in out.stderr and "1 skipped" in out.stdout and "2 added" in out.stdout

    out = eragraph("ingest", str(corpus), "--store", str(tmp_path / "store"), "--quiet", "--json")
    assert out.returncode == EXIT_PARTIAL and len(json.loads(out.stdout)["errors"]) == 1

    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    out = eragraph("ingest", str(bad), str(tmp_path / "missing.txt"), "--store", str(tmp_path / "store"), "--quiet")
    assert out.returncode == EXIT_ERROR  # nothing could be read
    assert "missing.txt: no such file" in out.stderr


def test_delete_of_some_unknown_refs_is_partial(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    store = str(tmp_path / "store")
    assert eragraph("ingest", str(docs), "--store", store, "--quiet").returncode == 0
    out = eragraph("delete", str(docs / "nile.txt"), "no-such-doc", "--store", store)
    assert out.returncode == EXIT_PARTIAL and "1 documents removed" in out.stdout and "no-such-doc" in out.stdout
    out = eragraph("delete", "no-such-doc", "--store", store)
    assert out.returncode == EXIT_ERROR


READ_COMMANDS = {
    "stats": ["stats"],
    "query": ["query", "Which river?"],
    "delete": ["delete", "danube.txt"],
    "reindex": ["reindex"],
    "serve": ["serve", "--port", "0"],
    "rebuild": ["rebuild"],
}


@pytest.mark.parametrize("command", list(READ_COMMANDS))
def test_read_commands_never_create_a_store(tmp_path, command):
    typo = tmp_path / "stroe"
    out = eragraph(*READ_COMMANDS[command], "--store", str(typo), timeout=60)
    assert out.returncode == EXIT_ERROR
    assert out.stderr.count("\n") == 1 and str(typo) in out.stderr and "eragraph ingest" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert not typo.exists()


def test_a_file_or_a_plain_folder_is_not_a_store(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a store", encoding="utf-8")
    for argv in (["stats"], ["query", "Which river?"], ["ingest", str(a_file)]):
        out = eragraph(*argv, "--store", str(a_file), timeout=60)
        assert out.returncode == EXIT_ERROR and "is a file" in out.stderr and "Traceback" not in out.stderr
    folder = tmp_path / "folder"
    folder.mkdir()
    out = eragraph("stats", "--store", str(folder), timeout=60)
    assert out.returncode == EXIT_ERROR and "not an eragraph store" in out.stderr
    assert list(folder.iterdir()) == []


def test_version_and_help_lines():
    from eragraph.cli.parser import package_version

    out = eragraph("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"eragraph {package_version()}"
    assert package_version()[0].isdigit()
    top = eragraph("--help").stdout
    assert "router" in top.split("positional arguments")[0]  # the description names every command
    helps = {name: eragraph(name, "--help").stdout for name in ("ingest", "query", "delete", "stats", "serve")}
    assert "PATH  " in helps["ingest"] and "a folder (walked" in helps["ingest"]
    assert "QUESTION  " in helps["query"] and "the question" in helps["query"]
    assert "DOC_ID_OR_SOURCE  " in helps["delete"] and "a document id" in helps["delete"]
    options = helps["query"].split("options:")[1]
    for flag, text in (("--k K", "how many results"), ("--generator", "who writes answers")):
        assert text in options.split(flag, 1)[1].split("\n  -", 1)[0]
    assert "who writes the summaries" in helps["ingest"].split("options:")[1].split("--summarizer", 1)[1]


@pytest.mark.parametrize("command,flags", [
    ("stats", {"--json"}),
    ("reindex", {"--json", "--embedder", "--summarizer", "--stuck-after", "--profile"}),
    ("delete", {"--json", "--quiet", "--embedder", "--summarizer"}),
    ("serve", {"--quiet", "--embedder", "--generator", "--host", "--port", "--token", "--principals-file"}),
    ("query", {"--json", "--quiet", "--embedder", "--generator", "--mode", "--k", "--budget", "--p", "--answer", "--stream", "--rerank",
               "--server", "--filter", "--explain", "--as"}),
    ("ingest", {"--json", "--quiet", "--embedder", "--summarizer", "--batch-docs", "--csv-text", "--csv-id",
                "--csv-title", "--access"}),
    ("console", {"--quiet", "--api", "--auth", "--region", "--token-env", "--jwt-file", "--host", "--port"}),
    ("export", {"--json", "--as", "--profile"}),
])
def test_each_command_lists_only_the_flags_it_uses(command, flags):
    out = eragraph(command, "--help")
    listed = {word.strip(",") for line in out.stdout.split("options:")[1].splitlines()
              for word in line.split()[:1] if word.startswith("--")} - {"--help", "--store"}
    if command == "console":  # no store, and no --tenant: on AWS the tenant is the caller's identity's
        assert listed == flags and "--store" not in out.stdout
        return
    assert listed == flags | {"--tenant"}  # every store command but rebuild takes --tenant


def test_reindex_reads_as_a_report_and_json_only_with_json(store):
    out = eragraph("reindex", "--store", str(store))
    assert out.returncode == 0 and not out.stdout.lstrip().startswith("{")
    assert f"reindex of {store}" in out.stdout and "invariants hold" in out.stdout
    data = json.loads(eragraph("reindex", "--store", str(store), "--json").stdout)
    assert data["invariants"]["ok"] and "metrics" in data


def test_plain_query_output_names_the_route_for_every_mode(store):
    for mode in ("dense", "collapsed", "bm25"):
        out = eragraph("query", "Which river flows through Warsaw?", "--store", str(store), "--mode", mode)
        assert out.returncode == 0 and f"(route: {mode})" in out.stdout


def imported(stderr: str) -> set[str]:
    """Top-level packages a `python -X importtime` run imported."""
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in stderr.splitlines()
            if line.startswith("import time:") and "|" in line}


@pytest.mark.model
def test_a_query_loads_only_what_its_mode_needs_and_says_when_loading_dominated(tmp_path):
    """On a MiniLM store: bm25 loads neither torch nor spaCy; dense loads MiniLM (torch) but not
    spaCy, and since loading it is most of a cold query, stderr says once that `eragraph serve`
    keeps a warm engine (never with --json or --quiet)."""
    env = environment(ERAGRAPH_EMBEDDER="minilm", ERAGRAPH_NER="capitalized")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    store = str(tmp_path / "store")
    assert eragraph("ingest", str(docs), "--store", store, "--quiet", env=env).returncode == 0

    def timed_query(mode: str, *flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-X", "importtime", "-m", "eragraph", "query",
                               "Which river flows through Warsaw?", "--store", store, "--mode", mode, *flags],
                              env=env, capture_output=True, text=True, timeout=300)

    bm25 = timed_query("bm25")
    assert bm25.returncode == 0 and "Vistula" in bm25.stdout
    assert not imported(bm25.stderr) & {"torch", "sentence_transformers", "spacy", "thinc"}
    dense = timed_query("dense")
    assert dense.returncode == 0 and "Vistula" in dense.stdout
    assert "torch" in imported(dense.stderr) and not imported(dense.stderr) & {"spacy", "thinc"}
    [hint] = [line for line in dense.stderr.splitlines() if not line.startswith("import time:")]
    assert hint.startswith("eragraph: ") and f"`eragraph serve --store {store}`" in hint
    out = eragraph("query", "Which river flows through Warsaw?", "--store", store, "--mode", "dense", "--quiet", env=env)
    assert out.returncode == 0 and out.stderr == ""  # --json too: test_the_serve_hint_is_one_stderr_line...


def test_the_serve_hint_is_one_stderr_line_and_never_with_json_or_quiet(tmp_path, monkeypatch, capsys):
    """In process, with loading made slow on the query's clock (5 s pass while the models load,
    whatever the machine's speed): the hint's wording and when it is left out."""
    from types import SimpleNamespace

    from eragraph.cli import app as cli
    from eragraph.cli import query

    for k, v in environment().items():
        if k.startswith("ERAGRAPH_"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("ERAGRAPH_STORE", raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(DOCS["danube.txt"], encoding="utf-8")
    store = str(tmp_path / "store")
    assert cli.main(["ingest", str(docs), "--store", store, "--quiet"]) == 0
    capsys.readouterr()
    clock = [1000.0]
    monkeypatch.setattr(query, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(query, "preload", lambda engine, mode: clock.append(clock.pop() + 5.0))
    assert cli.main(["query", "Danube", "--store", store]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "went to opening the store and loading models" in err and "eragraph serve" in err
    for flag in ("--json", "--quiet"):
        assert cli.main(["query", "Danube", "--store", store, flag]) == 0
        assert capsys.readouterr().err == ""


def test_ingest_progress_has_totals_an_eta_and_a_drain_stage_and_quiet_is_silent(tmp_path):
    """One large document (more chunks than one embedder slice) and a small corpus: the bar
    counts bytes of input against their total with documents done/total beside it, the chunk bar
    moves within the large document with an ETA,
    the drain shows summaries per layer; --quiet prints only the skip message."""
    import random
    import re

    rng = random.Random(7)
    words = " ".join(DOCS.values()).replace(".", "").split()
    big = tmp_path / "big.txt"
    big.write_text(" ".join(" ".join(rng.choice(words) for _ in range(12)) + "." for _ in range(2500)),
                   encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": DOCS["danube.txt"]}) + "\n{broken\n"
                      + json.dumps({"id": "b", "text": DOCS["nile.txt"]}) + "\n", encoding="utf-8")
    env = environment(ERAGRAPH_CHUNK_TOKENS="20", ERAGRAPH_CHUNK_OVERLAP="4", ERAGRAPH_S_MIN="6",
                      ERAGRAPH_S_MAX="12", ERAGRAPH_MAX_DOCUMENT_BYTES="10000000")
    out = eragraph("ingest", str(big), str(corpus), "--store", str(tmp_path / "store"), "--json", env=env)
    assert out.returncode == EXIT_PARTIAL
    report = json.loads(out.stdout)  # stdout holds the JSON only
    chunks = report["chunks_added"]
    assert chunks > 1024
    err = out.stderr.replace("\r", "\n")
    # the bars draw a frame at every event, whatever the machine's speed: the first frame has the counts
    first = next(line for line in err.splitlines() if line.startswith("ingest:"))
    assert first.startswith("ingest:   0%") and first.endswith("docs 0/4, chunks 0]")  # 3 documents + 1 skipped line
    assert f"docs 4/4, chunks {chunks}]" in err and "ingest: 100%" in err
    assert re.search(r"ingest: +[1-9]\d?%\|.*\[\d\d:\d\d<\d\d:\d\d, .*B/s, docs 0/4", err)  # moving, with an ETA
    assert re.search(rf"embedding: +\d+%\|.*\| 1024/{chunks} \[\d\d:\d\d<\d\d:\d\d", err)  # mid-document, ETA
    assert "entities:" in err and "writing:" in err
    assert re.search(r"summarize: \d+ summaries \[.*layer 1: \d+, layer 2: \d+", err)

    quiet = eragraph("ingest", str(corpus), "--store", str(tmp_path / "store2"), "--quiet", env=env)
    assert quiet.returncode == EXIT_PARTIAL
    assert quiet.stderr == f"skipped {corpus}:2: not JSON: Expecting property name enclosed in double quotes\n"


def test_stats_needs_no_embedder_flag(tmp_path):
    """A store built with --embedder hash reports its stats with no flag and ERAGRAPH_EMBEDDER unset
    (stats no longer takes --embedder: the store says what it was built with)."""
    env = {k: v for k, v in environment().items() if k != "ERAGRAPH_EMBEDDER"}
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(DOCS["danube.txt"], encoding="utf-8")
    store = str(tmp_path / "store")
    assert eragraph("ingest", str(docs), "--store", store, "--embedder", "hash", "--quiet", env=env).returncode == 0
    out = eragraph("stats", "--store", store, "--json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["embedder"].startswith("hashing-bow-v1")
