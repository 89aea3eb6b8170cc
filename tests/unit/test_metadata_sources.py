"""Document metadata from every local input (services.sources): a JSONL line's ``metadata``, a
sidecar ``<file name>.metadata.json`` in Bedrock Knowledge Bases' shape (plain or typed
attributes) beside a file, a JSONL file or a CSV file read as rows. A bad one is the error entry
of its line or document, the rest goes on; a sidecar is never a document itself."""

from __future__ import annotations

import json

import pytest

from eragraph.cli.progress import count_inputs
from eragraph.domain.filters import RESERVED, MetadataError, check_metadata
from eragraph.services.sources import CsvMapping, parse_sidecar
from support import load_sources

TEXT = "The lighthouse on the northern cape logs every passing ship in a leather ledger."


def write_json(path, body) -> None:
    path.write_text(json.dumps(body), encoding="utf-8")


def by_name(docs) -> dict:
    return {d.source.rsplit("/", 1)[-1]: d for d in docs}


def errors_by_name(errors) -> dict:
    return {e["source"].rsplit("/", 1)[-1]: e["error"] for e in errors}


def typed(value) -> dict:
    """An attribute in Bedrock's typed form."""
    if isinstance(value, bool):
        return {"value": {"type": "BOOLEAN", "booleanValue": value}, "includeForEmbedding": False}
    if isinstance(value, (int, float)):
        return {"value": {"type": "NUMBER", "numberValue": value}, "includeForEmbedding": True}
    if isinstance(value, list):
        return {"value": {"type": "STRING_LIST", "stringListValue": value}}
    return {"value": {"type": "STRING", "stringValue": value}}


ATTRS = {"year": 2021, "score": 0.75, "lang": "en", "public": True, "tags": ["harbour", "ships"]}


def test_jsonl_lines_carry_metadata_and_a_bad_one_is_that_lines_error(tmp_path):
    rows = [
        {"id": "a", "text": TEXT, "metadata": {"year": 2020, "tags": ["x", "y"], "draft": False}},
        {"id": "b", "text": TEXT},                                           # no metadata: {}
        {"id": "c", "text": TEXT, "metadata": {"source": "elsewhere"}},      # reserved key
        {"id": "d", "text": TEXT, "metadata": ["not", "an", "object"]},
        {"id": "e", "text": TEXT, "metadata": {"nested": {"a": 1}}},
        {"id": "f", "text": TEXT, "metadata": {"tags": [1, 2]}},
        {"id": "g", "text": TEXT, "metadata": None},
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    docs, errors, _ = load_sources([corpus])
    got = {d.doc_id: d.metadata for d in docs}
    assert got == {r["id"]: check_metadata(r.get("metadata")) for r in rows if r["id"] in ("a", "b", "g")}
    why = {e["source"].rsplit(":", 1)[-1]: e["error"] for e in errors}
    assert set(why) == {"3", "4", "5", "6"}  # the line numbers of c, d, e, f
    assert "'source' is reserved" in why["3"] and all(k in why["3"] for k in RESERVED)
    assert "JSON object" in why["4"]
    assert "metadata.nested" in why["5"]
    assert "metadata.tags" in why["6"] and "strings" in why["6"]


@pytest.mark.parametrize("form", ["plain", "typed"])
def test_a_sidecar_beside_a_file_gives_its_metadata_and_is_no_document(tmp_path, form):
    (tmp_path / "report.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "other.md").write_text("# Other\n\n" + TEXT, encoding="utf-8")
    attrs = ATTRS if form == "plain" else {k: typed(v) for k, v in ATTRS.items()}
    write_json(tmp_path / "report.txt.metadata.json", {"metadataAttributes": attrs})
    docs, errors, _ = load_sources([tmp_path])
    assert errors == []
    got = by_name(docs)
    assert set(got) == {"report.txt", "other.md"}
    assert got["report.txt"].metadata == check_metadata(ATTRS)
    assert not got["other.md"].metadata
    # named on its own, a file picks up its sidecar; a sidecar named beside its document is skipped
    docs, errors, _ = load_sources([tmp_path / "report.txt", tmp_path / "report.txt.metadata.json"])
    assert errors == [] and [d.metadata for d in docs] == [check_metadata(ATTRS)]
    assert count_inputs([tmp_path]) == 2


@pytest.mark.parametrize("body,words", [
    (b"{not json", ["not UTF-8 JSON"]),
    (b"\xff\xfe{}", ["not UTF-8 JSON"]),
    (json.dumps({"year": 2020}).encode(), ["metadataAttributes", "'year'"]),
    (json.dumps({"metadataAttributes": {"a": 1}, "documentStructure": {}}).encode(),
     ["metadataAttributes", "documentStructure"]),
    (json.dumps([1, 2]).encode(), ["a JSON list"]),
    (json.dumps({"metadataAttributes": {"source": "x"}}).encode(), ["'source' is reserved"]),
    (json.dumps({"metadataAttributes": {"bad key": "x"}}).encode(), ["'bad key'"]),
    (json.dumps({"metadataAttributes": {"year": {"value": {"type": "NUMBER", "stringValue": "2020"}}}}).encode(),
     ["year", "numberValue"]),
    (json.dumps({"metadataAttributes": {"year": {"value": {"type": "DATE", "stringValue": "2020"}}}}).encode(),
     ["year", "STRING_LIST"]),
    (json.dumps({"metadataAttributes": {"ok": {"value": {"type": "BOOLEAN", "booleanValue": 1}}}}).encode(),
     ["ok", "booleanValue"]),
    (json.dumps({"metadataAttributes": {"n": {"value": {"type": "NUMBER", "numberValue": True}}}}).encode(),
     ["n", "numberValue"]),
    (json.dumps({"metadataAttributes": "year=2020"}).encode(), ["JSON object of attributes"]),
])
def test_a_malformed_sidecar_is_its_documents_error_and_the_rest_goes_on(tmp_path, body, words):
    (tmp_path / "bad.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "bad.txt.metadata.json").write_bytes(body)
    (tmp_path / "good.txt").write_text(TEXT, encoding="utf-8")
    docs, errors, _ = load_sources([tmp_path])
    assert list(by_name(docs)) == ["good.txt"]
    why = errors_by_name(errors)
    assert list(why) == ["bad.txt"]
    assert why["bad.txt"].startswith("metadata sidecar bad.txt.metadata.json")
    for word in words:
        assert word in why["bad.txt"]
    with pytest.raises(MetadataError):
        parse_sidecar(body, "sidecar")


def test_a_sidecar_without_its_document_is_an_error_entry(tmp_path):
    (tmp_path / "kept.txt").write_text(TEXT, encoding="utf-8")
    write_json(tmp_path / "gone.pdf.metadata.json", {"metadataAttributes": {"year": 2020}})
    docs, errors, _ = load_sources([tmp_path])
    assert [d.source.rsplit("/", 1)[-1] for d in docs] == ["kept.txt"]
    why = errors_by_name(errors)
    assert list(why) == ["gone.pdf.metadata.json"] and "'gone.pdf'" in why["gone.pdf.metadata.json"]
    assert count_inputs([tmp_path]) == 2  # one document, one skip message


def test_a_jsonl_files_sidecar_applies_to_each_row_and_the_rows_own_wins(tmp_path):
    rows = [{"id": "a", "text": TEXT, "metadata": {"lang": "de", "page": 3}},
            {"id": "b", "text": TEXT},
            {"id": "c", "text": TEXT, "metadata": {"title": "reserved"}}]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    sidecar = {"lang": "en", "collection": "harbour"}
    write_json(tmp_path / "corpus.jsonl.metadata.json", {"metadataAttributes": sidecar})
    docs, errors, _ = load_sources([tmp_path])
    got = {d.doc_id: d.metadata for d in docs}
    assert got == {"a": {**sidecar, **rows[0]["metadata"]}, "b": sidecar}
    assert [e["source"].rsplit(":", 1)[-1] for e in errors] == ["3"]
    # too many keys once merged: the row's error
    many = {f"k{i}": i for i in range(30)}
    write_json(tmp_path / "corpus.jsonl.metadata.json", {"metadataAttributes": many})
    corpus.write_text(json.dumps({"id": "z", "text": TEXT, "metadata": {f"r{i}": i for i in range(30)}}),
                      encoding="utf-8")
    docs, errors, _ = load_sources([corpus])
    assert docs == [] and "60 keys" in errors[0]["error"]


def test_csv_rows_take_their_files_sidecar(tmp_path):
    table = tmp_path / "ships.csv"
    table.write_text("id,name,text\n1,Farbeacon,A lighthouse keeper logs ships.\n2,Tidewright,A ledger of tides.\n",
                     encoding="utf-8")
    write_json(tmp_path / "ships.csv.metadata.json", {"metadataAttributes": {"kind": typed("registry")}})
    docs, errors, _ = load_sources([tmp_path], csv_mapping=CsvMapping(text="text", id="id", title="name"))
    assert errors == [] and len(docs) == 2
    assert all(d.metadata == {"kind": "registry"} for d in docs)
