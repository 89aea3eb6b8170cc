"""The reads of a tenant that must write nothing (tests/unit/test_reads_never_write.py on memory
and local, tests/aws/test_reads_never_write_aws.py on moto): a query in every fast and graph
mode, stats, and a document read, through an engine a read path gets (or a container still
holds) for a tenant that is unknown or deleted."""

from __future__ import annotations

from eragraph.services import doc_status
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.modes import available_modes
from eragraph.services.query import query
from eragraph.services.resummarize import drain
from eragraph.services.stats import stats
from tenant_cases import tenant_settings

SETTINGS = tenant_settings()
TEXT = ("The lighthouse keeper of Skarvik island writes the ship log. Skarvik island has a lighthouse "
        "and a harbour for the ferry from Orion Station. ") * 3
MODES = ("collapsed", "dense", "bm25", "hybrid", "tri_graph")


def fill(engine) -> None:
    ingest(engine, [SourceDoc(source=f"notes/{engine.tenant or 'default'}.txt", doc_id="skarvik", title="s",
                              text=TEXT)])
    drain(engine)


def read_everything(engine) -> list:
    """Every read, with what it answered (an unknown or deleted tenant's answer is empty)."""
    answers = []
    for mode in MODES:
        if mode in available_modes(engine):
            answers.append((mode, [r.id for r in query(engine, "Who keeps the Skarvik lighthouse?", mode=mode,
                                                       k=5).results]))
    answers.append(("stats", stats(engine)["documents"]))
    answers.append(("document", engine.graph.get_document("skarvik")))
    answers.append(("document status", doc_status.read(engine, "skarvik")))
    answers.append(("statuses", doc_status.listing(engine, "notes/")[1]))
    return answers


def assert_empty(answers: list) -> None:
    for name, answer in answers:
        assert not answer, (name, answer)
