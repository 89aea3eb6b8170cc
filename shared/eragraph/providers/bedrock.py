"""Amazon Bedrock models behind the ports: Titan Text Embeddings v2 as the Embedder
(InvokeModel, one text per call: Titan v2 has no batch API, so calls run on a small thread
pool) and any Converse-capable text model as the Summarizer and the Generator.

Throttling and transient unavailability are retried here with exponential backoff and full
jitter, a bounded number of times; the botocore client's own retries are switched off so the
two do not multiply. Anything else, or running out of attempts, raises ModelCallError."""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from ..domain.model import BadInputError
from ..ports.providers import Tokenizer
from ..ports.records import Answer, Summary
from .prompts import (ANSWER_SYSTEM, DECOMPOSE_MAX_TOKENS, DECOMPOSE_SYSTEM, NO_EVIDENCE_ANSWER,
                      decompose_prompt, SUMMARY_SYSTEM, ModelCallError, answer_prompt,
                      Backoff, clean_summary, clip_to_tokens, parse_citations, summary_max_output,
                      PromptedSummarizer, REWRITE_MAX_TOKENS, REWRITE_SYSTEM, rewrite_prompt, rewritten)

RETRYABLE_CODES = frozenset({"ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException",
                             "TooManyRequestsException", "InternalServerException"})
TITAN_V2_DIMS = (256, 512, 1024)
TITAN_MAX_CHARS = 50_000  # Titan v2 refuses longer inputText

T = TypeVar("T")


def make_client(region_name: str | None = None) -> Any:
    """A bedrock-runtime client with botocore's retries off (this module retries itself)."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": 1},
                    connect_timeout=10, read_timeout=120)
    return boto3.client("bedrock-runtime", region_name=region_name, config=config)


class _BedrockCaller:
    """Client handling and the retry loop shared by the three Bedrock providers."""

    def __init__(self, client: Any, region_name: str | None, max_attempts: int, base_delay: float,
                 max_delay: float, sleep: Callable[[float], None]) -> None:
        self._client = client
        self.region_name = region_name
        self.backoff = Backoff(max_attempts, base_delay, max_delay, sleep)
        self._lock = threading.Lock()

    @property
    def retries(self) -> int:
        return self.backoff.retries

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = make_client(self.region_name)
            return self._client

    def call(self, what: str, fn: Callable[[], T]) -> T:
        from botocore.exceptions import (ClientError, ConnectionClosedError, ConnectTimeoutError,
                                         EndpointConnectionError, ReadTimeoutError)

        transient = (ConnectionClosedError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError)
        last = ""
        attempts = self.backoff.max_attempts
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except ClientError as exc:
                err = exc.response.get("Error", {})
                code = err.get("Code", "")
                if code not in RETRYABLE_CODES:
                    raise ModelCallError(f"Bedrock {what} failed: {code}: {err.get('Message', exc)}") from exc
                last = f"{code}: {err.get('Message', '')}".rstrip(": ")
                error: Exception = exc
            except transient as exc:
                last, error = f"{type(exc).__name__}: {exc}", exc
            if attempt == attempts:
                raise ModelCallError(f"Bedrock {what} still failing after {attempts} attempts "
                                     f"(last error {last})") from error
            self.backoff.wait(attempt)
        raise AssertionError("unreachable")


def _converse(caller: _BedrockCaller, model_id: str, system: str, prompt: str, max_tokens: int,
              what: str, operation: str = "converse") -> dict[str, Any]:
    """One Converse (or ConverseStream: ``operation="converse_stream"``) call. Models that take
    no system prompt get the system text folded into the user turn instead (Bedrock answers
    them with a ValidationException)."""
    from botocore.exceptions import ClientError

    call = getattr(caller.client, operation)
    config = {"maxTokens": max_tokens, "temperature": 0.0}

    def with_system() -> dict[str, Any]:
        return call(modelId=model_id, messages=[{"role": "user", "content": [{"text": prompt}]}],
                    system=[{"text": system}], inferenceConfig=config)

    def folded() -> dict[str, Any]:
        return call(modelId=model_id,
                    messages=[{"role": "user", "content": [{"text": f"{system}\n\n{prompt}"}]}],
                    inferenceConfig=config)

    try:
        return caller.call(what, with_system)
    except ModelCallError as exc:
        cause = exc.__cause__
        if (isinstance(cause, ClientError) and cause.response.get("Error", {}).get("Code") == "ValidationException"
                and "system" in str(cause.response.get("Error", {}).get("Message", "")).lower()):
            return caller.call(what, folded)
        raise


def _converse_text(response: dict[str, Any]) -> str:
    content = response.get("output", {}).get("message", {}).get("content", [])
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def _usage(response: dict[str, Any]) -> tuple[int, int]:
    usage = response.get("usage") or {}
    return int(usage.get("inputTokens", 0)), int(usage.get("outputTokens", 0))


class BedrockEmbedder:
    """Titan Text Embeddings v2, normalized, ``dim`` in 256/512/1024."""

    def __init__(self, model_id: str = "amazon.titan-embed-text-v2:0", dim: int = 1024, client: Any = None,
                 *, region_name: str | None = None, max_workers: int = 4, max_attempts: int = 6,
                 base_delay: float = 0.5, max_delay: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if "titan-embed-text-v2" in model_id and dim not in TITAN_V2_DIMS:
            raise ValueError(f"Titan v2 embeds to {TITAN_V2_DIMS} dimensions, not {dim}")
        self.model_id = model_id
        self.dim = dim
        self.identity = f"bedrock:{model_id}@{dim}"
        self.max_workers = max(1, max_workers)
        self._caller = _BedrockCaller(client, region_name, max_attempts, base_delay, max_delay, sleep)
        self.calls = 0
        self.tokens_in = 0
        self._lock = threading.Lock()

    @property
    def retries(self) -> int:
        return self._caller.retries

    def _embed_one(self, text: str) -> np.ndarray:
        if not text.strip():  # Titan rejects empty input; a fixed unit vector, as the hashing embedder
            vec = np.zeros(self.dim, dtype=np.float32)
            vec[0] = 1.0
            return vec
        body = json.dumps({"inputText": text[:TITAN_MAX_CHARS], "dimensions": self.dim, "normalize": True})
        client = self._caller.client

        def invoke() -> dict[str, Any]:
            resp = client.invoke_model(modelId=self.model_id, body=body,
                                       contentType="application/json", accept="application/json")
            return json.loads(resp["body"].read())

        payload = self._caller.call(f"embedding ({self.model_id})", invoke)
        vec = np.asarray(payload.get("embedding") or [], dtype=np.float32)
        if vec.shape != (self.dim,):
            raise ModelCallError(f"Bedrock {self.model_id} returned a {vec.shape} embedding, expected ({self.dim},)")
        norm = float(np.linalg.norm(vec))
        if norm > 0:
            vec /= norm
        with self._lock:
            self.calls += 1
            self.tokens_in += int(payload.get("inputTextTokenCount", 0))
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self.max_workers == 1 or len(texts) == 1:
            rows = [self._embed_one(t) for t in texts]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(texts))) as pool:
                rows = list(pool.map(self._embed_one, texts))
        for i, row in enumerate(rows):
            out[i] = row
        return out


class BedrockSummarizer(PromptedSummarizer):
    """Summaries from a Converse model, clipped to ``max_tokens`` of ``tokenizer``."""

    def __init__(self, model_id: str, tokenizer: Tokenizer, client: Any = None, *,
                 region_name: str | None = None, max_attempts: int = 6, base_delay: float = 0.5,
                 max_delay: float = 20.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.model_id = model_id
        self.tokenizer = tokenizer
        self.identity = f"bedrock:{model_id}"
        self._caller = _BedrockCaller(client, region_name, max_attempts, base_delay, max_delay, sleep)

    @property
    def retries(self) -> int:
        return self._caller.retries

    def _summary(self, prompt: str, max_tokens: int) -> Summary:
        response = _converse(self._caller, self.model_id, SUMMARY_SYSTEM, prompt,
                             summary_max_output(max_tokens), f"summary ({self.model_id})")
        text = clip_to_tokens(clean_summary(_converse_text(response)), self.tokenizer, max_tokens)
        tokens_in, tokens_out = _usage(response)
        return Summary(text=text, tokens_in=tokens_in, tokens_out=tokens_out)


# a Bedrock model as a request names it (RetrieveAndGenerate's modelArn): a model ARN, or a bare id
MODEL_ARN = re.compile(r"arn:aws(?:-[a-z]+)*:bedrock:[a-z0-9-]*:(?:\d{12})?:"
                       r"(foundation-model|inference-profile)/([A-Za-z0-9][A-Za-z0-9._:-]{0,200})")
MODEL_ID = re.compile(r"[a-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?:[.:][A-Za-z0-9-]+)*")


def bedrock_model_id(name: str) -> str:
    """The model id of a Bedrock model ARN (``arn:aws:bedrock:REGION::foundation-model/ID``, or a
    system inference profile's, whose id Converse takes as well) or of a bare id (``anthropic.claude-3-haiku-20240307-v1:0``);
    BadInputError, in words, for anything else."""
    match = MODEL_ARN.fullmatch(name)
    if match is not None:
        return match.group(2)
    if MODEL_ID.fullmatch(name):
        return name
    raise BadInputError(f"modelArn {name[:200]!r} is not a Bedrock model ARN "
                        "(arn:aws:bedrock:REGION::foundation-model/MODEL_ID) nor a model id")


class BedrockGenerator:
    """Answers from numbered evidence with [id] citations, from a Converse model. ``models``: the
    other model ids a request may name (``for_model``; RetrieveAndGenerate's modelArn)."""

    def __init__(self, model_id: str, client: Any = None, *, max_tokens: int = 512,
                 region_name: str | None = None, max_attempts: int = 6, base_delay: float = 0.5,
                 max_delay: float = 20.0, sleep: Callable[[float], None] = time.sleep,
                 models: Sequence[str] = ()) -> None:
        self.model_id = model_id
        self.max_tokens = max_tokens
        self.identity = f"bedrock:{model_id}"
        self.models = tuple(bedrock_model_id(m) for m in models)  # ids or model ARNs (the template's)
        self._caller = _BedrockCaller(client, region_name, max_attempts, base_delay, max_delay, sleep)

    def for_model(self, name: str) -> BedrockGenerator:
        """The generator that answers with the model ``name`` (an ARN or id): this one for its own
        model, a copy sharing its client for an allowed one; BadInputError for a name that is no
        Bedrock model, or a model this deployment does not allow."""
        model_id = bedrock_model_id(name)
        if model_id == self.model_id:
            return self
        if model_id not in self.models:
            allowed = ", ".join((self.model_id, *self.models))
            raise BadInputError(f"modelArn names {model_id}, which this deployment does not answer with; "
                                f"allowed: {allowed} (ERAGRAPH_ANSWER_MODELS)")
        other = copy.copy(self)
        other.model_id = model_id
        other.identity = f"bedrock:{model_id}"
        return other

    @property
    def retries(self) -> int:
        return self._caller.retries

    def answer(self, question: str, evidence: Sequence[tuple[str, str]]) -> Answer:
        evidence = list(evidence)
        if not evidence:
            return Answer(text=NO_EVIDENCE_ANSWER, cited_ids=(), tokens_in=0, tokens_out=0, model=self.identity)
        prompt = answer_prompt(question, evidence)
        response = _converse(self._caller, self.model_id, ANSWER_SYSTEM, prompt, self.max_tokens,
                             f"answer ({self.model_id})")
        text = _converse_text(response).strip()
        tokens_in, tokens_out = _usage(response)
        return Answer(text=text, cited_ids=parse_citations(text, [eid for eid, _ in evidence]),
                      tokens_in=tokens_in, tokens_out=tokens_out, model=self.identity)

    def rewrite(self, question: str, conversation: Sequence[tuple[str, str]]) -> Answer:
        """``question`` made standalone from ``conversation`` ((role, text), oldest first) by the
        model, its output capped at REWRITE_MAX_TOKENS (services.conversation prices the call)."""
        prompt = rewrite_prompt(question, conversation)
        response = _converse(self._caller, self.model_id, REWRITE_SYSTEM, prompt, REWRITE_MAX_TOKENS,
                             f"rewrite ({self.model_id})")
        tokens_in, tokens_out = _usage(response)
        return Answer(text=rewritten(_converse_text(response), question), cited_ids=(), tokens_in=tokens_in,
                      tokens_out=tokens_out, model=self.identity)

    def decompose(self, question: str) -> Answer:
        """The model's sub-questions of ``question``, its reply as it is (domain.decomposition
        parses it), its output capped at DECOMPOSE_MAX_TOKENS (services.decomposition prices the call)."""
        response = _converse(self._caller, self.model_id, DECOMPOSE_SYSTEM, decompose_prompt(question),
                             DECOMPOSE_MAX_TOKENS, f"decompose ({self.model_id})")
        tokens_in, tokens_out = _usage(response)
        return Answer(text=_converse_text(response), cited_ids=(), tokens_in=tokens_in, tokens_out=tokens_out,
                      model=self.identity)

    def stream(self, question: str, evidence: Sequence[tuple[str, str]]) -> Iterator[str | Answer]:
        """ConverseStream: the text deltas as Bedrock sends them, then the Answer, whose token
        counts come from the stream's metadata event. Opening the stream is retried like any
        call; an error event after text has been sent raises ModelCallError (not retried: the
        caller has already been given part of the answer)."""
        from botocore.exceptions import ClientError

        evidence = list(evidence)
        if not evidence:
            yield NO_EVIDENCE_ANSWER
            yield Answer(text=NO_EVIDENCE_ANSWER, cited_ids=(), tokens_in=0, tokens_out=0, model=self.identity)
            return
        response = _converse(self._caller, self.model_id, ANSWER_SYSTEM, answer_prompt(question, evidence),
                             self.max_tokens, f"answer stream ({self.model_id})", operation="converse_stream")
        parts: list[str] = []
        tokens_in = tokens_out = 0
        try:
            for event in response["stream"]:
                delta = event.get("contentBlockDelta", {}).get("delta", {}).get("text")
                if delta:
                    parts.append(delta)
                    yield delta
                elif "metadata" in event:
                    usage = event["metadata"].get("usage") or {}
                    tokens_in = int(usage.get("inputTokens", 0))
                    tokens_out = int(usage.get("outputTokens", 0))
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise ModelCallError(f"Bedrock answer stream ({self.model_id}) broke after {len(parts)} pieces: "
                                 f"{err.get('Code', '')}: {err.get('Message', exc)}") from exc
        text = "".join(parts).strip()
        yield Answer(text=text, cited_ids=parse_citations(text, [eid for eid, _ in evidence]),
                     tokens_in=tokens_in, tokens_out=tokens_out, model=self.identity)
