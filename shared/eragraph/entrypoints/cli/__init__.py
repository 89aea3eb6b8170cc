"""The ``eragraph`` command (``python -m eragraph`` runs it too)."""
