"""Prompt text and reply parsing shared by the LLM-backed summarizers and generators
(providers.bedrock, providers.openai_compat), plus the error they raise when a model call
fails for good."""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
import threading
from collections.abc import Callable, Sequence

from ..domain.citations import parse_citations  # noqa: F401 (the providers' import of it)
from ..domain.text import split_sentences
from ..ports.providers import Tokenizer
from ..ports.records import MemberSource, Summary


class ModelCallError(RuntimeError):
    """A model call failed and will not be retried (a non-retryable error, or retries ran out)."""


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): exponential backoff with
    full jitter, never more than ``cap``."""
    ceiling = min(cap, base * (2 ** (attempt - 1)))
    return (rng or random).uniform(0.0, ceiling) if ceiling > 0 else 0.0


class Backoff:
    """The retry budget of one provider: how many attempts, the waits between them (capped full
    jitter, or the server's own hint, never above the cap) and a thread-safe count of retries."""

    def __init__(self, max_attempts: int, base_delay: float, max_delay: float,
                 sleep: Callable[[float], None]) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.sleep = sleep
        self.retries = 0
        self._lock = threading.Lock()
        self._rng = random.Random()

    def wait(self, attempt: int, hint: float | None = None) -> None:
        """Count a retry and sleep before attempt ``attempt + 1``."""
        with self._lock:
            self.retries += 1
        delay = backoff_delay(attempt, self.base_delay, self.max_delay, self._rng)
        self.sleep(min(self.max_delay, hint) if hint is not None else delay)


# ---------------------------------------------------------------- summaries

SUMMARY_SYSTEM = ("You write summaries for a retrieval index. Keep the key entities, facts, "
                  "numbers and relations; never add facts that are not in the passages.")


def summary_word_target(max_tokens: int) -> int:
    """Words to ask for so that the summary fits ``max_tokens`` word pieces (about 1.3 per word)."""
    return max(5, int(max_tokens / 1.3))


def summary_prompt(texts: Sequence[str], max_tokens: int) -> str:
    passages = "\n\n".join(f"[{i}] {t.strip()}" for i, t in enumerate(texts, 1))
    return (f"Summarize the following {len(texts)} passages into one concise paragraph of at "
            f"most {summary_word_target(max_tokens)} words that keeps the key entities, facts "
            "and relations. Reply with the summary only, no preamble.\n\n" + passages)


def revision_prompt(previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int) -> str:
    new = "\n\n".join(f"[NEW {i}] {t.strip()}" for i, t in enumerate(added, 1))
    gone = "\n\n".join(f"[GONE {i}] {t.strip()}" for i, t in enumerate(removed, 1))
    return (f"Below is the summary of a group of passages, then passages that joined the group "
            f"(NEW) and passages that left it (GONE). Rewrite the summary as one concise paragraph "
            f"of at most {summary_word_target(max_tokens)} words: keep what still holds, drop what "
            "only the GONE passages said, add the key entities, facts and relations of the NEW "
            "ones. Reply with the summary only, no preamble.\n\nSUMMARY: " + previous.strip()
            + ("\n\n" + new if new else "") + ("\n\n" + gone if gone else ""))


class PromptedSummarizer(ABC):
    """``summarize`` and ``revise`` as prompts to one model call, ``_summary(prompt, max_tokens)``,
    which each LLM provider implements."""

    def summarize(self, texts: Sequence[str], max_tokens: int,
                  sources: Sequence[MemberSource] | None = None) -> Summary:
        # a model reads the passages whole: where they come from does not change the prompt
        texts = [t for t in texts if t and t.strip()]
        if not texts:
            return Summary(text="", tokens_in=0, tokens_out=0)
        return self._summary(summary_prompt(texts, max_tokens), max_tokens)

    def revise(self, previous: str, added: Sequence[str], removed: Sequence[str], max_tokens: int,
               previous_share: float = 0.5) -> Summary:
        return self._summary(revision_prompt(previous, added, removed, max_tokens), max_tokens)

    @abstractmethod
    def _summary(self, prompt: str, max_tokens: int) -> Summary:
        """Send ``prompt`` to the provider's model; the reply clipped to ``max_tokens``."""


def summary_max_output(max_tokens: int) -> int:
    """The model's own output limit: the budget plus headroom (its tokens are not ours); the
    reply is clipped to the budget afterwards."""
    return max_tokens + max(32, max_tokens // 2)


_PREAMBLE = re.compile(r"^\s*(here is|here's|summary)\b[^:\n]*:\s*", re.IGNORECASE)


def clean_summary(text: str) -> str:
    """Strip a chatty lead-in ("Here is a summary:") and collapse whitespace."""
    text = _PREAMBLE.sub("", text.strip(), count=1)
    return " ".join(text.split())


def clip_to_tokens(text: str, tokenizer: Tokenizer, max_tokens: int) -> str:
    """``text`` cut to at most ``max_tokens`` tokens of ``tokenizer``: at the last whole
    sentence that fits, else at the last token that fits."""
    spans = tokenizer.offsets(text)
    if len(spans) <= max_tokens:
        return text
    limit = spans[max_tokens - 1][1] if max_tokens > 0 else 0
    kept, end = [], 0
    for sentence in split_sentences(text):
        start = text.find(sentence, end)
        if start < 0 or start + len(sentence) > limit:
            break
        kept.append(sentence)
        end = start + len(sentence)
    if kept:
        return text[:end].strip()
    return text[:limit].strip()


# ---------------------------------------------------------------- answers

ANSWER_SYSTEM = (
    "You answer questions using only the numbered evidence you are given. After each claim, "
    "cite the id of the evidence that supports it in square brackets, for example [chk-abc123]; "
    "cite only ids that appear in the evidence. If the evidence does not answer the question, "
    "say that it does not, and do not guess.")

NO_EVIDENCE_ANSWER = "No evidence was found, so the question cannot be answered from the index."

REWRITE_SYSTEM = (
    "You rewrite the last question of a conversation so that it can be understood without the "
    "conversation: replace pronouns and references with what they refer to and keep everything "
    "else. Reply with the rewritten question only, on one line, and do not answer it.")
REWRITE_MAX_TOKENS = 96          # a question's length: the call's output cap
REWRITE_MAX_CONTEXT_CHARS = 6000  # the latest conversation text the prompt carries


def rewrite_prompt(question: str, conversation: Sequence[tuple[str, str]]) -> str:
    """The conversation's latest messages (within REWRITE_MAX_CONTEXT_CHARS), then the question."""
    lines: list[str] = []
    size = 0
    for role, text in reversed(conversation):
        line = f"{role}: {' '.join(text.split())}"
        if size + len(line) > REWRITE_MAX_CONTEXT_CHARS:
            break
        size += len(line)
        lines.append(line)
    history = "\n".join(reversed(lines))
    return f"Conversation:\n{history}\n\nLast question: {question.strip()}\n\nRewritten question:"


def rewritten(text: str, question: str) -> str:
    """The model's reply as a question: its first non-empty line, unquoted; the question itself
    when the reply is empty."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.strip("\"'“”`").strip()
    return line or question


DECOMPOSE_SYSTEM = (
    "You split a question into the simpler questions that must each be answered to answer it, "
    "for a search engine that finds one fact at a time. Write each sub-question so that it can "
    "be understood alone (names, not pronouns). Reply with the sub-questions only, one per line, "
    "at most four; a question that needs no splitting is replied with as it is. Do not answer.")
DECOMPOSE_MAX_TOKENS = 200  # four short questions: the call's output cap


def decompose_prompt(question: str) -> str:
    return f"Question: {question.strip()}\n\nSub-questions, one per line:"


def answer_prompt(question: str, evidence: Sequence[tuple[str, str]]) -> str:
    blocks = "\n\n".join(f"Evidence {i} [{eid}]:\n{text.strip()}"
                         for i, (eid, text) in enumerate(evidence, 1))
    return f"{blocks}\n\nQuestion: {question.strip()}\n\nAnswer with citations:"


