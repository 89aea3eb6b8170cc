"""A store whose only content is tenants works from the first command: `ingest --tenant acme`
into an empty root, then every command with `--tenant acme` (query, stats, reindex, serve,
delete), `tenants` lists and deletes it; a command on the default tenant of such a root says
which tenants it holds, and no read creates the default tenant's store."""

from __future__ import annotations

import json
import re

import pytest
from serve_support import eragraph, get, post, serving

pytest.importorskip("aws_lambda_powertools")

TEXT = ("The lighthouse keeper of Skarvik island writes the ship log. Skarvik island has a lighthouse "
        "and a harbour for the ferry. ") * 3


def run_json(*argv: str) -> dict:
    out = eragraph(*argv, "--json")
    assert out.returncode == 0, (argv, out.stderr)
    return json.loads(out.stdout)


def test_every_command_works_on_a_root_that_holds_only_a_tenant(tmp_path):
    root = tmp_path / "store"  # does not exist yet: the first command makes it
    doc = tmp_path / "skarvik.txt"
    doc.write_text(TEXT, encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text("A second note about the ferry timetable of the harbour. " * 3, encoding="utf-8")
    assert run_json("ingest", str(doc), str(other), "--store", str(root), "--tenant", "acme")["documents_added"] == 2
    assert not (root / "graph.sqlite").exists() and (root / "tenants" / "acme" / "graph.sqlite").is_file()

    answer = run_json("query", "Who keeps the Skarvik lighthouse?", "--store", str(root), "--tenant", "acme")
    assert "Skarvik" in answer["results"][0]["text"]
    acme_stats = run_json("stats", "--store", str(root), "--tenant", "acme")
    assert acme_stats["documents"] == 2
    kb_id = acme_stats["knowledge_base_id"]
    assert re.fullmatch(r"[0-9a-zA-Z]{10}", kb_id)
    listing = run_json("tenants", "--store", str(root))
    assert listing["tenants"] == ["acme"]
    assert listing["knowledge_base_ids"]["acme"] == kb_id != listing["knowledge_base_ids"][""]
    assert eragraph("reindex", "--store", str(root), "--tenant", "acme", "--json").returncode == 0

    with serving(root, "--tenant", "acme") as url:
        status, body = post(url, {"query": "Skarvik lighthouse keeper", "mode": "dense"})
        assert status == 200 and "Skarvik" in body["results"][0]["text"]
        status, stats = get(url, "/stats")
        assert status == 200 and stats["documents"] == 2 and stats["knowledge_base_id"] == kb_id

    # the default tenant of this root: one line naming its tenants, and nothing is created
    out = eragraph("query", "lighthouse", "--store", str(root))
    assert out.returncode == 1 and "holds only tenants (acme)" in out.stderr and "--tenant" in out.stderr
    out = eragraph("stats", "--store", str(root))
    assert out.returncode == 1 and "holds only tenants (acme)" in out.stderr
    assert not (root / "graph.sqlite").exists()

    assert run_json("delete", str(doc), "--store", str(root), "--tenant", "acme")["documents_removed"] == 1
    assert run_json("stats", "--store", str(root), "--tenant", "acme")["documents"] == 1
    report = run_json("tenants", "--store", str(root), "--delete", "acme")
    assert report["before"]["documents"] == 1 and report["after"]["files"] == 0
    assert run_json("tenants", "--store", str(root))["tenants"] == []
    assert not (root / "graph.sqlite").exists()
