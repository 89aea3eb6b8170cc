"""Adapters implementing the ports: memory (fakes), local (embedded defaults), aws. A module is
named ``<port>_<backend>`` on every profile (graph_memory, graph_sqlite, graph_dynamodb, ...)."""
