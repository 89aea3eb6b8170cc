"""Ports: the narrow, batch-first interfaces that services depend on, one module per concern.

Adapters (memory, local, aws) and providers (models) implement these; services import only
ports and domain. Every store adapter runs the same contract tests (tests/contract). Nothing is
re-exported here: import a name from the module that defines it.

- ``records``: the value types the ports pass (Hit, Summary, MemberSource, Answer)
- ``blobs``: BlobStore
- ``documents``: DocumentStore (documents, tombstones) and StatusStore (document statuses)
- ``graph``: MetaStore (settings, meta keys, cost ledger), NodeStore (nodes, refs, layers,
  segments, regions) and GraphStore, the store an adapter implements: all of them
- ``vectors``: VectorIndex
- ``lexical``: LexicalIndex
- ``queue``: MessageQueue
- ``providers``: the models (Embedder, Tokenizer, Summarizer, RevisingSummarizer, Generator,
  Reranker)
- ``tenants``: Namespaced, TenantRegistry
- ``entity``: the entity-graph port (EntityStore) and its records
"""
