"""The command line's grammar: every command with the flags it uses and the function that runs
it. A new command is its function in the module of its group and one ``command(...)`` here."""

from __future__ import annotations

import argparse
import importlib

from ..config import ProcessSettings
from ..services.modes import mode_names
from .admin import cmd_migrate, cmd_reindex, cmd_stats, cmd_status, cmd_tenants
from .console import cmd_console
from .exits import EXIT_HELP
from .ingest import cmd_delete, cmd_ingest, cmd_rebuild
from .portable import cmd_export, cmd_import
from .query import cmd_query
from .serve import cmd_mcp, cmd_serve
from .smoke import add_arguments as smoke_arguments
from .smoke import cmd_smoke
from .store import DEFAULT_STORE
from .tools import BENCH_MODULES, cmd_bench, cmd_demo, cmd_router_train

DESCRIPTION = """The `eragraph` command line: ingest, query, serve, console (the browser console over a deployed
API), smoke (a deployed stack end to end), mcp (the MCP tools over stdio), delete, stats, rebuild, reindex, migrate, export and import (a portable dump), demo,
bench, router (train the auto retrieval router)."""

PROVIDER_FLAGS = {
    "embedder": ("minilm", "bedrock", "hash",
                 "the embedder (default ERAGRAPH_EMBEDDER, else minilm); a store answers only with the one "
                 "it was built with"),
    "summarizer": ("extractive", "bedrock", "openai",
                   "who writes the summaries: extractive (no LLM), bedrock or openai (default ERAGRAPH_SUMMARIZER, "
                   "else extractive)"),
    "generator": ("none", "bedrock", "openai",
                  "who writes answers for --answer: none, bedrock or openai (default ERAGRAPH_GENERATOR, else none)"),
}


def package_version() -> str:
    """The installed distribution's version, else the package's own ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eragraph")
    except PackageNotFoundError:
        from .. import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eragraph", description=DESCRIPTION, epilog=EXIT_HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, func, *, providers: tuple[str, ...] = (), json_out: bool = True,
                quiet: str | None = None, store: str = "required", tenant: bool = True) -> argparse.ArgumentParser:
        """A subcommand with the flags it uses: --store (``required``; ``optional``: a default or
        --server; ``demo``: made if missing, no --tenant; ``default``: the demo's unless told; ``none``: no
        store, no --tenant), --json when it reports, --quiet when it writes anything to stderr besides
        errors, and the provider flags of the models it calls."""
        p = sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", epilog=EXIT_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(func=func)
        env_store = ProcessSettings.from_env().store or None
        if store == "required":
            p.add_argument("--store", default=env_store, required=not env_store, metavar="DIR",
                           help="the store directory (or ERAGRAPH_STORE)")
        elif store == "demo":
            p.add_argument("--store", default=env_store or DEFAULT_STORE, metavar="DIR",
                           help=f"the store directory (or ERAGRAPH_STORE; default {DEFAULT_STORE}); made if missing")
        elif store == "default":  # a command that reads the store `eragraph demo` made unless told another
            p.add_argument("--store", default=env_store or DEFAULT_STORE, metavar="DIR",
                           help=f"the store directory (or ERAGRAPH_STORE; default {DEFAULT_STORE}, the demo's)")
        elif store == "optional":
            p.add_argument("--store", default=env_store, metavar="DIR",
                           help="the store directory (or ERAGRAPH_STORE)")
        if tenant and store in ("required", "optional", "default"):
            p.add_argument("--tenant", default=ProcessSettings.from_env().tenant or None, metavar="ID",
                           help="the tenant whose store to use (or ERAGRAPH_TENANT; default: the default tenant); "
                                "locally its store is STORE/tenants/ID; on the aws profile, its partition of the stack's table")
        if json_out:
            p.add_argument("--json", action="store_true", help="machine-readable output (JSON on stdout)")
        if quiet:
            p.add_argument("--quiet", action="store_true", help=quiet)
        for flag in providers:
            *choices, text = PROVIDER_FLAGS[flag]
            p.add_argument(f"--{flag}", choices=choices, help=text)
        return p

    p = command("ingest", "ingest files, folders and .jsonl corpora (makes the store if missing)", cmd_ingest,
                providers=("embedder", "summarizer"), quiet="no progress bars")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a file (PDF, DOCX, HTML, CSV, Markdown or plain text, told apart by content), a folder "
                        "(walked recursively) or a .jsonl corpus (one {\"id\", \"title\", \"text\", \"metadata\"} "
                        "document per line, metadata optional); a file's metadata goes in a sidecar FILE.metadata.json "
                        "beside it ({\"metadataAttributes\": {\"year\": 2020}}, as Bedrock Knowledge Bases)")
    p.add_argument("--csv-text", dest="csv_text_column", metavar="COLUMN",
                   help="read CSV files' rows as documents, this column being the text (default "
                        "ERAGRAPH_CSV_TEXT_COLUMN; unset: a CSV file is one text document)")
    p.add_argument("--csv-id", dest="csv_id_column", metavar="COLUMN",
                   help="with --csv-text: the column of each row's document id (default ERAGRAPH_CSV_ID_COLUMN)")
    p.add_argument("--csv-title", dest="csv_title_column", metavar="COLUMN",
                   help="with --csv-text: the column of each row's title (default ERAGRAPH_CSV_TITLE_COLUMN)")
    p.add_argument("--batch-docs", type=int, default=256,
                   help="documents read, embedded and written per batch (memory holds one batch)")
    p.add_argument("--access", metavar="PRINCIPALS",
                   help="who may read the documents that carry no access list of their own: comma-separated "
                        "principals (group:NAME, user:NAME), stored as their metadata's \"access\" list "
                        "(docs/tenants.md, \"Permissions inside a tenant\")")

    p = command("query", "retrieve evidence (and an answer with --answer)", cmd_query,
                providers=("embedder", "generator"), store="optional",
                quiet="no hints on stderr (e.g. that `eragraph serve` keeps the models loaded)")
    p.add_argument("text", metavar="QUESTION", help="the question (quote it)")
    p.add_argument("--mode", default="collapsed",
                   help="retrieval mode: " + ", ".join(mode_names()) + " (default collapsed; auto: the complexity "
                        "router picks the dense side, fusion or tri_graph)")
    p.add_argument("--k", type=int, default=None,
                   help="how many results (1..100; default ERAGRAPH_TOP_K, else 5)")
    p.add_argument("--budget", type=int, default=None, help="token budget for the evidence (default ERAGRAPH_TOKEN_BUDGET)")
    p.add_argument("--p", type=float, default=None, help="proportion for detailed/summarized")
    p.add_argument("--answer", action="store_true", help="generate an answer (needs a generator)")
    p.add_argument("--rerank", type=int, nargs="?", const=True, default=None, metavar="N",
                   help="re-order the results with the configured reranker (ERAGRAPH_RERANKER), from N "
                        "candidates (default ERAGRAPH_RERANK_CANDIDATES)")
    p.add_argument("--stream", action="store_true",
                   help="with a local --store: print the answer as the generator writes it (implies --answer)")
    p.add_argument("--as", dest="as_principals", metavar="PRINCIPALS",
                   help="ask as these principals (comma-separated group:NAME, user:NAME; an operator's switch, local "
                        "--store only): every mode answers inside what they may read (docs/tenants.md)")
    p.add_argument("--explain", action="store_true",
                   help="say why the entity-graph modes ranked the results so: seeds, activated entities, each "
                        "passage's restart weight, score and connecting entities")
    p.add_argument("--filter", action="append", metavar="EXPR",
                   help="only chunks of documents whose metadata match: KEY OP VALUE with OP one of = != > >= < "
                        "<= ^= (starts with), 'KEY in [a,b]', 'KEY not in [a,b]', or a Bedrock KB JSON filter; "
                        "repeat to require all (built-in keys: source, doc_id, title)")
    p.add_argument("--server", default=ProcessSettings.from_env().server or None, metavar="URL",
                   help="ask a running `eragraph serve` at URL instead of opening the store "
                        "(or ERAGRAPH_SERVER); --store is then not needed")

    p = command("serve", "serve the browser console and the query API (as deployed) over one warm engine on "
                "127.0.0.1", cmd_serve, providers=("embedder", "generator"), json_out=False,
                quiet="no request log on stderr", store="default")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (0 picks a free one; default 8765)")
    p.add_argument("--token", default=ProcessSettings.from_env().serve_token or None, metavar="TOKEN",
                   help="ask 'authorization: Bearer TOKEN' on every route but GET /health and the console's files "
                        "(or ERAGRAPH_SERVE_TOKEN); required with a --host beyond this machine")
    p.add_argument("--principals-file", default=ProcessSettings.from_env().serve_principals_file or None,
                   metavar="FILE", help="a JSON object mapping bearer tokens to principals ({\"TOKEN\": "
                        "[\"group:finance\", \"user:alice\"]}; or ERAGRAPH_SERVE_PRINCIPALS_FILE): a request with "
                        "one is answered inside its principals on every door, the --token holder reads everything")

    p = command("console", "the browser console on 127.0.0.1 over a deployed stack's HTTP API, each call signed "
                           "with your credentials (no website is hosted)", cmd_console, json_out=False,
                quiet="no request log on stderr", store="none", tenant=False)
    p.add_argument("--api", required=True, metavar="URL",
                   help="the stack's ApiUrl output (https://ID.execute-api.REGION.amazonaws.com)")
    p.add_argument("--auth", choices=("iam", "jwt"),
                   help="how the API authorizes (the stack's ApiAuthMode): iam signs with SigV4 and your AWS "
                        "credentials (botocore's chain: environment, AWS_PROFILE, SSO, instance role); jwt sends "
                        "Authorization: Bearer (default iam, jwt when --token-env or --jwt-file is given)")
    p.add_argument("--region", help="the API's region, when the URL's host does not name it (a custom domain)")
    token = p.add_mutually_exclusive_group()
    token.add_argument("--token-env", metavar="NAME", help="with --auth jwt: the variable holding the JWT")
    token.add_argument("--jwt-file", metavar="FILE",
                       help="with --auth jwt: a file holding the JWT, read again on every request (renew it there)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind: this machine only (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8766, help="port (0 picks a free one; default 8766)")

    p = command("smoke", "after `sam deploy`: put a document in the stack's bucket, wait for it to be done, ask "
                         "every door (HTTP, Bedrock KB Retrieve and RetrieveAndGenerate, MCP, the OpenAI-compatible "
                         "route) as two tenants' callers, delete it; pass or fail per step", cmd_smoke,
                store="none", tenant=False)
    smoke_arguments(p)

    command("mcp", "serve the store's tools (retrieve, answer, get_document, stats) to an MCP client over stdio",
            cmd_mcp, providers=("embedder", "generator"), json_out=False)

    p = command("delete", "remove documents by id or source", cmd_delete, providers=("embedder", "summarizer"),
                quiet="no progress on stderr")
    p.add_argument("refs", nargs="+", metavar="DOC_ID_OR_SOURCE",
                   help="a document id (a JSONL line's \"id\"; `eragraph query --json` shows doc_id) or the "
                        "source it came from: a file's path, or CORPUS.jsonl#ID")

    command("stats", "documents, layers, segments, cost ledger", cmd_stats)

    p = command("status", "documents' ingestion status: received, indexed, summaries pending, done, failed (why)",
                cmd_status)
    p.add_argument("--prefix", default="", help="count and list the documents whose source starts with this")
    p.add_argument("--doc", metavar="DOC_ID_OR_SOURCE", help="one document's status (with the reason of a failure)")

    p = command("rebuild", "build the same corpus from scratch for comparison", cmd_rebuild,
                providers=("embedder", "summarizer"), quiet="no progress bars", tenant=False)
    p.add_argument("--into", help="empty folder for the rebuilt store (default: a temp folder)")
    p.add_argument("--replace", action="store_true", help="replace the store with the rebuilt one")
    p.add_argument("--batch-docs", type=int, default=256, help="documents per batch")

    p = command("reindex", "audit and repair the store; report what was found", cmd_reindex,
                providers=("embedder", "summarizer"), store="optional")
    p.add_argument("--profile", default="local", choices=("local", "aws"),
                   help="local (--store DIR) or aws: the deployed stack of this environment (ERAGRAPH_TABLE, ...), "
                        "its --tenant audited whole, its audit time recorded as the scheduled reindex's")
    p.add_argument("--stuck-after", type=float, default=None, metavar="SECONDS",
                   help="seconds after which a dirty layer is re-queued (default 900; --profile aws: "
                        "ERAGRAPH_STUCK_AFTER_SECONDS, else 3600, as the reindex function)")

    p = command("migrate", "migrate a store built by an earlier version: titles (re-embed the continuation chunks "
                "of titled documents with their title), places (give chunks stored before chunk places their "
                "offsets, and pages where the source can be read again); resumable, a no-op once done", cmd_migrate,
                providers=("embedder",), store="optional", quiet="no progress bar")
    p.add_argument("what", choices=("titles", "places"), help="the migration: titles or places")
    p.add_argument("--no-progress", dest="quiet", action="store_true", help="no progress bar (as --quiet)")
    p.add_argument("--profile", default="local", choices=("local", "aws"),
                   help="local (--store DIR) or aws: the deployed stack of this environment (ERAGRAPH_TABLE, ...), "
                        "its --tenant")

    p = command("tenants", "list the store's tenants, or delete one and everything it owns", cmd_tenants,
                tenant=False)
    p.add_argument("--delete", metavar="ID", help="delete this tenant: its documents, vectors, entity graph and files")

    p = command("export", "write the store to a portable dump file (a backup; eragraph import loads it)", cmd_export,
                store="optional")
    p.add_argument("file", metavar="FILE", help="the dump to write (gzip-compressed JSON lines)")
    p.add_argument("--as", dest="as_principals", metavar="PRINCIPALS",
                   help="export only what these principals may read (comma-separated group:NAME, user:NAME; an "
                        "operator's command): their partitions' documents, chunks, summaries and entities, no cost "
                        "ledger (docs/tenants.md)")
    p.add_argument("--profile", default="local", choices=("local", "aws"),
                   help="local (--store DIR) or aws: the deployed stack of this environment (ERAGRAPH_TABLE, ...), "
                        "its --tenant")

    p = command("import", "load a dump (eragraph export) into an empty store, no re-embedding or re-summarizing",
                cmd_import, providers=("embedder",), store="optional")
    p.add_argument("file", metavar="FILE", help="the dump to load")
    p.add_argument("--profile", default="local", choices=("local", "aws"),
                   help="local (--store DIR) or aws: the deployed stack of this environment (ERAGRAPH_TABLE, ...), "
                        "into --tenant")

    command("demo", "ingest the bundled sample corpus and answer a few questions", cmd_demo,
            providers=("embedder", "summarizer"), json_out=False, quiet="no progress bars", store="demo")

    bench = sub.add_parser("bench", help="benchmarks (growth, retrieval, ingest, query, scale, vectors, load, console)")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for name in BENCH_MODULES:
        try:
            module = importlib.import_module(f"eragraph.bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"eragraph.bench.{name}" or exc.name == "eragraph.bench":
                continue
            raise
        module.add_parser(bench_sub)
    bench.set_defaults(func=cmd_bench)

    router = sub.add_parser("router", help="the auto retrieval router (train)")
    router_sub = router.add_subparsers(dest="router_command", required=True)
    from ..training import router as router_training

    router_training.add_parser(router_sub).set_defaults(func=cmd_router_train)
    return parser
