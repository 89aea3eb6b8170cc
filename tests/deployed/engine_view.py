"""The development side's view of what the deployed functions stored: an AWS-profile engine built
in the dev venv on the same moto + OpenSearch fake, and the engine internals the deployed tests
read (entity store, entity vectors, node ids per layer, the chaos digest).

Every access to engine internals of the deployed suite is in this file (the typed engine
fields ``engine.entities.store`` / ``.vectors``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from deployed import REGION, LoopbackCloud


def entity_store(engine) -> Any:
    return engine.entities.store if engine.entities is not None else None


def entity_vectors(engine) -> Any:
    return engine.entities.vectors if engine.entities is not None else None


def has_entity_graph(engine) -> bool:
    return engine.entities is not None


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """os.environ with ``values`` set (settings that the composition still reads from the
    process environment: ERAGRAPH_NER, ERAGRAPH_GRAPH_*, ...), restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def dev_aws_engine(cloud: LoopbackCloud, settings: Mapping[str, str]):
    """The AWS profile in the dev venv on the cloud the functions used (the OpenSearch fake's
    in-process object, so reading it adds no request to what the functions sent)."""
    from eragraph.bootstrap.aws import build_aws_engine

    env = {"AWS_REGION": REGION, "ERAGRAPH_TABLE": cloud.table, "ERAGRAPH_BUCKET": cloud.bucket,
           "ERAGRAPH_SUMMARIZE_QUEUE_URL": cloud.summarize_url, "ERAGRAPH_OPENSEARCH_ENDPOINT": cloud.search.endpoint,
           "ERAGRAPH_OPENSEARCH_INDEX": "eragraph-nodes", "ERAGRAPH_OPENSEARCH_ENTITY_INDEX": "eragraph-entities",
           "ERAGRAPH_AWS_ENDPOINT_URL": cloud.endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing", **settings}
    with environment(env):
        return build_aws_engine(environ=env, opensearch_client=cloud.search.fake)


def node_ids_by_layer(engine) -> dict[int, list[str]]:
    out, layer = {}, 0
    while True:
        refs = engine.graph.layer_refs(layer)
        if not refs and layer > 0:
            return out
        out[layer] = sorted(r.node_id for r in refs)
        layer += 1


def digest(engine) -> dict:
    """tests/chaos.py's digest of everything a run decides, less each document's ``version``
    (an S3 sequencer on AWS, "" for a local file: where the text came from, not what was built)."""
    from chaos import digest as full

    d = full(engine)
    d["documents"] = sorted((source, content_hash, chunks) for source, content_hash, _version, chunks in d["documents"])
    return d
