"""Adapters implementing the ports: memory (fakes), local (embedded defaults), aws."""
