"""Benchmarks behind `eragraph bench`: growth (incremental vs. rebuild), retrieval, ingest
throughput and query latency. Each module exposes ``add_parser(subparsers)`` and
``run(args) -> dict``; ``bench.report`` turns the JSON results into the pages under
docs/benchmarks/."""
