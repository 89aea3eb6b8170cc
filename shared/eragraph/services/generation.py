"""Answer generation as a stream: every generator, streaming or not, in one shape.

``stream_answer`` yields the answer's text in pieces, in order, then the whole ``Answer`` as the
last item (ports.Generator). A generator with a ``stream`` method streams as it writes; one
without it answers whole, and its text is one piece. The call is priced in the cost ledger
(services.cost) once the answer is complete, as ``query`` prices a whole answer."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from ..ports.providers import Generator
from ..ports.records import Answer
from . import cost


def stream_answer(generator: Generator, question: str, evidence: Sequence[tuple[str, str]],
                  graph=None) -> Iterator[str | Answer]:
    """The answer's text pieces, then its Answer. ``graph``: the store whose ledger records the
    call (None: not recorded)."""
    started = time.perf_counter()
    stream = getattr(generator, "stream", None)
    if stream is None:
        pieces = iter(_whole(generator.answer(question, evidence)))
    else:
        pieces = iter(stream(question, evidence))
    final: Answer | None = None
    for item in pieces:
        if isinstance(item, Answer):
            final = item
            break
        if item:
            yield item
    if final is None:
        raise RuntimeError(f"generator {generator.identity!r} ended its stream without an Answer")
    if graph is not None:
        cost.record(graph, "generate", final.model or generator.identity, final.tokens_in, final.tokens_out,
                    time.perf_counter() - started)
    yield final


def _whole(answer: Answer) -> Iterator[str | Answer]:
    if answer.text:
        yield answer.text
    yield answer
