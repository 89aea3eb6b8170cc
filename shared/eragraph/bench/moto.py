"""The AWS profile under moto, for the benchmarks that measure its storage (scale, deadline,
load): ``MotoProfile`` is the aws profile (bootstrap.aws_profile) with its DynamoDB table, S3
bucket and SQS queue served by moto (lean: bench/moto_lean.py), and what moto has no service
for, or the benchmarks keep in process, in memory; ``moto_engine`` makes those resources from
template.yaml and composes the engine over them.

moto has no OpenSearch. Given an OpenSearch client (``opensearch_stand_in``: the repository's
request-checking fake, tests/aws/fake_opensearch.py, behind bench/counting.CountingOpenSearch),
the profile keeps the aws profile's own OpenSearch adapters (the node and entity k-NN indexes,
the lexical index) over it, so their requests can be counted; without one, vectors in memory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..bootstrap.aws_profile import AwsProfile
from ..bootstrap.profile import compose
from ..config import Settings

REGION = "us-east-1"
BUCKET = "eragraph-bench-docs"
SNAPSHOT_BUCKET = "eragraph-bench-snapshots"  # the entity graph's snapshot (written only when asked)


class MotoProfile(AwsProfile):
    """The aws profile's DynamoDB (graph, entity graph) and S3 under moto, with the vectors in
    memory (moto has no OpenSearch, so no lexical index either), an in-process queue (the
    benchmark swaps in the SQS one when it measures it), word/punctuation tokens whatever the
    embedder, and model calls not metered into the table's ledger (the figures count the
    engine's own storage work)."""

    name = "moto"

    def tokenizer(self, settings):
        from ..providers.hashing import RegexTokenizer

        return RegexTokenizer()

    def ledger(self, graph):
        return None

    def vectors(self, dim):
        if self.opensearch_client is not None:
            return super().vectors(dim)
        from ..adapters.memory.vector_memory import MemoryVectorIndex

        return MemoryVectorIndex()

    def entity_vectors(self, dim):
        if self.opensearch_client is not None:
            return super().entity_vectors(dim)
        from ..adapters.memory.vector_memory import MemoryVectorIndex

        return MemoryVectorIndex()

    def queue(self):
        from ..adapters.memory.queue_memory import MemoryQueue

        return MemoryQueue()

    def lexical(self, graph, vectors):
        if self.opensearch_client is not None:
            return super().lexical(graph, vectors)
        return None


def load_template(template: Path) -> dict:
    """template.yaml as data; CloudFormation's tags (!Ref, !GetAtt, ...) read as None."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    with open(template, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=Loader)


def table_definition(template: Path, logical_id: str = "GraphTable") -> dict:
    props = load_template(template)["Resources"][logical_id]["Properties"]
    definition = {k: props[k] for k in ("AttributeDefinitions", "KeySchema") if k in props}
    if "GlobalSecondaryIndexes" in props:
        definition["GlobalSecondaryIndexes"] = [
            {k: v for k, v in gsi.items() if k in ("IndexName", "KeySchema", "Projection")}
            for gsi in props["GlobalSecondaryIndexes"]]
    definition["BillingMode"] = props.get("BillingMode", "PAY_PER_REQUEST")
    return definition


def find_template(args: Any) -> Path:
    for candidate in ([Path(args.template)] if args.template else
                      [Path.cwd() / "template.yaml", Path(__file__).resolve().parents[3] / "template.yaml"]):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("template.yaml not found (pass --template)")


FAKE_OPENSEARCH = Path("tests") / "aws" / "fake_opensearch.py"


def opensearch_stand_in(args: Any) -> Any:
    """The repository's OpenSearch fake (tests/aws/fake_opensearch.py, next to template.yaml: it
    checks every request against the documented k-NN API shapes and answers from numpy), its
    request log off (the benchmark counts instead: a log would keep every bulk body), behind a
    CountingOpenSearch. None when the repository's tests are not beside the template."""
    import collections
    import importlib.util
    import sys

    from .counting import CountingOpenSearch

    path = find_template(args).parent / FAKE_OPENSEARCH
    if not path.exists():
        return None
    name = "eragraph_bench_fake_opensearch"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    fake = sys.modules[name].FakeOpenSearch()
    fake.requests = collections.deque(maxlen=0)
    return CountingOpenSearch(fake)


@contextmanager
def moto_engine(name: str, args: Any, settings: Settings,
                opensearch_client: Any = None) -> Iterator[tuple[Any, str, Any]]:
    """An engine of MotoProfile for one run: the DynamoDB table of template.yaml, an S3 bucket
    and an SQS FIFO queue made under moto, no embedding cache; its vectors in
    ``opensearch_client`` when given (through the aws profile's OpenSearch adapters, as
    deployed), else in memory. Yields (engine, the queue's URL, the
    SQS client)."""
    import boto3
    from moto import mock_aws

    from .moto_lean import lean_moto

    table = f"eragraph-{name}"
    definition = table_definition(find_template(args))
    # mock_aws sets fake credentials for the process; every client below names its region
    with mock_aws(), lean_moto():
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=SNAPSHOT_BUCKET)
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName=f"eragraph-{name}.fifo",
                               Attributes={"FifoQueue": "true", "VisibilityTimeout": "60"})["QueueUrl"]
        boto3.client("dynamodb", region_name=REGION).create_table(TableName=table, **definition)
        profile = MotoProfile({"ERAGRAPH_TABLE": table, "ERAGRAPH_BUCKET": BUCKET,
                               "ERAGRAPH_SUMMARIZE_QUEUE_URL": url, "AWS_REGION": REGION,
                               # as the query function runs (template.yaml): walks from memory
                               "ERAGRAPH_ENTITY_GRAPH_WARM": "true", "ERAGRAPH_SNAPSHOT_BUCKET": SNAPSHOT_BUCKET},
                              opensearch_client=opensearch_client)
        yield compose(profile, settings.with_overrides(embed_cache=False)), url, sqs
