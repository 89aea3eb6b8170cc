"""Random corpora over three tenants and the checks every query of one tenant must pass: no
result, and no leaf under a returned summary, belongs to another tenant, whatever the filter,
the question or the mode (tests/e2e/test_tenants_property.py runs them on memory and local,
tests/aws/test_tenants_property_aws.py on moto).

The tenants are the default one (``""``), ``t-a`` and ``t-ab`` (``t-a`` is a prefix of
``t-ab`` on purpose: a namespace cut by a bare prefix would leak between them). Each tenant's
documents mix words of the shared topics (support.TOPICS), words only that tenant uses
(``VOCAB``), entity names every tenant mentions (``SHARED_ENTITIES``: the entity graph must not
bridge tenants through them) and a marker name of the tenant's own (``Markerta7``). Document ids
collide between tenants on purpose (``doc5`` is a document of two tenants, with different text);
sources never do, so a leaf's source names its tenant.

A case is (tenant, filter or None, question, mode, k). The questions ask about the shared
topics, the tenant's own words, another tenant's words or markers (bait: a leak would rank
them first) and the shared entities; the filters are random_filters' (every operator, nested),
none, or conditions on the built-in ``tenant`` attribute (another tenant's id must match
nothing). Every result must be a node of the querying tenant's store, with the text stored
there, holding no word only another tenant uses; a leaf must come from a document ingested
into that tenant (source, id and text) and satisfy the filter; a summary (unfiltered queries
only) must have only such leaves under it. A filtered query returns min(k, allowed) results
(``bm25``: min(k, the allowed leaves sharing a word with the question, found from their text)).
The exact modes must return the brute-force top-k over the tenant's own allowed leaves
(filter_cases.Oracle pointed at the tenant's engine), and unfiltered, over the tenant's own
nodes: ``collapsed`` over every layer, ``dense`` over the leaves, ``detailed``/``summarized``
the biased merge of the two brute-force lists, ``bm25`` the tenant's BM25 order. Before any
case, each tenant's store is audited against what was ingested into it (documents, nodes,
vectors, the entity graph's chunks).

ERAGRAPH_TENANT_CASES sets the cases per profile (default 1,000)."""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from eragraph.config import Settings
from eragraph.domain.bm25 import informative_terms, query_terms, tokens
from eragraph.domain.filters import All, AnyOf, Cond, Filter, chunk_attrs, keys, matches, to_json
from eragraph.domain.ranking import Candidate, biased_merge, rank_key
from eragraph.services import doc_status
from eragraph.services.ingest import SourceDoc, ingest
from eragraph.services.modes import available_modes, mode_names
from eragraph.services.query import query
from eragraph.services.resummarize import drain
from eragraph.services.summary_search import OVERFETCH
from filter_cases import BIG_BUDGET, EXACT_DENSE, QUESTIONS, Oracle
from random_filters import random_filter, random_metadata
from support import TOPICS

TENANTS = ("", "t-a", "t-ab")
TAGS = {"": "dflt", "t-a": "ta", "t-ab": "tab"}  # of each tenant's marker names (Markerta7)
VOCAB = {
    "": "quartz zephyr walrus lantern harbor glacier meadow falcon copper velvet".split(),
    "t-a": "saffron tundra jigsaw kayak mosaic nectar obsidian prism quill raven".split(),
    "t-ab": "sphinx tulip umbra vortex wombat xylophone yonder zenith bramble cinder".split(),
}
SHARED_ENTITIES = ["Orion Station", "Kestrel Bay", "Marble Court"]
TOPIC_NAMES = list(TOPICS)


def cases_per_profile(default: int = 1000) -> int:
    return int(os.environ.get("ERAGRAPH_TENANT_CASES", default))


def tenant_settings(**overrides) -> Settings:
    """The cheap settings of the property tests (hash embedder, extractive summaries, small
    chunks and segments so a few documents make several layers)."""
    base = dict(embedder="hash", summarizer="extractive", generator="none", s_min=3, s_max=5, n_planes=12,
                chunk_tokens=40, chunk_overlap=8, summary_tokens=30)
    base.update(overrides)
    return Settings().with_overrides(**base)


# --------------------------------------------------------------------------- corpora

def doc_numbers(tenant: str, n: int) -> range:
    """Tenant j's documents are doc<j*n/2> ... : each tenant shares half its ids with the next."""
    j = TENANTS.index(tenant)
    return range(j * (n // 2), j * (n // 2) + n)


def _source(tenant: str, number: int) -> str:
    # neighbours that share ids sit in different directories: sources never collide
    return f"s3://b/{'xyx'[TENANTS.index(tenant)]}/doc{number}.txt"


def tenant_corpus(tenant: str, n: int, seed: int) -> list[SourceDoc]:
    rng = random.Random(f"{seed}:{tenant}")
    own = VOCAB[tenant]
    docs = []
    for number in doc_numbers(tenant, n):
        topic = TOPIC_NAMES[number % len(TOPIC_NAMES)]
        words = TOPICS[topic].split()
        sentences = []
        for _ in range(rng.randint(2, 3)):
            ws = [rng.choice(words) for _ in range(6)] + [rng.choice(own) for _ in range(3)]
            rng.shuffle(ws)
            sentences.append(" ".join(ws).capitalize() + ".")
        if rng.random() < 0.6:
            sentences.append(f"The {rng.choice(SHARED_ENTITIES)} hosted a {rng.choice(words)} "
                             f"{rng.choice(own)} evening.")
        sentences.append(f"The {topic} item doc{number} is called Marker{TAGS[tenant]}{number}.")
        metadata = random_metadata(rng)
        if tenant and rng.random() < 0.3:  # a document may name its (own) tenant
            metadata["tenant"] = tenant
        title = rng.choice(["", f"Title doc{number}", "Tale"])
        docs.append(SourceDoc(source=_source(tenant, number), doc_id=f"doc{number}", title=title,
                              text=" ".join(sentences), metadata=metadata))
    return docs


def corpora(n_per_tenant: int, seed: int) -> dict[str, list[SourceDoc]]:
    return {t: tenant_corpus(t, n_per_tenant, seed) for t in TENANTS}


def build_tenants(ten, corpus: Mapping[str, Sequence[SourceDoc]],
                  on_engine: Callable[[str, object], None] | None = None,
                  before_drain: Callable[[str, object], None] | None = None) -> dict:
    """Ingest each tenant's documents into its engine and drain its re-summarization, one tenant
    after the other, in ``corpus`` order (the default tenant first: its engine holds the
    registry); ``on_engine(tenant, engine)`` sees each engine before its first document,
    ``before_drain(tenant, engine)`` its queue before it is drained. Every tenant must end with
    a summary layer, an empty queue and no dirty marker."""
    engines = {}
    for tenant, docs in corpus.items():
        engine = engines[tenant] = ten.engine(tenant)
        assert engine.tenant == tenant
        if on_engine is not None:
            on_engine(tenant, engine)
        ingest(engine, list(docs))
        if before_drain is not None:
            before_drain(tenant, engine)
        drain(engine)
        assert not engine.queue.pending(), f"tenant {tenant!r}: messages left after its drain"
        assert not engine.graph.meta_keys("dirty"), f"tenant {tenant!r}: dirty markers left after its drain"
        assert max(engine.graph.layer_sizes()) >= 1, f"tenant {tenant!r}: no summary layer"
    return engines


# --------------------------------------------------------------------------- the oracle

_WORD = re.compile(r"[a-z0-9]+")


def words_of(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def own_words(tenant: str, corpus: Mapping[str, Sequence[SourceDoc]]) -> set[str]:
    """The words only ``tenant``'s documents use (its vocabulary and marker names)."""
    numbers = {int(d.doc_id[3:]) for d in corpus[tenant]}
    return set(VOCAB[tenant]) | {f"marker{TAGS[tenant]}{n}" for n in numbers}


def _squash(text: str) -> str:
    return " ".join(text.split())


class TenantOracle(Oracle):
    """filter_cases.Oracle over one tenant's engine, checked first against what was ingested
    into that tenant (so a store that held another tenant's data fails here, not silently in
    the oracle), plus every node of every layer for the unfiltered exact modes."""

    def __init__(self, engine, tenant: str, corpus: Mapping[str, Sequence[SourceDoc]]) -> None:
        super().__init__(engine, corpus[tenant])
        self.tenant = tenant
        self.ingested = {d.source: d for d in corpus[tenant]}
        self.foreign = set().union(*(own_words(t, corpus) for t in corpus if t != tenant))
        refs = [r.node_id for layer in engine.graph.layer_sizes() for r in engine.graph.layer_refs(layer)]
        self.all_nodes = engine.graph.get_nodes(refs)
        self.all_vectors = engine.vectors.get_vectors(list(self.all_nodes))
        self.leaves = set(self.nodes)
        self._under: dict[str, frozenset[str]] = {}
        self.audit()

    def audit(self) -> None:
        where = f"tenant {self.tenant!r}'s store"
        stored = {d.source: d for d in self.engine.graph.list_documents()}
        assert set(stored) == set(self.ingested), f"{where}: documents {sorted(set(stored) ^ set(self.ingested))}"
        for source, doc in stored.items():
            assert doc.doc_id == self.ingested[source].doc_id, f"{where}: {source} stored as {doc.doc_id}"
            assert "tenant" not in (doc.metadata or {}), f"{where}: {doc.doc_id} keeps a tenant attribute"
        _, statuses = doc_status.listing(self.engine)  # a tenant's statuses are its documents' only, all done
        assert {v["source"] for v in statuses} == set(self.ingested), f"{where}: statuses of other sources"
        assert {v["state"] for v in statuses} == {"done"}, f"{where}: statuses {statuses[:3]}"
        assert self.leaves, where
        assert set(self.all_vectors) == set(self.all_nodes), f"{where}: nodes without a vector"
        assert self.engine.vectors.ids() == set(self.all_nodes), f"{where}: the vector index holds other ids"
        for node_id, node in self.all_nodes.items():
            self.check_node(node_id, node.text, f"{where}: node {node_id}")
        entities = self.engine.entities
        if entities is not None:  # the entity graph indexes this tenant's chunks only
            chunks = entities.store.chunk_ids()
            assert chunks and chunks <= self.leaves, f"{where}: entity graph chunks {sorted(chunks - self.leaves)}"

    def check_node(self, node_id: str, text: str, where: str) -> None:
        node = self.all_nodes.get(node_id)
        assert node is not None, f"{where}: {node_id} is no node of tenant {self.tenant!r}"
        assert text == node.text, f"{where}: {node_id}'s text differs from the tenant's node"
        leaked = words_of(text) & self.foreign
        assert not leaked, f"{where}: {node_id} holds another tenant's words {sorted(leaked)}"
        if node.layer == 0:
            doc = self.ingested.get(node.source)
            assert doc is not None, f"{where}: leaf {node_id} of {node.source}, not a document of this tenant"
            assert node.doc_id == doc.doc_id, f"{where}: leaf {node_id} names {node.doc_id}, not {doc.doc_id}"
            assert _squash(node.text) in _squash(doc.text), f"{where}: leaf {node_id} is not text of {doc.doc_id}"
        else:
            under = self.leaves_under(node_id)
            assert under and under <= self.leaves, f"{where}: summary {node_id} over leaves not of this tenant"

    def leaves_under(self, node_id: str) -> frozenset[str]:
        if node_id not in self._under:
            node = self.all_nodes[node_id]
            if node.layer == 0:
                out = frozenset([node_id])
            else:
                out = frozenset()
                for c in node.children:
                    assert c in self.all_nodes, f"summary {node_id}'s child {c} is no node of {self.tenant!r}"
                    out |= self.leaves_under(c)
            self._under[node_id] = out
        return self._under[node_id]

    def allowed(self, f: Filter | None) -> set[str]:
        if f is None:
            return set(self.leaves)
        # the generated documents' attributes (filter_cases.Oracle), with the built-in tenant one
        ok = {d for d, doc in self.docs.items()
              if matches(f, chunk_attrs(doc.metadata, doc.source, doc.resolved_id, doc.title, self.tenant))}
        return {c for c, n in self.nodes.items() if n.doc_id in ok}

    def lexical_matches(self, text: str, allowed: set[str]) -> set[str]:
        """The allowed leaves sharing a word with the question. The FTS5 and memory indexes
        leave out the words whose IDF bm25() clamps, counted over the tenant's own leaves
        (domain.bm25.informative_terms); OpenSearch keeps every word."""
        from eragraph.adapters.aws.lexical_opensearch import OpenSearchLexicalIndex

        terms = query_terms(text)
        if not isinstance(self.engine.lexical, OpenSearchLexicalIndex):
            words = [set(tokens(self.nodes[c].text)) for c in self.leaves]
            terms = informative_terms(terms, Counter(w for ws in words for w in ws), len(words))
        return {c for c in allowed if set(terms) & set(tokens(self.nodes[c].text))}

    def candidates(self, vector, ids) -> list[Candidate]:
        return sorted((Candidate(i, self.all_nodes[i].layer, float(self.all_vectors[i] @ vector),
                                 self.all_nodes[i].tokens) for i in ids), key=rank_key)

    def unfiltered(self, mode: str, vector, k: int) -> list[str]:
        """The brute-force answer of an unfiltered exact dense-side mode (budget unlimited)."""
        if mode == "collapsed":
            return [c.node_id for c in self.candidates(vector, self.all_nodes)[:k]]
        leaves = self.candidates(vector, self.leaves)
        if mode == "dense":
            return self.by_document([c.node_id for c in leaves], k)
        summaries = self.candidates(vector, set(self.all_nodes) - self.leaves)
        fetch = k * OVERFETCH
        primary, secondary = (leaves, summaries) if mode == "detailed" else (summaries, leaves)
        merged = biased_merge(primary[:fetch], secondary[:fetch], k, self.engine.settings.bias_p, BIG_BUDGET)
        return [c.node_id for c in merged]


# --------------------------------------------------------------------------- random cases

def random_question(rng: random.Random, tenant: str) -> str:
    others = [t for t in TENANTS if t != tenant]
    kind = rng.random()
    topic = rng.choice(TOPIC_NAMES)
    if kind < 0.25:
        return rng.choice(QUESTIONS)
    if kind < 0.45:
        return " ".join(rng.sample(VOCAB[tenant], 3) + [rng.choice(TOPICS[topic].split())])
    if kind < 0.65:  # bait: only another tenant's words
        return " ".join(rng.sample(VOCAB[rng.choice(others)], rng.randint(1, 3)))
    if kind < 0.75:
        other = rng.choice(others)
        return f"Which {topic} item is called Marker{TAGS[other]}{rng.randint(0, 20)}?"
    if kind < 0.85:
        return f"Which {topic} item is called Marker{TAGS[tenant]}{rng.randint(0, 20)}?"
    return f"What {topic} {rng.choice(VOCAB[rng.choice(TENANTS)])} evening did {rng.choice(SHARED_ENTITIES)} host?"


def tenant_condition(rng: random.Random) -> Cond:
    op = rng.choice(["equals", "notEquals", "in", "notIn", "startsWith"])
    if op == "startsWith":
        return Cond(op, "tenant", rng.choice(["t", "t-", "t-a", "t-ab", "d"]))
    values = list(TENANTS) + ["t-b", "T-A"]
    if op in ("in", "notIn"):
        return Cond(op, "tenant", tuple(rng.sample(values, rng.randint(1, 3))))
    return Cond(op, "tenant", rng.choice(values))


def random_tenant_filter(rng: random.Random, on_tenant: bool = True) -> Filter | None:
    """None (summaries may come back), a random filter (random_filters), or (``on_tenant``) one
    with a condition on the built-in ``tenant`` attribute."""
    kind = rng.random()
    if kind < 0.3:
        return None
    if kind < 0.75 or not on_tenant:
        return random_filter(rng)
    cond = tenant_condition(rng)
    if rng.random() < 0.4:
        return cond
    other = random_filter(rng, depth=2)
    return All((cond, other)) if rng.random() < 0.5 else AnyOf((other, cond))


@dataclass
class Counts:
    by_mode: dict
    by_tenant: dict
    exact_checked: int = 0
    summaries_checked: int = 0
    nothing_allowed: int = 0
    unfiltered: int = 0
    tenant_filters: int = 0
    cases: int = 0

    def merge(self, other: Counts) -> Counts:
        out = Counts({m: self.by_mode.get(m, 0) + other.by_mode.get(m, 0) for m in {**self.by_mode, **other.by_mode}},
                     {t: self.by_tenant.get(t, 0) + other.by_tenant.get(t, 0)
                      for t in {**self.by_tenant, **other.by_tenant}})
        for name in ("exact_checked", "summaries_checked", "nothing_allowed", "unfiltered", "tenant_filters", "cases"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        return out


def oracles(engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]]) -> dict[str, TenantOracle]:
    return {t: TenantOracle(e, t, corpus) for t, e in engines.items()}


def run_tenant_cases(engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]], n_cases: int,
                     seed: int, modes: list[str] | None = None,
                     checks: Mapping[str, TenantOracle] | None = None,
                     tenant_filter_modes: Collection[str] | None = None, ks: Sequence[int] = (1, 3, 5, 8),
                     ask: Callable | None = None) -> Counts:
    """Run ``n_cases`` random (tenant, filter, question, mode, k) cases over the tenants'
    engines (each tenant and mode in turn); raise AssertionError on the first leak or wrong
    top-k. ``checks``: the tenants' oracles when already made; ``tenant_filter_modes``: the
    modes whose filters may name the ``tenant`` attribute (None: every mode); ``ks``: the k drawn
    from; ``ask(tenant, text, mode, k, filter)``: the results of the question asked as that
    tenant's caller through another door (None: services.query on the tenant's engine)."""
    rng = random.Random(seed)
    tenants = list(engines)
    checks = checks or oracles(engines, corpus)
    if modes is None:
        modes = available_modes(engines[tenants[0]])
        assert modes == mode_names(), f"every mode should run on this profile: {modes}"
        assert all(available_modes(e) == modes for e in engines.values())
    counts = Counts(by_mode={m: 0 for m in modes}, by_tenant={t: 0 for t in tenants})
    for i in range(n_cases):
        tenant = tenants[i % len(tenants)]
        mode = modes[(i // len(tenants)) % len(modes)]
        engine, oracle = engines[tenant], checks[tenant]
        f = random_tenant_filter(rng, tenant_filter_modes is None or mode in tenant_filter_modes)
        text = random_question(rng, tenant)
        k = rng.choice(ks)
        if ask is None:
            results = query(engine, text, mode=mode, k=k, budget=BIG_BUDGET, where=f).results
        else:
            results = ask(tenant, text, mode, k, f)
        allowed = oracle.allowed(f)
        got = [r.id for r in results]
        where = (f"case {i}: tenant {tenant!r}, mode {mode}, k {k}, question {text!r}, "
                 f"filter {None if f is None else to_json(f)}")
        assert len(set(got)) == len(got), f"{where}: a result twice"
        for r in results:
            oracle.check_node(r.id, r.text, where)
            node = oracle.all_nodes[r.id]
            assert (r.layer, r.doc_id, r.source) == (node.layer, node.doc_id, node.source), where
            if r.layer == 0:
                assert r.id in allowed, f"{where}: {r.id} of {r.doc_id} is outside the filter"
            else:
                assert f is None, f"{where}: a summary ({r.id}) under a filter"
                counts.summaries_checked += 1
        assert len(got) <= k, where
        if not allowed:
            counts.nothing_allowed += 1
            assert not got, where
        elif mode == "bm25":  # the allowed leaves with a word of the question, by their text
            matching = oracle.lexical_matches(text, allowed)
            assert set(got) <= matching and len(got) == min(k, len(matching)), \
                f"{where}: got {got} of {len(matching)} allowed leaves with a word of the question"
        elif f is not None:
            assert len(got) == min(k, len(allowed)), f"{where}: {len(got)} results of {len(allowed)} allowed leaves"
        else:  # summaries may come too
            assert len(got) >= min(k, len(allowed)), f"{where}: {len(got)} results of {len(allowed)} leaves"
        if mode in EXACT_DENSE or mode == "bm25":
            if mode == "bm25":
                want = oracle.bm25(text, allowed, k)
            elif f is not None:
                want = oracle.dense(engine.embedder.embed([text])[0], allowed, k, per_document=mode == "dense")
            else:
                want = oracle.unfiltered(mode, engine.embedder.embed([text])[0], k)
            assert got == want, f"{where}: got {got}, brute force {want}"
            counts.exact_checked += 1
        counts.by_mode[mode] += 1
        counts.by_tenant[tenant] += 1
        counts.unfiltered += f is None
        counts.cases += 1
        counts.tenant_filters += f is not None and "tenant" in keys(f)
    return counts


def mcp_ask(engines: Mapping[str, object]) -> Callable:
    """``ask`` through the MCP retrieve tool over streamable HTTP (mcp_server.event_response, the
    query function's POST /mcp), the tenant being the caller's (the request's), one server for
    every tenant. A call that fails fails the case."""
    from types import SimpleNamespace

    from eragraph.entrypoints.mcp import build_server, event_response

    server = build_server(lambda tenant: engines[tenant])
    event = {"version": "2.0", "rawPath": "/mcp", "rawQueryString": "",
             "headers": {"content-type": "application/json", "accept": "application/json, text/event-stream",
                         "host": "abc123.execute-api.us-east-1.amazonaws.com"},
             "requestContext": {"http": {"method": "POST", "path": "/mcp", "sourceIp": "198.51.100.7"}}}

    def ask(tenant: str, text: str, mode: str, k: int, f: Filter | None) -> list:
        arguments = {"query": text, "mode": mode, "k": k, **({} if f is None else {"filter": to_json(f)})}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "retrieve", "arguments": arguments}}).encode()
        status, _, raw = event_response(server, event, body, tenant)
        result = json.loads(raw)["result"]
        assert status == 200 and not result.get("isError"), (tenant, arguments, raw[:500])
        return [SimpleNamespace(**r) for r in result["structuredContent"]["results"]]

    return ask


def still_answers(engine, tenant: str, corpus: Mapping[str, Sequence[SourceDoc]]) -> None:
    """A tenant still answers: BM25 on one of its markers finds that document first."""
    doc = corpus[tenant][0]
    marker = f"Marker{TAGS[tenant]}{doc.doc_id[3:]}"
    response = query(engine, f"Which item is called {marker}?", mode="bm25", k=3)
    assert response.results and response.results[0].source == doc.source, (tenant, response.results)


def answers_nothing(engine, tenant: str, corpus: Mapping[str, Sequence[SourceDoc]]) -> None:
    """A deleted tenant's namespace, opened again, holds nothing: no mode returns anything."""
    assert not engine.graph.list_documents() and engine.vectors.count() == 0, tenant
    text = " ".join(VOCAB[tenant][:3]) + f" Marker{TAGS[tenant]}{corpus[tenant][0].doc_id[3:]}"
    for mode in available_modes(engine):
        assert not query(engine, text, mode=mode, k=5).results, (tenant, mode)


def check_delete(ten, engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]], victim: str,
                 counts: Callable[[str], dict], n_cases: int, seed: int, **options) -> dict:
    """Delete ``victim``: its counts (``counts(tenant)``, raw where the profile allows) were
    nonzero, the report says so and that nothing is left, the other tenants' counts do not
    change, the registry forgets the victim, and the others still answer, without a leak and
    with the brute-force top-k (``n_cases`` random cases; ``options`` go to run_tenant_cases).
    Returns the deletion's report."""
    before = {t: counts(t) for t in engines}
    assert before[victim] and all(v > 0 for v in before[victim].values()), before
    assert victim in ten.tenants()
    report = ten.delete(victim)
    assert report["tenant"] == victim
    assert all(v > 0 for v in report["before"].values()), report
    assert not any(report["after"].values()), report
    assert victim not in ten.tenants() and not ten.exists(victim), ten.tenants()
    survivors = {t: e for t, e in engines.items() if t != victim}
    assert {t: counts(t) for t in survivors} == {t: before[t] for t in survivors}
    for tenant, engine in survivors.items():
        still_answers(engine, tenant, corpus)
    run_tenant_cases(survivors, corpus, n_cases, seed, **options)
    report["counted_before"] = before
    return report


# --------------------------------------------------------------------------- Bedrock KB routes

KB_SEARCH_TYPES = {"dense": "SEMANTIC", "hybrid": "HYBRID", "auto": None}  # the modes Retrieve can ask for


class QuotingGenerator:
    """A stand-in generator for RetrieveAndGenerate: its answer quotes every evidence text it was
    given and cites it (``text [i]``), so whatever reached the generator shows in the answer."""

    identity = "quoting"

    def answer(self, question: str, evidence: Sequence[tuple[str, str]]):
        from eragraph.ports.records import Answer

        text = " ".join(f"{t.strip()} [{i}]" for i, (_, t) in enumerate(evidence, 1))
        return Answer(text=text, cited_ids=tuple(eid for eid, _ in evidence), tokens_in=0, tokens_out=0,
                      model=self.identity)


def kb_clients(engines: Mapping[str, object]) -> dict:
    """boto3's bedrock-agent-runtime client per tenant, unchanged, its requests as API Gateway
    events through api.make_app (the query function's and serve's routes): the caller's tenant
    from its JWT claim only (bootstrap.identity), the registry listing the others' ids."""
    from kb_support import kb_client, kb_event

    from eragraph.entrypoints.http.api import make_app
    from eragraph.bootstrap.identity import TenantIdentity

    app = make_app(lambda tenant: engines[tenant], tenant_of=TenantIdentity(required=False, tag="").tenant,
                   tenants=lambda: [t for t in engines if t])

    def client(tenant: str):
        claims = {"sub": "user-1", **({"tenant": tenant} if tenant else {})}
        authorizer = {"jwt": {"claims": claims, "scopes": None}}
        return kb_client(lambda ev: app.resolve(ev, None),
                         lambda method, path, body: kb_event(method, path, body, authorizer))

    return {tenant: client(tenant) for tenant in engines}


def bedrock_filter(f: dict) -> dict:
    """A filter as Bedrock's model takes it: an andAll/orAll of one member (which the filter
    language allows and the model does not: at least 2) is that member, the same condition."""
    for op in ("andAll", "orAll"):
        if op in f:
            members = [bedrock_filter(m) for m in f[op]]
            return members[0] if len(members) == 1 else {op: members}
    return f


def _vector_config(mode: str, k: int, f: Filter | None) -> dict:
    config = {"numberOfResults": k, **({} if f is None else {"filter": bedrock_filter(to_json(f))})}
    if KB_SEARCH_TYPES[mode] is not None:
        config["overrideSearchType"] = KB_SEARCH_TYPES[mode]
    return config


def _as_result(r: Mapping):
    """A Retrieve result as the fields run_tenant_cases checks (its x-eragraph- metadata)."""
    from types import SimpleNamespace

    meta = r["metadata"]
    return SimpleNamespace(id=meta["x-eragraph-node-id"], text=r["content"]["text"],
                           layer=int(meta["x-eragraph-layer"]), doc_id=meta["x-eragraph-doc-id"],
                           source=meta["x-eragraph-source"])


def refuses_foreign_ids(client, tenant: str, tenants: Sequence[str], text: str) -> None:
    """A caller naming another tenant's knowledge base id is ResourceNotFoundException, the error
    of an unknown id (so a caller cannot learn which tenants exist), and the message shows nothing
    of that tenant but its id."""
    from eragraph.domain.knowledge_base import knowledge_base_id

    other = tenants[(tenants.index(tenant) + 1) % len(tenants)]
    try:
        client.retrieve(knowledgeBaseId=knowledge_base_id(other), retrievalQuery={"text": text})
    except client.exceptions.ResourceNotFoundException as exc:
        assert "Marker" not in str(exc) and not words_of(str(exc)) & set(VOCAB[other]), str(exc)
    else:
        raise AssertionError(f"tenant {tenant!r} retrieved from tenant {other!r}'s knowledge base")


def kb_ask(engines: Mapping[str, object]) -> Callable:
    """``ask`` through Bedrock KB Retrieve (boto3's client, kb_clients), the caller's own
    knowledge base id in the path; every case also asks with the next tenant's id, which must be
    ResourceNotFoundException (as an unknown id). Modes: KB_SEARCH_TYPES."""
    from eragraph.domain.knowledge_base import knowledge_base_id

    clients = kb_clients(engines)
    tenants = list(engines)

    def ask(tenant: str, text: str, mode: str, k: int, f: Filter | None) -> list:
        client = clients[tenant]
        out = client.retrieve(knowledgeBaseId=knowledge_base_id(tenant), retrievalQuery={"text": text},
                              retrievalConfiguration={"vectorSearchConfiguration": _vector_config(mode, k, f)})
        refuses_foreign_ids(client, tenant, tenants, text)
        return [_as_result(r) for r in out["retrievalResults"]]

    return ask


def run_kb_generate_cases(engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]], n_cases: int,
                          seed: int, checks: Mapping[str, TenantOracle]) -> int:
    """RetrieveAndGenerate through boto3's client for random (tenant, filter, question, mode, k),
    the engines' generator a QuotingGenerator: every cited reference is a node of the caller's
    tenant (its oracle, checked against the generated documents) inside the filter, the answer
    is exactly the quotes of those references (so the generator saw nothing else), and another
    tenant's knowledge base id in the configuration is ResourceNotFoundException. Returns the
    references checked."""
    from eragraph.domain.knowledge_base import knowledge_base_id

    rng = random.Random(seed)
    clients = kb_clients(engines)
    tenants = list(engines)
    checked = 0
    for i in range(n_cases):
        tenant = tenants[i % len(tenants)]
        mode = list(KB_SEARCH_TYPES)[(i // len(tenants)) % len(KB_SEARCH_TYPES)]
        f = random_tenant_filter(rng)
        text, k = random_question(rng, tenant), rng.choice((1, 3, 5))
        where = (f"generate case {i}: tenant {tenant!r}, mode {mode}, k {k}, {text!r}, "
                 f"filter {None if f is None else to_json(f)}")

        def request(kb_tenant: str) -> dict:
            return {"input": {"text": text}, "retrieveAndGenerateConfiguration": {
                "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
                    "knowledgeBaseId": knowledge_base_id(kb_tenant),
                    "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-lite-v1:0",
                    "retrievalConfiguration": {"vectorSearchConfiguration": _vector_config(mode, k, f)}}}}

        client = clients[tenant]
        out = client.retrieve_and_generate(**request(tenant))
        oracle, allowed = checks[tenant], checks[tenant].allowed(f)
        refs = [ref for c in out["citations"] for ref in c["retrievedReferences"]]
        for ref in refs:
            r = _as_result(ref)
            oracle.check_node(r.id, r.text, where)
            node = oracle.all_nodes[r.id]
            assert (r.layer, r.doc_id, r.source) == (node.layer, node.doc_id, node.source), where
            assert r.layer > 0 or r.id in allowed, f"{where}: {r.id} is outside the filter"
            assert r.layer == 0 or f is None, f"{where}: a summary under a filter"
        quotes = " ".join(f"{ref['content']['text'].strip()} [{j}]" for j, ref in enumerate(refs, 1))
        assert out["output"]["text"] == quotes, f"{where}: the answer is not the quotes of its references"
        assert not words_of(out["output"]["text"]) & oracle.foreign, where
        assert bool(refs) == bool(allowed) or f is None, f"{where}: {len(refs)} references, {len(allowed)} allowed"
        other = tenants[(i + 1) % len(tenants)]
        try:
            client.retrieve_and_generate(**request(other))
        except client.exceptions.ResourceNotFoundException:
            pass
        else:
            raise AssertionError(f"{where}: answered from tenant {other!r}'s knowledge base")
        checked += len(refs)
    return checked


def run_kb_stream_cases(engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]], n_cases: int,
                        seed: int, checks: Mapping[str, TenantOracle]) -> int:
    """RetrieveAndGenerateStream on ``eragraph serve`` (server.make_server, one tenant's engine per
    server, as ``serve --tenant``), read event by event by boto3's client, the engines' generator
    a QuotingGenerator: the ``output`` pieces make exactly the quotes of the ``citation`` event's
    references, each a node of the served tenant inside the filter; another tenant's knowledge
    base id is refused (serve knows no other tenant: ResourceNotFoundException) and shows nothing
    of that tenant. Returns the references checked."""
    import threading

    import boto3
    from botocore.config import Config

    from eragraph.domain.knowledge_base import knowledge_base_id
    from eragraph.entrypoints.http.server import make_server

    rng = random.Random(seed)
    tenants = list(engines)
    servers, clients = {}, {}
    for tenant in tenants:
        server = servers[tenant] = make_server(engines[tenant], port=0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        clients[tenant] = boto3.client("bedrock-agent-runtime", region_name="us-east-1", endpoint_url=server.url,
                                       aws_access_key_id="x", aws_secret_access_key="x",
                                       config=Config(retries={"max_attempts": 1}))
    checked = 0
    try:
        for i in range(n_cases):
            tenant = tenants[i % len(tenants)]
            mode = list(KB_SEARCH_TYPES)[(i // len(tenants)) % len(KB_SEARCH_TYPES)]
            f = random_tenant_filter(rng)
            text, k = random_question(rng, tenant), rng.choice((1, 3, 5))
            where = (f"stream case {i}: tenant {tenant!r}, mode {mode}, k {k}, {text!r}, "
                     f"filter {None if f is None else to_json(f)}")

            def request(kb_tenant: str) -> dict:
                return {"input": {"text": text}, "retrieveAndGenerateConfiguration": {
                    "type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
                        "knowledgeBaseId": knowledge_base_id(kb_tenant), "modelArn": "stand-in",
                        "retrievalConfiguration": {"vectorSearchConfiguration": _vector_config(mode, k, f)}}}}

            client = clients[tenant]
            pieces, refs = [], []
            for event in client.retrieve_and_generate_stream(**request(tenant))["stream"]:
                if "output" in event:
                    pieces.append(event["output"]["text"])
                elif "citation" in event:
                    refs += event["citation"]["retrievedReferences"]
            oracle, allowed = checks[tenant], checks[tenant].allowed(f)
            for ref in refs:
                r = _as_result(ref)
                oracle.check_node(r.id, r.text, where)
                node = oracle.all_nodes[r.id]
                assert (r.layer, r.doc_id, r.source) == (node.layer, node.doc_id, node.source), where
                assert r.layer > 0 or r.id in allowed, f"{where}: {r.id} is outside the filter"
                assert r.layer == 0 or f is None, f"{where}: a summary under a filter"
            quotes = " ".join(f"{ref['content']['text'].strip()} [{j}]" for j, ref in enumerate(refs, 1))
            assert "".join(pieces) == quotes, f"{where}: the streamed answer is not the quotes of its references"
            other = tenants[(i + 1) % len(tenants)]
            try:
                client.retrieve_and_generate_stream(**request(other))
            except client.exceptions.ResourceNotFoundException as exc:
                assert not words_of(str(exc)) & oracle.foreign, str(exc)
            else:
                raise AssertionError(f"{where}: streamed from tenant {other!r}'s knowledge base")
            checked += len(refs)
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()
    return checked


# --------------------------------------------------------------------------- the document routes

def check_document_routes(engines: Mapping[str, object], corpus: Mapping[str, Sequence[SourceDoc]]) -> int:
    """The write side of the API per tenant, through api.make_app (the caller's tenant from its JWT
    claim only) and one upload pipeline of the profile for every tenant: each tenant's POST
    /documents lands in its own store under its own key prefix; GET /documents (paged with its
    cursor) and GET /changes show only the caller's documents and summaries; another tenant's
    document is a 404 to DELETE, and a document naming another tenant a 403; DELETE of its own
    removes it there only. Returns the requests checked."""
    from kb_support import kb_event

    from eragraph.bootstrap import document_pipeline
    from eragraph.bootstrap.identity import TenantIdentity
    from eragraph.domain.tenants import KEY_PREFIX
    from eragraph.entrypoints.http.api import make_app

    pipeline = document_pipeline("memory", None, next(iter(engines.values())).settings, lambda t: engines[t])
    app = make_app(lambda tenant: engines[tenant], tenant_of=TenantIdentity(required=False, tag="").tenant,
                   uploads=pipeline)
    checked = 0

    def call(tenant: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        nonlocal checked
        claims = {"sub": "user-1", **({"tenant": tenant} if tenant else {})}
        path, _, query = path.partition("?")
        ev = kb_event(method, path, body, {"jwt": {"claims": claims, "scopes": None}})
        if body is None:
            ev.pop("body", None)
        if query:
            ev["rawQueryString"] = query
            ev["queryStringParameters"] = dict(p.split("=", 1) for p in query.split("&"))
        out = app.resolve(ev, None)
        checked += 1
        return out["statusCode"], json.loads(out.get("body") or "null")

    uploaded = {}
    for tenant in engines:
        status, body = call(tenant, "POST", "/documents", {"documents": [
            {"source": "up/note.txt", "text": f"Uploaded note of {TAGS[tenant]}: " + " ".join(VOCAB[tenant]) * 3}]})
        assert status == 202, body
        [doc] = body["documents"]
        assert doc["source"] == (f"{KEY_PREFIX}{tenant}/up/note.txt" if tenant else "up/note.txt")
        uploaded[tenant] = doc
        other = next(t for t in engines if t and t != tenant)
        status, body = call(tenant, "POST", "/documents", {"documents": [
            {"source": "x.txt", "text": "x", "metadata": {"tenant": other}}]})
        assert status == 403, body
    assert pipeline.wait_idle(120)
    for tenant, engine in engines.items():
        own = {d.source for d in corpus[tenant]} | {uploaded[tenant]["source"]}
        seen, cursor = [], ""
        while True:
            status, body = call(tenant, "GET", "/documents?limit=3" + (f"&cursor={cursor}" if cursor else ""))
            assert status == 200, body
            seen += [d["source"] for d in body["documents"]]
            cursor = body["next_cursor"]
            if cursor is None:
                break
        assert sorted(seen) == sorted(own), tenant  # every own document once, no other tenant's
        status, body = call(tenant, "GET", "/changes?limit=200")
        assert status == 200
        listed = {s for c in body["changes"] for s in c.get("documents", ())}
        assert listed and listed <= own, tenant
        written = {s for c in body["changes"] for s in c.get("summaries", ())}
        foreign = set().union(*(set(e.graph.get_nodes(written)) for t, e in engines.items() if t != tenant))
        assert written and not foreign - set(engine.graph.get_nodes(written)), tenant
        for other, doc in uploaded.items():
            if other != tenant:
                status, body = call(tenant, "DELETE", f"/documents/{doc['doc_id']}")
                assert status == 404, (tenant, other, body)
    victim = next(t for t in engines if t)
    status, body = call(victim, "DELETE", f"/documents/{uploaded[victim]['doc_id']}")
    assert status == 202, body
    assert pipeline.wait_idle(120)
    for tenant, engine in engines.items():
        present = engine.graph.get_document(uploaded[tenant]["doc_id"]) is not None
        assert present is (tenant != victim), tenant
    pipeline.close()
    return checked
