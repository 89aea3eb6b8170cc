"""Ids and layers of the entity graph's records in its vector index (shared by the entity
index, which writes them, and the graph modes, which read them)."""

ENTITY_LAYER = -1    # entity names
SENTENCE_LAYER = -2  # entity-bearing sentences (ERAGRAPH_SENTENCE_VECTORS=1)


def entity_vector_id(name: str) -> str:
    return "ent:" + name
