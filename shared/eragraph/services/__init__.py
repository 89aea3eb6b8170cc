"""Use cases, one per module. They take ports (through an Engine) and return reports."""
