"""Every environment variable eragraph reads is declared here, with its doc line, and read
nowhere else (tests/unit/test_architecture.py checks it):

- ``Settings`` (ERAGRAPH_<FIELD>, ERAGRAPH_GRAPH_<FIELD>): validated settings. Values come from
  defaults, then the environment, then explicit overrides (CLI flags). The graph-shaping ones are
  recorded in a store when it is created, and a reopened store keeps its own (see
  services.engine.open_settings);
- ``ApiLimits``: the query API's cost bounds;
- ``ProcessSettings``: one process's variables that are no store setting;
- ``AWS_ENV``: the AWS profile's resources, as the SAM template sets them;
- ``IdentitySettings``: how the API finds its caller's tenant;
- ``LIBRARY_ENV``: variables of the libraries eragraph loads, which eragraph sets."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

# Settings that shape the graph: fixed per store once it exists.
GRAPH_SETTINGS = ("s_min", "s_max", "n_planes", "seed", "max_layers", "chunk_tokens",
                  "chunk_overlap", "summary_tokens")


# Provider choices by name: bootstrap (the composition root) builds them, and checks at cold
# start that what a choice needs can be imported (bootstrap.preflight).
EMBEDDERS = ("minilm", "bedrock", "hash")
SUMMARIZERS = ("extractive", "bedrock", "openai")
GENERATORS = ("none", "bedrock", "openai")
RERANKERS = ("none", "bedrock", "cross-encoder")
ENTITY_EXTRACTORS = ("auto", "spacy", "spacy+nouns", "capitalized")
QUESTION_PARSERS = ("spacy", "none")


ENTITY_MATCHES = ("auto", "exact", "ann")
GRAPH_ROUTE_MODES = ("tri_graph", "paths")


@dataclass(frozen=True)
class GraphSettings:
    # LinearRAG (tri_graph)
    threshold: float = 0.4        # delta: an entity newly activated below it is pruned
    iterations: int = 3           # max semantic-bridging steps
    top_sentences: int = 3        # sentences per entity that propagate (0: the matrix form of eq. 5)
    damping: float = 0.5          # PPR damping d (probability of following an edge)
    lam: float = 0.5              # lambda: weight of sim(q, passage) in the passage init (paper: 0.05; 0.5 on MuSiQue dev)
    passage_weight: float = 0.05  # W_p
    minmax: bool = False          # min-max normalize sim(q, passage) before lambda (as LinearRAG's code does)
    # paths (PropRAG's beam search over sentence paths, services.path_query)
    path_passages: int = 20       # the subgraph: tri_graph's best passages by PageRank mass
    path_beam: int = 4            # paths kept per length (and seed sentences of each kind)
    path_depth: int = 3           # sentences on a path at most
    path_mass: float = 0.1        # weight of the passages' PageRank mass in a path's score
    path_weight: float = 1.0      # the path ranking's weight in its fusion with the PageRank ranking
    route: str = "tri_graph"      # the graph mode of auto's graph route and of fusion's graph list (or paths)
    # the second hop of tri_graph, dense and hybrid (services.second_hop): the top passage's
    # entities the question did not name re-seed the walk or join the question (0: no second hop)
    hop_entities: int = 0
    hop_weight: float = 1.0       # the second hop's ranking's weight in its fusion with the first
    # TERAG (concept_ppr)
    concept_damping: float = 0.85
    semantic_top: int = 3         # semantic matches per query entity without an exact match
    # E2GraphRAG (local_global)
    hops: int = 2                 # h, shrunk while more than k chunks
    match_threshold: float = 0.8  # a query entity maps to a graph entity this similar (if not exact)
    # execution
    exact: bool | None = None     # None: exact PPR when the store can export matrices
    push_epsilon: float = 3e-5    # ACL push: a node is pushed while residual >= epsilon * degree
    push_dense_top: int = 100     # passages seeded by similarity in the push execution
    push_hub_cap: int = 0         # > 0: a node spreads along only its N heaviest edges (0: all)
    push_max_rounds: int = 200    # batched rounds of the push (one neighbourhood read each)
    # synonymy edges (HippoRAG 2): entity names at least this cosine-similar get an edge, kept
    # at insert for each new entity's ``synonym_top`` nearest names while synonym_weight > 0
    # (>= 1.0, top 0 or weight 0: no edges kept)
    synonym_threshold: float = 0.8
    synonym_top: int = 8
    synonym_weight: float = 0.0   # tri_graph: a synonymy edge weighs this times its cosine (0: unused)
    # how the exact execution matches a query's entity names to the graph's (services.entity_match):
    # exact (a product with every entity vector) | ann (one batched search of the entity vector
    # index) | auto (exact below ann_from entities, ann from there on)
    entity_match: str = "auto"
    ann_from: int = 100_000

    def __post_init__(self) -> None:
        if self.route not in GRAPH_ROUTE_MODES:
            raise ValueError(f"unknown route {self.route!r} (choose {', '.join(GRAPH_ROUTE_MODES)})")
        if self.entity_match not in ENTITY_MATCHES:
            raise ValueError(f"unknown entity_match {self.entity_match!r} (choose {', '.join(ENTITY_MATCHES)})")

    @property
    def synonyms_on(self) -> bool:
        """Whether inserts keep synonymy edges: only while the walk weighs them. Kept unused,
        they cost each insert an ANN search of every new entity name and the edges' writes (at
        1M chunks locally about an eighth of a single insert, profiled); a store whose weight
        is set later gets them from reindex (services.synonyms.backfill)."""
        return self.synonym_weight > 0 and self.synonym_threshold < 1.0 and self.synonym_top > 0

    @classmethod
    def from_env(cls, environ=None, **overrides) -> GraphSettings:
        """ERAGRAPH_GRAPH_<FIELD> variables over the defaults (``exact``: 1/true/yes, else false)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get("ERAGRAPH_GRAPH_" + f.name.upper())
            if raw:
                if f.name == "exact":
                    values[f.name] = raw.strip().lower() in ("1", "true", "yes")
                else:
                    try:
                        values[f.name] = type(getattr(cls(), f.name))(raw)
                    except ValueError as exc:
                        raise ValueError(f"ERAGRAPH_GRAPH_{f.name.upper()}={raw!r}: {exc}") from None
        return replace(cls(**values), **{k: v for k, v in overrides.items() if v is not None})


# The price table of the cost ledger: USD per million tokens (input, output) by model, keyed
# like the providers' identities. List prices (us-east-1, on-demand, late 2025; check current
# pricing); ERAGRAPH_PRICES (a JSON object {"model": [in, out]}) overrides or adds entries. Local
# models cost nothing per token. A model missing from the table is reported as unpriced.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    # Amazon Bedrock
    "bedrock:amazon.titan-embed-text-v2:0": (0.02, 0.0),
    "bedrock:anthropic.claude-3-haiku-20240307-v1:0": (0.25, 1.25),
    "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0": (0.80, 4.00),
    "bedrock:anthropic.claude-3-5-sonnet-20240620-v1:0": (3.00, 15.00),
    "bedrock:amazon.nova-micro-v1:0": (0.035, 0.14),
    "bedrock:amazon.nova-lite-v1:0": (0.06, 0.24),
    "bedrock:meta.llama3-1-8b-instruct-v1:0": (0.22, 0.22),
    # Bedrock Rerank is billed per query of up to 100 passages, not per token: its ledger rows
    # count billed queries as tokens_in, so the price is USD per million queries
    "bedrock:amazon.rerank-v1:0": (1000.0, 0.0),
    "bedrock:cohere.rerank-v3-5:0": (2000.0, 0.0),
    # OpenAI-compatible endpoints (OpenAI's list prices; a self-hosted model: override with 0)
    "openai:gpt-4o-mini": (0.15, 0.60),
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    # local models: no per-token price
    "sentence-transformers/all-MiniLM-L6-v2": (0.0, 0.0),
    "extractive-tfidf-v3": (0.0, 0.0),
    "hashing-bow-v1": (0.0, 0.0),
}


@lru_cache(maxsize=32)
def parse_prices(raw: str) -> dict[str, tuple[float, float]]:
    """DEFAULT_PRICES updated with the JSON object ``raw`` ({"model": [usd_in, usd_out] per
    million tokens}; "" = no overrides)."""
    table = dict(DEFAULT_PRICES)
    if not raw.strip():
        return table
    try:
        given = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"prices must be a JSON object of model -> [in, out] USD per million tokens: {exc}") from None
    if not isinstance(given, dict):
        raise ValueError("prices must be a JSON object of model -> [in, out] USD per million tokens")
    for model, pair in given.items():
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and x >= 0 for x in pair)):
            raise ValueError(f"price of {model!r} must be [in, out] USD per million tokens, got {pair!r}")
        table[str(model)] = (float(pair[0]), float(pair[1]))
    return table


@dataclass(frozen=True)
class Settings:
    # EraRAG partitioning and layering. EraRAG's public code used 8-12; we keep S_max = 12 and
    # take S_min = 6 so that S_max >= 2*S_min - 1: then every count >= S_min can be cut within
    # the bounds, split decisions flip only at small counts, and one insert re-cuts fewer
    # segments (on MuSiQue's layer 0: 1.17 changed segments per insert, at most 3, against
    # 1.49 and up to 6 with 8-12; see domain/partition.py).
    s_min: int = 6
    s_max: int = 12
    n_planes: int = 20
    seed: int = 20250601
    max_layers: int = 5
    # chunking: all-MiniLM-L6-v2 reads at most 256 word pieces (incl. [CLS]/[SEP]); 200-piece
    # chunks with a 32-piece overlap stay well inside it, so nothing is silently truncated.
    chunk_tokens: int = 200
    chunk_overlap: int = 32
    summary_tokens: int = 120
    # re-summarize a changed segment by revising its previous summary with the children that
    # joined and left, when the summarizer can and that reads fewer tokens (services.resummarize)
    delta_summaries: bool = True
    # query
    top_k: int = 5
    token_budget: int = 2000
    bias_p: float = 0.6
    # providers, by name (bootstrap picks them)
    embedder: str = "minilm"          # minilm | bedrock | hash (tests only)
    summarizer: str = "extractive"    # extractive | bedrock | openai
    generator: str = "none"           # none | bedrock | openai
    # the rerank stage of a query that asks for it (ERAGRAPH_RERANKER): none | bedrock (Bedrock
    # Rerank) | cross-encoder (a local sentence-transformers CrossEncoder); ERAGRAPH_RERANK_MODEL:
    # the Bedrock model id or ARN ("" = amazon.rerank-v1:0), or the cross-encoder's folder;
    # ERAGRAPH_RERANK_CANDIDATES: results retrieved for the reranker when a query names no count
    reranker: str = "none"
    rerank_model: str = ""
    rerank_candidates: int = 20
    # the entity graph's NER (ERAGRAPH_NER): spacy | spacy+nouns | capitalized (a model-free
    # capitalized-phrase extractor) | auto = capitalized with the hash embedder, else spacy
    ner: str = "auto"
    # the router's question parser (ERAGRAPH_PARSER): spacy | none (s(q) = 0, the dense side)
    parser: str = "spacy"
    # LinearRAG sentence vectors (a second embedding pass over entity-bearing sentences)
    sentence_vectors: bool = False
    # the router's weights: a JSON file written by `eragraph router train` ("" = the shipped ones)
    router_weights: str = ""
    # graph retrieval parameters (ERAGRAPH_GRAPH_<FIELD>)
    graph_retrieval: GraphSettings = field(default_factory=GraphSettings)
    embed_batch: int = 64
    embed_cache: bool = True
    bedrock_embed_model: str = "amazon.titan-embed-text-v2:0"
    bedrock_embed_dim: int = 1024
    bedrock_text_model: str = "anthropic.claude-3-haiku-20240307-v1:0"
    openai_base_url: str = ""
    openai_model: str = ""
    # cost ledger: JSON overrides of DEFAULT_PRICES (see parse_prices)
    prices: str = ""
    # reading files (providers.extractors): limits run before parsing, each one error entry
    max_document_bytes: int = 20 * 1024 * 1024   # a file's (or S3 object's) bytes, before reading it
    max_pdf_pages: int = 2000                    # a PDF's page count, before extracting a page
    max_unzipped_bytes: int = 200 * 1024 * 1024  # a DOCX's entries, from its ZIP directory
    extract_seconds: float = 120.0               # wall-clock budget of one file's extraction
    # the bytes a tenant may submit for ingestion a day (UTC; services.ingest_quota; 0: no quota)
    ingest_daily_bytes: int = 2 * 1024 * 1024 * 1024
    # CSV rows as documents (services.sources): the column of each row's text, and optionally
    # of its id and title; "" (the default) reads a CSV file as one text document
    csv_text_column: str = ""
    csv_id_column: str = ""
    csv_title_column: str = ""
    # the buckets a Bedrock KB data source (services.kb_sources) may sync from: on AWS the names
    # of the S3 buckets this deployment may read (comma-separated; ERAGRAPH_SOURCE_BUCKETS);
    # locally a folder whose subfolders are the buckets (ERAGRAPH_BUCKET_FOLDER: bucket NAME is
    # the folder BUCKET_FOLDER/NAME). Empty: no data source of type S3 can be created.
    source_buckets: str = ""
    bucket_folder: str = ""
    # the deployment's secret salt of knowledge base ids (domain.knowledge_base; ERAGRAPH_KB_ID_SALT):
    # "" gives the unsalted ids of earlier versions
    kb_id_salt: str = field(default="", repr=False)
    # a document without an access list (domain.access; ERAGRAPH_ACCESS_DEFAULT): readable by the
    # whole tenant ("tenant") or by nobody but the operator ("deny")
    access_default: str = "tenant"
    # the fields the environment or a flag set (settings_from_env, with_overrides): a store's
    # recorded providers replace the others (services.store_providers); not compared
    explicit: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.graph_retrieval, dict):  # a round trip through to_dict()
            object.__setattr__(self, "graph_retrieval", GraphSettings(**self.graph_retrieval))
        object.__setattr__(self, "explicit", tuple(sorted(set(self.explicit))))
        for name, allowed in (("embedder", EMBEDDERS), ("summarizer", SUMMARIZERS), ("generator", GENERATORS),
                              ("reranker", RERANKERS),
                              ("ner", ENTITY_EXTRACTORS), ("parser", QUESTION_PARSERS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r} (choose {', '.join(allowed)})")
        if not 1 <= self.s_min <= self.s_max:
            raise ValueError(f"need 1 <= s_min <= s_max (got {self.s_min}, {self.s_max})")
        if self.access_default not in ("tenant", "deny"):
            raise ValueError(f"unknown access_default {self.access_default!r} (choose tenant, deny)")
        if self.s_min < 2:
            raise ValueError("s_min must be at least 2, or layers would not shrink")
        if not 1 <= self.n_planes <= 62:
            raise ValueError("n_planes must be within 1..62")
        if self.max_layers < 0:
            raise ValueError("max_layers must be >= 0")
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ValueError("need 0 <= chunk_overlap < chunk_tokens")
        if self.summary_tokens < 8:
            raise ValueError("summary_tokens must be >= 8")
        if not 0.0 <= self.bias_p <= 1.0:
            raise ValueError("bias_p must be within [0, 1]")
        if self.top_k < 1:
            raise ValueError("top_k must be >= 1")
        if self.token_budget < 1:
            raise ValueError("token_budget must be >= 1")
        if not 1 <= self.rerank_candidates <= 1000:
            raise ValueError("rerank_candidates must be within 1..1000")
        if self.reranker == "cross-encoder" and not self.rerank_model:
            raise ValueError("ERAGRAPH_RERANKER=cross-encoder needs ERAGRAPH_RERANK_MODEL, the folder of a saved "
                             "cross-encoder (none is downloaded)")
        for name in ("max_document_bytes", "max_pdf_pages", "max_unzipped_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.ingest_daily_bytes < 0:
            raise ValueError("ingest_daily_bytes must be >= 0 (0: no quota)")
        if not self.extract_seconds > 0:
            raise ValueError("extract_seconds must be > 0")
        parse_prices(self.prices)

    def entity_extractor(self) -> str:
        """The NER provider this configuration names (``auto`` resolved)."""
        if self.ner == "auto":
            return "capitalized" if self.embedder == "hash" else "spacy"
        return self.ner

    def price_table(self) -> dict[str, tuple[float, float]]:
        return parse_prices(self.prices)

    def graph_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in GRAPH_SETTINGS}

    def with_overrides(self, **overrides: Any) -> Settings:
        """These values over the settings, each then explicit (None: not given)."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        return replace(self, **clean, explicit=(*self.explicit, *clean))

    def chosen(self, name: str) -> bool:
        """Whether field ``name`` was chosen rather than defaulted: set by the environment or a
        flag, or (settings built in code) given a value other than its default."""
        return name in self.explicit or getattr(self, name) != getattr(_DEFAULTS, name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_DEFAULTS = Settings()


def _coerce(kind: type, raw: str) -> Any:
    if kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    return kind(raw)


def settings_from_env(environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(Settings):
        if f.name == "explicit":
            continue
        if f.name == "graph_retrieval":
            values[f.name] = GraphSettings.from_env(env)
            continue
        raw = env.get("ERAGRAPH_" + f.name.upper())
        if raw is not None and raw != "":
            kind = type(getattr(Settings(), f.name))
            try:
                values[f.name] = _coerce(kind, raw)
            except ValueError as exc:
                raise ValueError(f"ERAGRAPH_{f.name.upper()}={raw!r}: {exc}") from None
    explicit = tuple(k for k in values if k != "graph_retrieval")
    return Settings(**values, explicit=explicit).with_overrides(**overrides)


@dataclass(frozen=True)
class ApiLimits:
    """Cost bounds of the query API (no graph setting: a store never records them).

    - ``answer_max_budget`` (ERAGRAPH_ANSWER_MAX_BUDGET): the largest evidence budget in tokens
      a request with ``answer: true`` may ask for; more is a 422 (each answer sends about that
      many input tokens to the text model). 0: no cap beyond the request model's.
    - ``tenant_rate`` (ERAGRAPH_TENANT_RATE): requests per second each tenant may make (a token
      bucket per tenant; over it: 429 with Retry-After). 0: no per-tenant limit.
    - ``tenant_burst`` (ERAGRAPH_TENANT_BURST): the bucket's size, requests a tenant may make at
      once.
    - ``tenant_streams`` (ERAGRAPH_TENANT_STREAMS): answers each tenant may have streaming at
      once (the KB stream, /query/stream, the chat endpoint's stream); over it: 429 with
      Retry-After. 0: no limit.
    - ``stream_capacity`` (ERAGRAPH_STREAM_CAPACITY): the streams the whole function can hold (the
      stream function's reserved concurrency; 0: unknown). A tenant's share must stay below it,
      so that one tenant cannot fill it: refused at cold start otherwise."""

    answer_max_budget: int = 0
    tenant_rate: float = 0.0
    tenant_burst: int = 20
    tenant_streams: int = 0
    stream_capacity: int = 0

    def __post_init__(self) -> None:
        if (self.answer_max_budget < 0 or self.tenant_rate < 0 or self.tenant_burst < 1 or self.tenant_streams < 0
                or self.stream_capacity < 0):
            raise ValueError(f"invalid API limits {self}: budget, rate, streams and capacity >= 0, burst >= 1")
        if self.stream_capacity and not 0 < self.tenant_streams < self.stream_capacity:
            raise ValueError(f"ERAGRAPH_TENANT_STREAMS ({self.tenant_streams}) must be at least 1 and below the "
                             f"streams the function can hold (ERAGRAPH_STREAM_CAPACITY, {self.stream_capacity}): "
                             "else one tenant can fill every stream")

    @classmethod
    def from_env(cls, environ: Any = None) -> ApiLimits:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get("ERAGRAPH_" + {"answer_max_budget": "ANSWER_MAX_BUDGET", "tenant_rate": "TENANT_RATE",
                                         "tenant_burst": "TENANT_BURST", "tenant_streams": "TENANT_STREAMS",
                                         "stream_capacity": "STREAM_CAPACITY"}[f.name])
            if raw is not None and raw.strip() != "":
                try:
                    values[f.name] = type(getattr(cls(), f.name))(raw)
                except ValueError as exc:
                    raise ValueError(f"{f.name}={raw!r}: {exc}") from None
        return cls(**values)


def child_environment(settings: Settings) -> dict[str, str]:
    """The environment of a child process (a benchmark's `eragraph serve` or `eragraph ingest`):
    this process's, with ``settings``' provider choices (ERAGRAPH_EMBEDDER, _SUMMARIZER, _NER)."""
    return {**os.environ, "ERAGRAPH_EMBEDDER": settings.embedder, "ERAGRAPH_SUMMARIZER": settings.summarizer,
            "ERAGRAPH_NER": settings.ner}


# ----------------------------------------------------------------------------- the process
# Variables of one process that are no store setting (nothing records them in a store). Each is
# read here only: callers take a ProcessSettings (bootstrap hands providers their values).


@dataclass(frozen=True)
class ProcessSettings:
    store: str = ""                      # ERAGRAPH_STORE: the CLI's default --store
    tenant: str = ""                     # ERAGRAPH_TENANT: the CLI's default --tenant
    server: str = ""                     # ERAGRAPH_SERVER: `eragraph query` asks this `eragraph serve` URL
    stuck_after_seconds: float = 3600.0  # ERAGRAPH_STUCK_AFTER_SECONDS: the reindex function's default age of stuck work
    openai_api_key: str = field(default="", repr=False)  # OPENAI_API_KEY: the bearer key of the OpenAI-compatible server
    # ERAGRAPH_ANSWER_MODELS: Bedrock models (ids or foundation-model ARNs, comma-separated) a
    # RetrieveAndGenerate request's modelArn may name besides the configured generator's ("" = that
    # model only), so that a caller cannot pick any (expensive) model; the role must allow each
    answer_models: tuple[str, ...] = ()
    # ERAGRAPH_RERANK_MODELS: the Bedrock rerank models a request may name (Retrieve's
    # rerankingConfiguration, POST /query's rerank.model) besides ERAGRAPH_RERANK_MODEL ("" = that
    # one only); the role must allow each
    rerank_models: tuple[str, ...] = ()
    # ERAGRAPH_SERVE_TOKEN: the bearer token of `eragraph serve` (its --token's default); required
    # to bind beyond loopback
    serve_token: str = field(default="", repr=False)
    # ERAGRAPH_SERVE_PRINCIPALS_FILE: `eragraph serve`'s token file (its --principals-file's
    # default): each token's principals (bootstrap.serve_tokens)
    serve_principals_file: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProcessSettings:
        env = os.environ if environ is None else environ
        stuck = env.get("ERAGRAPH_STUCK_AFTER_SECONDS") or ""
        try:
            stuck_after = float(stuck) if stuck else cls.stuck_after_seconds
        except ValueError:
            raise ValueError(f"ERAGRAPH_STUCK_AFTER_SECONDS={stuck!r}: not a number of seconds") from None
        return cls(store=env.get("ERAGRAPH_STORE") or "", tenant=env.get("ERAGRAPH_TENANT") or "",
                   server=env.get("ERAGRAPH_SERVER") or "", stuck_after_seconds=stuck_after,
                   openai_api_key=env.get("OPENAI_API_KEY") or "",
                   answer_models=_names(env.get("ERAGRAPH_ANSWER_MODELS")),
                   rerank_models=_names(env.get("ERAGRAPH_RERANK_MODELS")),
                   serve_token=env.get("ERAGRAPH_SERVE_TOKEN") or "",
                   serve_principals_file=env.get("ERAGRAPH_SERVE_PRINCIPALS_FILE") or "")


def named_variable(name: str) -> str | None:
    """The value of a variable the user names on the command line (``eragraph console --token-env
    NAME``: the variable holding a JWT), None when it is unset."""
    return os.environ.get(name)


# ----------------------------------------------------------------------------- the AWS profile
# Variables the SAM template sets on every function (bootstrap.aws_profile builds its clients and
# adapters from them). Read here only: ``aws_environment`` hands the profile the ones that are set.
AWS_ENV: dict[str, str] = {
    "ERAGRAPH_TABLE": "DynamoDB table (single-table graph store, entity graph, tenant registry)",
    "ERAGRAPH_BUCKET": "documents bucket",
    "ERAGRAPH_DOCUMENT_PREFIX": "optional: the key prefix the bucket's notification ingests (DocumentPrefix)",
    "ERAGRAPH_DOCUMENT_SUFFIX": "optional: the key suffix the bucket's notification ingests (DocumentSuffix)",
    "ERAGRAPH_SUMMARIZE_QUEUE_URL": "FIFO queue of SegmentsAffected messages",
    "ERAGRAPH_OPENSEARCH_ENDPOINT": "OpenSearch domain endpoint (SigV4-signed requests)",
    "ERAGRAPH_OPENSEARCH_INDEX": "index of node vectors (default eragraph-nodes)",
    "ERAGRAPH_OPENSEARCH_ENTITY_INDEX": "index of entity-name (and sentence) vectors (default eragraph-entities)",
    "ERAGRAPH_ENTITY_GRAPH_WARM": "optional: true keeps each tenant's entity graph in memory between questions (the query and stream functions: adapters/aws/entity_warm)",
    "ERAGRAPH_SNAPSHOT_BUCKET": "optional: the bucket of each tenant's entity graph snapshot, written by the reindex and read by a cold query function (adapters/aws/entity_snapshot_s3)",
    "ERAGRAPH_ENTITY_GRAPH_MAX_CHUNKS": "optional: the most chunks of a tenant a function keeps in memory for its entity walks (default: what AWS_LAMBDA_FUNCTION_MEMORY_SIZE leaves, entity_warm.held_chunk_cap; a larger tenant's walks read the table)",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "set by Lambda: the function's memory in MB, which bounds the entity graph it holds",
    "ERAGRAPH_OPENSEARCH_REPLICAS": "replicas of a newly created index: data nodes - 1 (the template derives it)",
    "ERAGRAPH_OPENSEARCH_SERVICE": "optional: es (a domain, the default) or aoss (serverless)",
    "ERAGRAPH_REINDEX_QUEUE_URL": "FIFO queue of the reindex's per-tenant audits (the reindex function only)",
    "ERAGRAPH_AWS_ENDPOINT_URL": "optional: one endpoint for S3/SQS/DynamoDB/IAM (a local cloud)",
    "AWS_REGION": "the region (set by Lambda itself)",
    "AWS_DEFAULT_REGION": "the region when AWS_REGION is not set (default us-east-1)",
    "POWERTOOLS_METRICS_NAMESPACE": "the handlers' metrics namespace (default Eragraph)",
}


def aws_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of AWS_ENV that are set in ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in AWS_ENV if env.get(name) is not None}


def aws_region(env: Mapping[str, str]) -> str:
    """The region of ``env`` (an aws_environment): AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1."""
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"


@dataclass(frozen=True)
class IdentitySettings:
    """How the API finds its caller's tenant (bootstrap.identity.TenantIdentity)."""

    claim: str = "tenant"          # ERAGRAPH_TENANT_CLAIM: the JWT claim / Lambda authorizer key naming the tenant
    tag: str = "eragraph-tenant"   # ERAGRAPH_TENANT_TAG: the IAM principal tag naming it ("" = tags are not read)
    required: bool = True          # ERAGRAPH_TENANT_REQUIRED: a caller without a tenant is refused (false: default tenant)
    # ERAGRAPH_TRUST_REQUEST_CONTEXT: this process runs behind the Lambda Web Adapter, whose
    # x-amzn-request-context header carries the caller's identity (the stream function only)
    trust_request_context: bool = False
    endpoint: str | None = None    # ERAGRAPH_AWS_ENDPOINT_URL: the IAM endpoint (a local cloud)
    # ERAGRAPH_JWT_ISSUER: the JWT issuer; a Cognito user pool's is checked for a claim users may write
    issuer: str = ""
    # who is asking inside a tenant (bootstrap.principals): ERAGRAPH_PRINCIPALS (identity | off),
    # ERAGRAPH_GROUPS_CLAIM, ERAGRAPH_ACCESS_DEFAULT (tenant | deny)
    principals: str = ""
    groups_claim: str = "cognito:groups"
    access_default: str = "tenant"
    principals_tag: str = "eragraph-principals"  # ERAGRAPH_PRINCIPALS_TAG: the IAM principal tag naming an IAM caller's principals

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> IdentitySettings:
        env = os.environ if environ is None else environ
        tag = env.get("ERAGRAPH_TENANT_TAG")
        return cls(principals=(env.get("ERAGRAPH_PRINCIPALS") or "").strip().lower(),
                   groups_claim=(env.get("ERAGRAPH_GROUPS_CLAIM") or "").strip() or "cognito:groups",
                   access_default=(env.get("ERAGRAPH_ACCESS_DEFAULT") or "").strip() or "tenant",
                   principals_tag=(env.get("ERAGRAPH_PRINCIPALS_TAG") or "").strip() or "eragraph-principals",
                   claim=env.get("ERAGRAPH_TENANT_CLAIM") or "tenant",
                   tag="eragraph-tenant" if tag is None else tag.strip(),
                   endpoint=env.get("ERAGRAPH_AWS_ENDPOINT_URL") or None,
                   issuer=(env.get("ERAGRAPH_JWT_ISSUER") or "").strip(),
                   required=_flag(env.get("ERAGRAPH_TENANT_REQUIRED"), True),
                   trust_request_context=_flag(env.get("ERAGRAPH_TRUST_REQUEST_CONTEXT"), False))


def _flag(value: str | None, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    return value.strip().lower() not in ("0", "false", "no")


def _names(raw: str | None) -> tuple[str, ...]:
    """A comma-separated list of names ("" or unset: none)."""
    return tuple(m.strip() for m in (raw or "").split(",") if m.strip())


# Variables the libraries eragraph loads read, which eragraph sets (set through here only).
LIBRARY_ENV = {
    "HF_HUB_OFFLINE": "1 before MiniLM loads: the model is a local file, the hub is never asked",
    "TRANSFORMERS_OFFLINE": "1 before MiniLM loads (as HF_HUB_OFFLINE)",
    "TOKENIZERS_PARALLELISM": "false unless set: no tokenizer thread pool beside torch's",
    "LANCE_CPU_THREADS": "the vector-backend benchmark caps lance's pool at the cores the others get",
}


@contextmanager
def function_environment(settings: Settings, extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """The process environment a Lambda function reads at its import (the handler's cold start,
    powertools), set while the block runs and restored after: ``settings``' provider choices
    (ERAGRAPH_EMBEDDER, _SUMMARIZER, _NER; the benchmarks run a handler in-process) and ``extra``."""
    values = {"ERAGRAPH_EMBEDDER": settings.embedder, "ERAGRAPH_SUMMARIZER": settings.summarizer,
              "ERAGRAPH_NER": settings.ner, **(extra or {})}
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def set_library_env(name: str, value: str, *, keep_existing: bool = False) -> str:
    """Set one of LIBRARY_ENV for the libraries loaded after; ``keep_existing``: a value the
    user set wins. Returns the value in force."""
    if name not in LIBRARY_ENV:
        raise KeyError(f"{name} is not declared in config.LIBRARY_ENV")
    if keep_existing:
        return os.environ.setdefault(name, value)
    os.environ[name] = value
    return value


def library_env(name: str) -> str | None:
    """The value in force of one of LIBRARY_ENV."""
    if name not in LIBRARY_ENV:
        raise KeyError(f"{name} is not declared in config.LIBRARY_ENV")
    return os.environ.get(name)
