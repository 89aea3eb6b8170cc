"""pynamodb models of the single-table graph store.

One table, generic key attributes, item kinds told apart by their keys:

    PK                  SK              item
    META                KEY#<key>       store metadata (settings, dirty:<layer> markers), JSON value
    META                LSH             the hyperplanes (written once, conditionally); ``version``:
                                        the ref layout (ref_layout.REF_LAYOUT_VERSION)
    LEDGER              KIND#<kind>\0<shard>  cost ledger counters (atomic ADD; 16 shards a kind,
                                        read summed; KIND#<kind> before shards)
    LEDGER#HOURS        <hour>#<kind>\0<shard>  the hourly buckets, likewise (``expires_at``)
    DOC#<doc_id>        DOC             a document (``metadata``: its attributes, JSON);
                                        GSI2 BySource: SRC#<source> / <doc_id>
                                        (a tombstone: status "deleted", no chunks, no GSI2 keys)
    NODE#<node_id>      NODE            a graph node (text, code, children...)
    REF#<layer>#b<bits>#<shard>
                        <code>#<node>   the node in its layer's code-ordered index: ``seg``, ``live``
                                        (2^bits partitions, growing with the layer: ref_layout;
                                        a store older than it: REF#<layer>#<shard>)
    SEGS#<layer>#<b>    SEG#<seg_id>    a segment of a layer (b: a bucket of its id)
    COUNT               LAYER#<layer>   live nodes of a layer (``version``, atomic ADD) and its ref
                                        layout (``bits``; ``moving`` during a move)
    COUNT               SEGSIZE#<layer>#<size>  segments of that size in the layer (``version``, ADD)
    COUNT               STATUS          documents per status counter key (``n_<key>``, ADD)
    STATUSDIR#<prefix>  COUNT           the same under a source directory (status_dynamodb)
    STATUS#<doc_id>     STATUS          a document's status (``counted``: in the counters; else ``counted_as``)
    STATUSBY            <source>\0<id>  the status listing (a copy of the record)
    ENT#<entity>        ENT             an entity of the entity graph: ``freq`` (atomic ADD)
    ENT#<entity>        CHUNK#<chunk>   a posting: ``weight`` = occurrences of the entity in the chunk
    ENT#<entity>        SENT#<sentence> a mention (the sentence mentions the entity)
    ENT#<entity>        COOC#<entity2>  co-occurrence: ``weight`` = sentences mentioning both (atomic ADD)
    ENT#<entity>        SYN#<entity2>   synonymy: ``weight`` = cosine of the two names (both directions)
    CHUNK#<chunk>       ENTITIES        a chunk's sentences and their entities (JSON ``value``)
    CHUNK#<chunk>       PENDING         an add in progress: its record and token (JSON ``value``)
    CHUNK#<chunk>       PART#<k>        marker: part k of the chunk's counter updates is applied
    META                ENTITY#GEN      the entity graph's generation (``version``, atomic ADD)
    META                ENTITY#COUNT    the number of entities (``version``, atomic ADD)

Tenants (domain.tenants): a tenant's items are the same items with ``T#<tenant>#`` before their
``PK`` (and ``GSI2PK``): ``T#acme#DOC#<doc_id>``, ``T#acme#REF#0#3``, ``T#acme#META#...``. The
prefix is added and removed by the key attribute (``NamespacedKey``) of the tenant's model
classes, so the stores' code builds and reads the same keys in every tenant, and a tenant's store
cannot name another's item. The few scans (audits) add ``in_namespace()``. The tenant registry
is ``TENANTS`` / ``T#<tenant>`` in the default namespace (bootstrap.tenancy).

Why a single table: every access is a key lookup or a one-partition query with a key range (a
code range of the ref index is a Query on the shard(s) it spans; ``apply_region`` is one
transaction on one table); on-demand billing and PITR are configured once. No partition
holds a whole layer. The sparse GSI BySource serves the one non-key read: the documents of a
source key. (Earlier versions kept a per-layer node index, ByLayer: one hot partition per layer,
eventually consistent; the ref index replaces it.)

The table name and endpoint are only known at run time, so the model classes are built by
``build_models`` (pynamodb binds a table through the model's ``Meta``). The key schema here must
match ``template.yaml``; the tests create their moto tables from the template, not from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pynamodb.attributes import (
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

BY_SOURCE = "BySource"
TENANT_KEY = "T#"  # a tenant's keys start with T#<tenant>#; no key of the default namespace does


def namespace_prefix(tenant: str) -> str:
    return f"{TENANT_KEY}{tenant}#" if tenant else ""


class NamespacedKey(UnicodeAttribute):
    """A key attribute whose stored value is the tenant's prefix + the value the code uses. The
    prefix is added wherever pynamodb serializes the attribute (items written, keys of gets,
    queries, batch gets, transactions, condition values such as ``startswith``) and removed
    when an item is read."""

    def __init__(self, prefix: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.prefix = prefix

    def serialize(self, value: str) -> str:
        return self.prefix + value

    def deserialize(self, value: str) -> str:
        if not value.startswith(self.prefix):  # never read: every read is inside the namespace
            raise ValueError(f"key {value[:80]!r} is outside the namespace {self.prefix!r}")
        return value[len(self.prefix):]


@dataclass(frozen=True)
class TableModels:
    item: type[Model]
    by_source: GlobalSecondaryIndex
    tenant: str = ""

    def in_namespace(self):
        """The condition a scan adds to read only this namespace's items: the tenant's prefix,
        or (the default namespace) no tenant's prefix."""
        pk = self.item.PK
        return pk.startswith("") if self.tenant else ~pk.startswith(TENANT_KEY)


def build_models(table_name: str, region: str | None = None, host: str | None = None,
                 tenant: str = "") -> TableModels:
    """Model classes bound to ``table_name`` (``host``: an endpoint URL, e.g. a local moto) and
    to ``tenant``'s namespace ("" the default)."""
    prefix = namespace_prefix(tenant)

    meta_attrs = {"table_name": table_name, "max_retry_attempts": 8}
    if region:
        meta_attrs["region"] = region
    if host:
        meta_attrs["host"] = host

    class BySource(GlobalSecondaryIndex):
        class Meta:
            index_name = BY_SOURCE
            projection = AllProjection()

        GSI2PK = NamespacedKey(prefix, hash_key=True)
        GSI2SK = UnicodeAttribute(range_key=True)

    class GraphItem(Model):
        Meta = type("Meta", (), dict(meta_attrs))

        PK = NamespacedKey(prefix, hash_key=True)
        SK = UnicodeAttribute(range_key=True)
        GSI2PK = NamespacedKey(prefix, null=True)
        GSI2SK = UnicodeAttribute(null=True)
        by_source = BySource()

        # META / LSH: a JSON value
        value = UnicodeAttribute(null=True)
        # LEDGER
        calls = NumberAttribute(null=True)
        tokens_in = NumberAttribute(null=True)
        tokens_out = NumberAttribute(null=True)
        seconds = NumberAttribute(null=True)
        # TTL (the table's TimeToLiveSpecification): epoch seconds after which DynamoDB deletes the
        # item: hourly ledger rows, ingestion jobs and clientToken records (meta_dynamodb)
        expires_at = NumberAttribute(null=True)
        stamp = NumberAttribute(null=True)  # a meta key's time stamp (a dirty marker's): conditions compare it
        # a counter of one period (meta_dynamodb.add_within: the daily ingestion quota)
        period = UnicodeAttribute(null=True)
        total = NumberAttribute(null=True)
        # DOC
        source = UnicodeAttribute(null=True)
        content_hash = UnicodeAttribute(null=True)
        title = UnicodeAttribute(null=True)
        chunk_ids = ListAttribute(of=UnicodeAttribute, null=True)
        status = UnicodeAttribute(null=True)
        meta = UnicodeAttribute(null=True)
        metadata = UnicodeAttribute(null=True)  # the user's attributes, a JSON object (see dynamodb)
        doc_version = UnicodeAttribute(null=True)  # the S3 sequencer that wrote the document
        # NODE
        layer = NumberAttribute(null=True)
        text = UnicodeAttribute(null=True)
        tokens = NumberAttribute(null=True)
        code = NumberAttribute(null=True)
        doc_id = UnicodeAttribute(null=True)
        children = ListAttribute(of=UnicodeAttribute, null=True)
        place = ListAttribute(of=NumberAttribute, null=True)  # a chunk's place (domain.places)
        # SEG
        members = ListAttribute(of=UnicodeAttribute, null=True)
        summary_id = UnicodeAttribute(null=True)
        # REF: the node's segment and whether it is live (0: a tombstone)
        seg = UnicodeAttribute(null=True)
        live = NumberAttribute(null=True)
        # VERSION; META ENTITY#GEN / ENTITY#COUNT
        version = NumberAttribute(null=True)
        # COUNT / LAYER#<layer>: the layer's ref layout (adapters.aws.ref_layout)
        bits = NumberAttribute(null=True)
        moving = NumberAttribute(null=True)
        # ENT: total occurrences over live chunks; postings and co-occurrences: their count;
        # synonymy edges: the cosine
        freq = NumberAttribute(null=True)
        weight = NumberAttribute(null=True)
        born = UnicodeAttribute(null=True)  # ENT: the token of the add that created the entity
        # STATUS: 1 once counted in the status counters; the counters (COUNT / STATUS and
        # STATUSDIR#<prefix> / COUNT): documents per counter key (domain.status_counts)
        counted = NumberAttribute(null=True)
        # STATUS not counted (written by a role that may not write the counters): the record the
        # counters still hold for it, which its next counted write or the migration replaces
        counted_as = UnicodeAttribute(null=True)
        n_received = NumberAttribute(null=True)
        n_indexed = NumberAttribute(null=True)
        n_done = NumberAttribute(null=True)
        n_failed = NumberAttribute(null=True)

    return TableModels(item=GraphItem, by_source=GraphItem.by_source, tenant=tenant)
