"""DynamoDB graph store (single table, see ``models``), by port: meta_dynamodb (MetaStore),
documents_dynamodb (DocumentStore), status_dynamodb (StatusStore), nodes_dynamodb (NodeStore);
dynamodb_table holds what they share; count_refs reads the refs it counts (ports.graph.RefsCountedByReading,
after nodes_dynamodb, so a count of the store's own there takes its place). ``DynamoGraphStore`` combines them and holds the whole
namespace (a tenant's deletion).

* Reads of many nodes use BatchGetItem (pynamodb re-requests UnprocessedKeys until done);
  writes use BatchWriteItem (pynamodb re-sends UnprocessedItems up to ``max_retry_attempts``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...domain.scoped import RefCount
from ...ports.graph import RefsCountedByReading
from .documents_dynamodb import DynamoDocumentStore
from .meta_dynamodb import DynamoMetaStore
from .models import TableModels, build_models
from .nodes_dynamodb import DynamoNodeStore
from .status_dynamodb import DynamoStatusStore

COUNT_LANES = 16  # count Queries of one walk side by side (count_refs_many)


class DynamoGraphStore(DynamoMetaStore, DynamoDocumentStore, DynamoStatusStore, DynamoNodeStore,
                       RefsCountedByReading):
    def __init__(self, table_name: str, region: str | None = None, host: str | None = None,
                 models: TableModels | None = None, code_bits: int | None = None, tenant: str = "") -> None:
        """``code_bits``: the LSH code width (the store's n_planes); read from the stored
        hyperplanes when not given. ``tenant``: the namespace (models.NamespacedKey) this store
        reads and writes ("" the default)."""
        self.models = models or build_models(table_name, region, host, tenant)
        self.Item = self.models.item
        self._code_bits = code_bits
        self._lsh_cache = None  # meta_dynamodb.get_lsh

    def count_refs_many(self, layer: int, ranges: Sequence[tuple[int, int]], cap: int | None = None) -> list[RefCount]:
        """``count_refs`` of each (lo, hi) range, the Queries side by side (COUNT_LANES at a
        time): the groups a reconcile's walk will count, known before it starts
        (services.layer_reads.counted_ahead), in about one round trip instead of one each."""
        from .round_trips import fan_out

        return fan_out(lambda r: self.count_refs(layer, r[0], r[1], cap), list(ranges), COUNT_LANES)

    # ----- the whole namespace (a tenant's deletion: bootstrap.tenancy) -----
    def namespace_size(self) -> int:
        """How many items this namespace holds (a scan of the table: an audit, not a query path)."""
        return sum(1 for _ in self.Item.scan(self.models.in_namespace(), attributes_to_get=["PK", "SK"]))

    def drop_namespace(self) -> int:
        """Delete every item of this tenant's namespace; the number deleted. A scan of the table
        filtered on the key prefix: a tenant's deletion is rare, and a sparse index that found
        its items without a scan would cost one more write on every write of every tenant.
        Idempotent: a second run (after a timeout) deletes what the first did not."""
        if not self.models.tenant:
            raise ValueError("the default namespace is not a tenant's: it is never dropped")
        deleted = 0
        self._lsh_cache = None
        with self.Item.batch_write() as batch:
            for item in self.Item.scan(self.models.in_namespace(), consistent_read=True,
                                       attributes_to_get=["PK", "SK"]):
                batch.delete(item)
                deleted += 1
        return deleted
