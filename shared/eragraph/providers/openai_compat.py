"""Any OpenAI-compatible chat-completions endpoint (OpenAI, a local vLLM / llama.cpp /
Ollama server, a gateway) as the Summarizer and the Generator, over the standard library's
urllib only.

429 and 5xx answers and network timeouts are retried with exponential backoff and full jitter
(a Retry-After header is honoured, up to the delay cap), a bounded number of times; anything
else, or running out of attempts, raises ModelCallError."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..ports.providers import Tokenizer
from ..ports.records import Answer, Summary
from .hashing import RegexTokenizer
from .prompts import (ANSWER_SYSTEM, DECOMPOSE_MAX_TOKENS, DECOMPOSE_SYSTEM, NO_EVIDENCE_ANSWER,
                      decompose_prompt, SUMMARY_SYSTEM, ModelCallError, answer_prompt,
                      Backoff, clean_summary, clip_to_tokens, parse_citations, summary_max_output,
                      PromptedSummarizer, REWRITE_MAX_TOKENS, REWRITE_SYSTEM, rewrite_prompt, rewritten)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


class ChatClient:
    """POSTs chat-completion requests to ``{base_url}/chat/completions`` with retries."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 120.0,
                 max_attempts: int = 6, base_delay: float = 0.5, max_delay: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not base_url:
            raise ValueError("an OpenAI-compatible base_url is needed (e.g. http://127.0.0.1:8000/v1)")
        if not model:
            raise ValueError("an OpenAI-compatible model name is needed")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key or None  # bootstrap passes OPENAI_API_KEY (config.ProcessSettings)
        self.timeout = timeout
        self.backoff = Backoff(max_attempts, base_delay, max_delay, sleep)

    @property
    def retries(self) -> int:
        return self.backoff.retries

    def _body(self, system: str, prompt: str, max_tokens: int, **extra: Any) -> bytes:
        return json.dumps({
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            **extra,
        }).encode("utf-8")

    def _open(self, body: bytes, accept: str) -> Any:
        """The open HTTP response to one POST, after retrying 429/5xx and network errors."""
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        attempts = self.backoff.max_attempts
        for attempt in range(1, attempts + 1):
            wait: float | None = None
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                return urllib.request.urlopen(request, timeout=self.timeout)
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode("utf-8", "replace")
                if exc.code != 429 and exc.code < 500:
                    raise ModelCallError(f"{self.url} answered HTTP {exc.code}: {detail}") from exc
                last = f"HTTP {exc.code}: {detail}"
                wait = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
                error: Exception = exc
            except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
                last, error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}", exc
            if attempt == attempts:
                raise ModelCallError(f"{self.url} still failing after {attempts} attempts "
                                     f"(last error {last})") from error
            self.backoff.wait(attempt, wait)
        raise AssertionError("unreachable")

    def complete(self, system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
        with self._open(self._body(system, prompt, max_tokens), "application/json") as resp:
            raw = resp.read()
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ModelCallError(f"{self.url} answered with invalid JSON: {raw[:200]!r}") from exc

    def stream(self, system: str, prompt: str, max_tokens: int) -> Iterator[dict[str, Any]]:
        """``stream: true``: each server-sent ``data:`` chunk as it arrives, until ``[DONE]``.
        Usage is asked for (``stream_options.include_usage``) and comes in a last chunk with no
        choices on servers that support it. Opening is retried; a break after that is a
        ModelCallError (part of the answer has already been handed on)."""
        body = self._body(system, prompt, max_tokens, stream=True, stream_options={"include_usage": True})
        with self._open(body, "text/event-stream") as resp:
            try:
                for line in resp:
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue  # blank separators, comments (":"), event:/id: fields
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        return
                    try:
                        chunk = json.loads(data)
                    except ValueError as exc:
                        raise ModelCallError(f"{self.url} streamed invalid JSON: {data[:200]!r}") from exc
                    if isinstance(chunk, dict) and chunk.get("error"):
                        raise ModelCallError(f"{self.url} streamed an error: {json.dumps(chunk['error'])[:300]}")
                    yield chunk
            except (socket.timeout, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
                raise ModelCallError(f"{self.url} stream broke: {type(exc).__name__}: {exc}") from exc


def _reply(payload: dict[str, Any], url: str) -> str:
    choices = payload.get("choices") or []
    if not choices:
        raise ModelCallError(f"{url} answered without choices: {json.dumps(payload)[:200]}")
    message = choices[0].get("message") or {}
    return message.get("content") or ""


def _usage(payload: dict[str, Any], tokenizer: Tokenizer, sent: Sequence[str], reply: str) -> tuple[int, int]:
    usage = payload.get("usage") or {}
    tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if tokens_in is None:
        tokens_in = sum(tokenizer.count(t) for t in sent)
    if tokens_out is None:
        tokens_out = tokenizer.count(reply)
    return int(tokens_in), int(tokens_out)


class OpenAICompatSummarizer(PromptedSummarizer):
    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 tokenizer: Tokenizer | None = None, **client_options: Any) -> None:
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else RegexTokenizer()
        self.client = ChatClient(base_url, model, api_key, **client_options)
        self.identity = f"openai:{model}"

    def _summary(self, prompt: str, max_tokens: int) -> Summary:
        payload = self.client.complete(SUMMARY_SYSTEM, prompt, summary_max_output(max_tokens))
        reply = _reply(payload, self.client.url)
        tokens_in, tokens_out = _usage(payload, self.tokenizer, (SUMMARY_SYSTEM, prompt), reply)
        text = clip_to_tokens(clean_summary(reply), self.tokenizer, max_tokens)
        return Summary(text=text, tokens_in=tokens_in, tokens_out=tokens_out)


class OpenAICompatGenerator:
    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, max_tokens: int = 512,
                 tokenizer: Tokenizer | None = None, **client_options: Any) -> None:
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else RegexTokenizer()
        self.client = ChatClient(base_url, model, api_key, **client_options)
        self.max_tokens = max_tokens
        self.identity = f"openai:{model}"

    def answer(self, question: str, evidence: Sequence[tuple[str, str]]) -> Answer:
        evidence = list(evidence)
        if not evidence:
            return Answer(text=NO_EVIDENCE_ANSWER, cited_ids=(), tokens_in=0, tokens_out=0, model=self.identity)
        prompt = answer_prompt(question, evidence)
        payload = self.client.complete(ANSWER_SYSTEM, prompt, self.max_tokens)
        text = _reply(payload, self.client.url).strip()
        tokens_in, tokens_out = _usage(payload, self.tokenizer, (ANSWER_SYSTEM, prompt), text)
        return Answer(text=text, cited_ids=parse_citations(text, [eid for eid, _ in evidence]),
                      tokens_in=tokens_in, tokens_out=tokens_out, model=self.identity)

    def rewrite(self, question: str, conversation: Sequence[tuple[str, str]]) -> Answer:
        """``question`` made standalone from ``conversation`` ((role, text), oldest first) by the
        model, its output capped at REWRITE_MAX_TOKENS (services.conversation prices the call)."""
        prompt = rewrite_prompt(question, conversation)
        payload = self.client.complete(REWRITE_SYSTEM, prompt, REWRITE_MAX_TOKENS)
        reply = _reply(payload, self.client.url)
        tokens_in, tokens_out = _usage(payload, self.tokenizer, (REWRITE_SYSTEM, prompt), reply)
        return Answer(text=rewritten(reply, question), cited_ids=(), tokens_in=tokens_in, tokens_out=tokens_out,
                      model=self.identity)

    def decompose(self, question: str) -> Answer:
        """The model's sub-questions of ``question``, its reply as it is (domain.decomposition
        parses it), its output capped at DECOMPOSE_MAX_TOKENS (services.decomposition prices the call)."""
        prompt = decompose_prompt(question)
        payload = self.client.complete(DECOMPOSE_SYSTEM, prompt, DECOMPOSE_MAX_TOKENS)
        reply = _reply(payload, self.client.url)
        tokens_in, tokens_out = _usage(payload, self.tokenizer, (DECOMPOSE_SYSTEM, prompt), reply)
        return Answer(text=reply, cited_ids=(), tokens_in=tokens_in, tokens_out=tokens_out, model=self.identity)

    def stream(self, question: str, evidence: Sequence[tuple[str, str]]) -> Iterator[str | Answer]:
        """The answer's text deltas as the server sends them (SSE), then the Answer; token counts
        from the server's usage chunk, else counted with the tokenizer."""
        evidence = list(evidence)
        if not evidence:
            yield NO_EVIDENCE_ANSWER
            yield Answer(text=NO_EVIDENCE_ANSWER, cited_ids=(), tokens_in=0, tokens_out=0, model=self.identity)
            return
        prompt = answer_prompt(question, evidence)
        parts: list[str] = []
        usage: dict[str, Any] = {}
        for chunk in self.client.stream(ANSWER_SYSTEM, prompt, self.max_tokens):
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    parts.append(piece)
                    yield piece
        text = "".join(parts).strip()
        tokens_in, tokens_out = _usage({"usage": usage}, self.tokenizer, (ANSWER_SYSTEM, prompt), text)
        yield Answer(text=text, cited_ids=parse_citations(text, [eid for eid, _ in evidence]),
                     tokens_in=tokens_in, tokens_out=tokens_out, model=self.identity)
