"""Eragraph: an incrementally growing graph-RAG engine (EraRAG core + entity-graph retrieval)."""

__version__ = "0.1.0"
