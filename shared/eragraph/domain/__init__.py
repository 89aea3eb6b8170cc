"""Pure domain code: no I/O, no clocks, no cloud SDKs (numpy/scipy only)."""
