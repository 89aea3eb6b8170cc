"""The Amazon Bedrock Knowledge Bases runtime API over Eragraph: ``POST
/knowledgebases/{knowledgeBaseId}/retrieve``, so that an app written for Bedrock KB (boto3's
``bedrock-agent-runtime`` client, langchain-aws's ``AmazonKnowledgeBasesRetriever``) switches to
Eragraph by changing its endpoint, not its code.

The shapes are those of the ``bedrock-agent-runtime`` service model that botocore ships: a request
is validated against the operation's input shape as the service does (bedrock_kb.validation:
types, required members, enums, patterns, ranges, and what Eragraph does not apply), and errors are the modelled ones -- the
``x-amzn-errortype`` header and a JSON body with ``message`` -- so that the client raises
``ValidationException``, ``ResourceNotFoundException`` or ``AccessDeniedException``.

Mapping: ``retrievalQuery.text`` is the query; ``numberOfResults`` is k (default 5);
``overrideSearchType`` SEMANTIC is ``dense``, HYBRID is ``hybrid``, absent is DEFAULT_MODE;
``filter`` is Eragraph's filter language (already Bedrock's shape); ``rerankingConfiguration``
is a domain.rerank.RerankSpec; ``nextToken`` is an offset into the ranked results (at most
100 deep). The knowledge base id names a tenant (domain.knowledge_base); the caller's identity
still decides the tenant, so another tenant's id and an id of no tenant are the same
ResourceNotFoundException. Needs the ``aws`` extra (botocore).

RetrieveAndGenerate answers with the engine's generator (on AWS, the Bedrock model ``modelArn``
names, if the deployment allows it: ``check_generate``); RetrieveAndGenerateStream's frames
(``retrieve_and_generate_stream``, framed by eragraph.entrypoints.bedrock_kb.eventstream) are sent as they are made by
eragraph.entrypoints.http.stream: under ``eragraph serve``, and on AWS in the stream function (a
function URL in RESPONSE_STREAM mode, the Lambda Web Adapter running that app: Python Lambda has
no native response streaming, and the API Gateway function answers whole responses only).

The HTTP routes (eragraph.entrypoints.http.routes) call these functions; a KbError raised here is
answered by ``KbError.response``, the one HTTP form of the service's modelled errors."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from typing import Any

from . import eventstream
from ..request_log import request_id, withheld
from .validation import ShapeError, check_shape, check_supported
from ...domain.access import Caller
from ...domain.citations import cited_parts
from ...domain.conversation import ASSISTANT, USER, Message
from ...domain.knowledge_base import knowledge_base_id
from ...domain.model import BadInputError
from ...domain.rerank import RerankSpec
from ...ports.records import Answer
from ...providers.prompts import ModelCallError
from ...services import conversation as conversations
from ...services import query as query_service
from ...services.generation import stream_answer
from ...services.engine import Engine

SERVICE = "bedrock-agent-runtime"
DEFAULT_MODE = "auto"          # the mode of a Retrieve without overrideSearchType
DEFAULT_RESULTS = 5            # numberOfResults when absent (Bedrock's default)
MAX_DEPTH = 100                # results reachable through nextToken
SEARCH_TYPES = {"SEMANTIC": "dense", "HYBRID": "hybrid"}
META_PREFIX = "x-eragraph-"
BEDROCK_PREFIX = "x-amz-bedrock-kb-"


class KbError(Exception):
    """A modelled error of the service: ``code`` is its shape name (the x-amzn-errortype)."""

    STATUS = {"ValidationException": 400, "AccessDeniedException": 403, "ResourceNotFoundException": 404,
              "ThrottlingException": 429, "DependencyFailedException": 424, "ConflictException": 409,
              "ServiceQuotaExceededException": 402, "InternalServerException": 500}

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = self.STATUS[code]

    retry_after: int | None = None  # seconds (a ThrottlingException's Retry-After)

    def response(self) -> tuple[int, dict[str, str], str]:
        headers = {"x-amzn-errortype": self.code, "content-type": "application/json"}
        if request_id():
            headers["x-amzn-requestid"] = request_id()
        if self.retry_after is not None:
            headers["retry-after"] = str(self.retry_after)
        return self.status, headers, json.dumps({"message": str(self)})


@lru_cache(maxsize=2)
def service_model(service: str = SERVICE):
    import botocore.session

    return botocore.session.get_session().get_service_model(service)


def validate(operation: str, params: dict[str, Any], service: str = SERVICE) -> None:
    """ValidationException unless ``params`` fit the operation's modelled input shape in
    ``service``'s model (this one, or bedrock-agent's knowledge-base operations: required
    members, types, enums, patterns, ranges: validation.check_shape) and ask only for what
    Eragraph applies (validation.check_supported)."""
    try:
        check_shape(service_model(service).operation_model(operation).input_shape, params)
        check_supported(operation, params)
    except ShapeError as exc:
        raise KbError("ValidationException", str(exc)) from None


def resolve_tenant(kb_id: str, caller: str, tenants: Callable[[], Iterable[str]] | None = None,  # noqa: ARG001
                   salt: str = "") -> str:
    """The caller's tenant when ``kb_id`` is its knowledge base id (under the deployment's
    ``salt``), else ResourceNotFoundException: the same answer for an id of no tenant and for
    another tenant's, so that a caller cannot learn which tenants exist (``tenants`` is no longer
    read)."""
    own = knowledge_base_id(caller, salt)
    if kb_id == own:
        return caller
    raise KbError("ResourceNotFoundException", f"no knowledge base {kb_id} that this caller may read (the caller's is {own})")


def query_key(text: str, retrieval: dict[str, Any]) -> str:
    """What a nextToken is bound to: the query text and its retrieval configuration."""
    canon = json.dumps([text, retrieval], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


def _offset(token: str | None, key: str) -> int:
    if token is None:
        return 0
    try:
        kind, number, bound = base64.urlsafe_b64decode(token.encode("ascii")).decode("ascii").split(":")
        offset = int(number)
    except (ValueError, UnicodeError):
        raise KbError("ValidationException", "nextToken is not a token this service returned") from None
    if kind != "offset" or not 0 < offset < MAX_DEPTH:
        raise KbError("ValidationException", "nextToken is not a token this service returned")
    if not hmac.compare_digest(bound, key):
        raise KbError("ValidationException", "nextToken belongs to another query: pass it back with the same "
                      "retrievalQuery and retrievalConfiguration")
    return offset


def _token(offset: int, key: str) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}:{key}".encode("ascii")).decode("ascii")


def location(source: str) -> dict[str, Any]:
    """S3 with its URI for an S3 document; CUSTOM with the source as id for any other."""
    if source.startswith("s3://"):
        return {"type": "S3", "s3Location": {"uri": source}}
    return {"type": "CUSTOM", "customDocumentLocation": {"id": source}}


def _result(result, route: str, doc_meta: dict[str, Any], parts: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = dict(doc_meta)
    if parts is not None:  # a decomposed question: the sub-questions whose retrieval found this result
        questions = parts["questions"]
        meta[f"{META_PREFIX}sub-questions"] = [questions[i] for i in parts["found"].get(result.id, ())]
        meta[f"{META_PREFIX}decomposition"] = parts.get("note") or parts["how"]
    meta.update({f"{META_PREFIX}node-id": result.id, f"{META_PREFIX}layer": result.layer,
                 f"{META_PREFIX}doc-id": result.doc_id, f"{META_PREFIX}source": result.source,
                 f"{META_PREFIX}route": route})
    if result.children:
        meta[f"{META_PREFIX}summary-members"] = list(result.children)
    if result.title:
        meta[f"{META_PREFIX}title"] = result.title
    # Bedrock's own keys: the source, the chunk and (a paged document) its page; the place's
    # offsets under ours. A chunk stored before places were recorded says so.
    meta[f"{BEDROCK_PREFIX}source-uri"] = result.source
    meta[f"{BEDROCK_PREFIX}chunk-id"] = result.id
    where = result.where
    if where is not None:
        meta[f"{META_PREFIX}start"], meta[f"{META_PREFIX}end"] = where["start"], where["end"]
        if "page" in where:
            meta[f"{BEDROCK_PREFIX}document-page-number"] = float(where["page"])
            meta[f"{META_PREFIX}pages"] = where["pages"]
    elif result.layer == 0:
        meta[f"{META_PREFIX}place"] = "unknown (stored before chunk places were recorded)"
    return {"content": {"type": "TEXT", "text": result.text}, "location": location(result.source),
            "score": float(result.score), "metadata": meta, "documentId": result.doc_id}


def _search(engine: Engine, text: str, retrieval: dict[str, Any], token: str | None = None, answer: bool = False,
            budget: int | None = None, conversation: list[Message] | None = None, decompose: bool = False,
            caller: Caller | None = None):
    """The query behind Retrieve and RetrieveAndGenerate: (the response, its page of results,
    the results as Bedrock's, the offset after the page). ``budget``: the evidence budget of an
    answer (the API's cap, entrypoints.http.context.answer_budget; None: the store's default);
    ``caller``: who is asking (domain.access; None: the operator): every result is inside its view."""
    config = retrieval.get("vectorSearchConfiguration") or {}
    wanted = config.get("numberOfResults", DEFAULT_RESULTS)
    key = query_key(text, retrieval)
    offset = _offset(token, key)
    if offset + wanted > MAX_DEPTH:
        raise KbError("ValidationException", f"nextToken and numberOfResults reach past the first {MAX_DEPTH} results")
    mode = SEARCH_TYPES.get(config.get("overrideSearchType", ""), DEFAULT_MODE)
    rerank = None
    if "rerankingConfiguration" in config:
        # as in Bedrock: numberOfResults are retrieved and reranked, numberOfRerankedResults of
        # them returned (absent: all of them)
        bedrock = config["rerankingConfiguration"].get("bedrockRerankingConfiguration") or {}
        rerank = RerankSpec(candidates=offset + wanted, model=(bedrock.get("modelConfiguration") or {}).get("modelArn"))
        wanted = min(wanted, bedrock.get("numberOfRerankedResults") or wanted)
    try:
        response = query_service.query(engine, text, mode=mode, k=offset + wanted, where=config.get("filter"),
                                       rerank=rerank, answer=answer, budget=budget, conversation=conversation,
                                       decompose=decompose, caller=caller)
    except (query_service.BadQueryError, BadInputError) as exc:
        raise KbError("ValidationException", str(exc)) from None
    except ModelCallError as exc:  # the embedder, reranker or generator gave up: Bedrock's dependency error
        raise KbError("DependencyFailedException", withheld("a model call failed", exc)) from None
    page = response.results[offset:offset + wanted]
    metas: dict[str, dict] = {}
    for doc_id in {r.doc_id for r in page}:  # at most k reads, never the store
        doc = engine.graph.get_document(doc_id)
        metas[doc_id] = dict(doc.metadata) if doc is not None else {}  # the user's attributes, not .meta (bookkeeping)
    shaped = [_result(r, response.route or mode, metas[r.doc_id], response.decomposition) for r in page]
    more = len(page) == wanted and offset + wanted < MAX_DEPTH and len(response.results) == offset + wanted
    return response, page, shaped, (_token(offset + wanted, key) if more else None)


def retrieve(engine: Engine, body: dict[str, Any], kb_id: str, caller: Caller | None = None) -> dict[str, Any]:
    """The Retrieve response for a request ``body`` on ``engine`` (the caller's tenant's), inside
    ``caller``'s view (None: the operator's, everything)."""
    validate("Retrieve", {**body, "knowledgeBaseId": kb_id})
    _, _, shaped, token = _search(engine, body["retrievalQuery"]["text"], body.get("retrievalConfiguration") or {},
                                  body.get("nextToken"), caller=caller)
    out: dict[str, Any] = {"retrievalResults": shaped}
    if token is not None:
        out["nextToken"] = token
    return out


def knowledge_base_config(body: dict[str, Any]) -> dict[str, Any]:
    """The KNOWLEDGE_BASE configuration of a validated RetrieveAndGenerate request."""
    config = body.get("retrieveAndGenerateConfiguration")
    if not config or config.get("type") != "KNOWLEDGE_BASE" or "knowledgeBaseConfiguration" not in config:
        raise KbError("ValidationException", "retrieveAndGenerateConfiguration must be of type KNOWLEDGE_BASE with a "
                      "knowledgeBaseConfiguration (knowledgeBaseId, modelArn): Eragraph answers from its knowledge "
                      "bases only")
    return config["knowledgeBaseConfiguration"]


def decomposes(config: dict[str, Any]) -> bool:
    """Whether a knowledge base configuration asks for QUERY_DECOMPOSITION (the one query
    transformation the model has): the question split into sub-questions by the generator, each
    retrieved for, the lists fused (services.decomposition). Each retrieved reference's metadata
    names the sub-questions that found it (``x-eragraph-sub-questions``), as Bedrock's response
    has no member for them."""
    transform = (config.get("orchestrationConfiguration") or {}).get("queryTransformationConfiguration") or {}
    return transform.get("type") == "QUERY_DECOMPOSITION"


def _references(page, shaped, cited: set[str]) -> list[dict[str, Any]]:
    return [{k: v for k, v in s.items() if k in ("content", "location", "metadata")}
            for r, s in zip(page, shaped) if not cited or r.id in cited]


def citations(text: str, page, shaped, cited: Iterable[str]) -> list[dict[str, Any]]:
    """Bedrock's citations of an answer: one per part of the answer that cites evidence
    (domain.citations.cited_parts), its span (inclusive end) and the results that part names;
    an answer whose text cites no id in brackets is one part with every result it cites (all of
    them when it names none)."""
    cited = set(cited)
    out = []
    for start, end, ids in cited_parts(text, [r.id for r in page]):
        refs = _references(page, shaped, set(ids) or cited)
        part = {"textResponsePart": {"text": text[start:end + 1], "span": {"start": start, "end": end}}}
        out.append({"generatedResponsePart": part, "retrievedReferences": refs})
    return out


Session = tuple[str, list[Message]]


def _asker(caller: Caller | None):
    """The principals a session is kept for (None: the operator's)."""
    return None if caller is None else caller.principals


def open_session(engine: Engine, body: dict[str, Any], caller: Caller | None = None) -> Session:
    """(the session id, its earlier messages): a new session when the request names none, else
    the tenant's live one it names; one that is unknown, lapsed (a day after its last turn),
    another tenant's, or opened by other principals than ``caller``'s (its earlier answers came
    from their view; the operator, None, continues any) is Bedrock's ValidationException, in
    Bedrock's words."""
    named = body.get("sessionId")
    if not named:
        return conversations.new_session_id(), []
    try:
        return named, conversations.load(engine, named, asker=_asker(caller))
    except conversations.SessionError:
        raise KbError("ValidationException", f"Session with Id {named} is not valid. Please check and try "
                      "again.") from None


def _keep(engine: Engine, session: Session, question: str, answer: str, caller: Caller | None = None) -> None:
    sid, earlier = session
    conversations.save(engine, sid, [*earlier, Message(USER, question), Message(ASSISTANT, answer)],
                       asker=_asker(caller))


def retrieve_and_generate_stream(engine: Engine, body: dict[str, Any], budget: int | None = None,
                                 session: Session | None = None, caller: Caller | None = None) -> Iterator[bytes]:
    """RetrieveAndGenerateStream's event stream frames on ``engine``: one ``output`` event per
    piece the generator yields, each sent as it comes, then one ``citation`` event spanning the
    answer with the results it cites. Errors before the first frame are raised (a KbError);
    the caller validates the request and checks the generator first (``check_generate``)."""
    config, engine = check_generate(engine, body)
    session = session or open_session(engine, body, caller)
    question = body["input"]["text"]
    response, page, shaped, _ = _search(engine, question, config.get("retrievalConfiguration") or {}, budget=budget,
                                        conversation=session[1], decompose=decomposes(config), caller=caller)
    asked = (response.rewrite or {}).get("question", question)
    pieces: list[str] = []
    final: Answer | None = None
    answer = stream_answer(engine.generator, asked, [(r.id, r.text) for r in page], graph=engine.graph)
    while True:
        try:
            item = next(answer, None)
        except ModelCallError as exc:
            if not pieces:  # nothing sent yet: the modelled JSON error
                raise KbError("DependencyFailedException", withheld("a model call failed", exc)) from None
            # mid-stream: the stream's own exception event, which boto3's EventStream raises
            yield eventstream.exception("dependencyFailedException", withheld("the answer broke off", exc))
            return
        except Exception as exc:  # noqa: BLE001 (a fault of ours: in words, never a dropped connection)
            if not pieces:
                raise KbError("InternalServerException", withheld("the answer failed", exc)) from None
            yield eventstream.exception("internalServerException", withheld("the answer broke off", exc))
            return
        if item is None:
            break
        if isinstance(item, Answer):
            final = item
        else:
            pieces.append(item)
            yield eventstream.event("output", {"text": item})
    text = "".join(pieces)
    _keep(engine, session, question, text, caller)
    for one in citations(text, page, shaped, final.cited_ids if final else ()) or [
            {"generatedResponsePart": {"textResponsePart": {"text": "", "span": {"start": 0, "end": 0}}},
             "retrievedReferences": _references(page, shaped, set())}]:
        yield eventstream.event("citation", {"citation": one, **one})


def check_generate(engine: Engine, body: dict[str, Any]) -> tuple[dict[str, Any], Engine]:
    """The knowledge base configuration of a RetrieveAndGenerate(Stream) request and the engine
    that answers it, once a generator is known to answer it. A generator that can choose its
    model (the Bedrock one: ``for_model``) answers with the model ``modelArn`` names, if it is a
    Bedrock model this deployment allows (else ValidationException); any other generator (a
    local or OpenAI-compatible one) is the configured one, whatever ``modelArn`` says."""
    config = knowledge_base_config(body)
    if engine.generator is None:
        raise KbError("ValidationException", "RetrieveAndGenerate needs a generator and none is configured "
                      "(set ERAGRAPH_GENERATOR, or call Retrieve for the evidence only)")
    choose = getattr(engine.generator, "for_model", None)
    if choose is not None:
        try:
            generator = choose(config["modelArn"])
        except BadInputError as exc:
            raise KbError("ValidationException", str(exc)) from None
        if generator is not engine.generator:
            engine = replace(engine, generator=generator)
    if decomposes(config) and getattr(engine.generator, "decompose", None) is None:
        raise KbError("ValidationException", "orchestrationConfiguration.queryTransformationConfiguration "
                      "QUERY_DECOMPOSITION needs a model to split the question (a Bedrock or OpenAI-compatible "
                      f"generator), and this store's generator ({engine.generator.identity}) cannot: remove it "
                      "from the request")
    return config, engine


def retrieve_and_generate(engine: Engine, body: dict[str, Any], budget: int | None = None,
                          caller: Caller | None = None) -> dict[str, Any]:
    """The RetrieveAndGenerate response on ``engine`` (the tenant of the request's knowledge
    base, already resolved): the configured generator answers from the retrieved results, and
    one citation spans the answer with the results it cites (all of them when it names none)."""
    config, engine = check_generate(engine, body)
    session = open_session(engine, body, caller)
    question = body["input"]["text"]
    response, page, shaped, _ = _search(engine, question, config.get("retrievalConfiguration") or {},
                                        answer=True, budget=budget, conversation=session[1],
                                        decompose=decomposes(config), caller=caller)
    text = response.answer or ""
    _keep(engine, session, question, text, caller)
    return {"output": {"text": text}, "citations": citations(text, page, shaped, response.cited_ids),
            "sessionId": session[0]}
