"""Real killed processes for the reliability suite: ``eragraph ingest`` run in a child process
and ended by SIGKILL, either right after its k-th write to a store (graph, vectors, entity
graph, blobs) or at a random wall-clock time.

Paying Python's start and eragraph's imports for each of hundreds of runs would cost minutes,
so the children are forked from the test process, which has imported eragraph already: a child
is still a real process, and SIGKILL ends it with whatever it had in memory (unflushed vectors,
queued messages) lost. The write counter is installed in the child only, by wrapping the ports
of the engine the CLI builds; the CLI itself is unchanged.

Every use of FAISS and SQLite happens in children (the digest too), so the parent holds no
thread pool or open handle that a fork would copy."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

WRITES = {"put_nodes", "delete_nodes", "delete_dead_nodes", "put_document", "delete_document", "apply_region",
          "put_meta", "write_meta", "delete_meta", "delete_meta_if_older", "upsert", "delete", "add_chunks",
          "delete_chunks", "put_lsh", "flush", "put"}


class KillAfter:
    """Wraps a port: counts its write calls across all wrapped ports and SIGKILLs the process
    right after the ``kill_at``-th (0: never; the count is then reported by the caller)."""

    def __init__(self, inner, budget: dict) -> None:
        self._inner, self._budget = inner, budget

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name not in WRITES or not callable(attr):
            return attr

        def write(*args, **kwargs):
            out = attr(*args, **kwargs)
            self._budget["writes"] += 1
            if self._budget["writes"] == self._budget["kill_at"]:
                os.kill(os.getpid(), signal.SIGKILL)
            return out
        return write


def _install_killer(budget: dict) -> None:
    """In the child: every engine the CLI builds gets its ports wrapped."""
    import eragraph.bootstrap as bootstrap

    build = bootstrap.build_engine

    def build_engine(*args, **kwargs):
        engine = build(*args, **kwargs)
        engine.graph = KillAfter(engine.graph, budget)
        engine.vectors = KillAfter(engine.vectors, budget)
        if engine.blobs is not None:
            engine.blobs = KillAfter(engine.blobs, budget)
        if engine.entities is not None:
            engine.entities.store = KillAfter(engine.entities.store, budget)
            engine.entities.vectors = KillAfter(engine.entities.vectors, budget)
        return engine

    bootstrap.build_engine = build_engine


def warm(directory: Path) -> None:
    """Import, in the parent, what a child's CLI run and digest use (and build one engine, which
    loads the lazily imported adapters and providers), so that no child pays for it. Builds only:
    no FAISS search runs in the parent."""
    import chaos  # noqa: F401

    import eragraph.cli.app  # noqa: F401
    from eragraph.bootstrap import build_engine
    from eragraph.config import settings_from_env
    from eragraph.services import ingest, invariants, resummarize, sources  # noqa: F401

    build_engine("local", directory, settings_from_env())


def _own_tqdm_locks() -> None:
    """In a child: tqdm's write locks of its own. tqdm shares one multiprocessing lock (a
    semaphore in shared memory) with every process forked after the parent's first progress bar
    (a test that ran before in the same process, e.g. under pytest-xdist); a child SIGKILLed while
    holding it (a bar being made or written) would leave it held, and the next bar in any of
    them waits forever. Its thread lock too, which a thread of the parent may have held."""
    std = sys.modules.get("tqdm.std")
    if std is None:  # never imported before the fork: the child makes its own on first use
        return
    import threading

    std.TqdmDefaultWriteLock.th_lock = threading.RLock()
    if "mp_lock" in vars(std.TqdmDefaultWriteLock):
        del std.TqdmDefaultWriteLock.mp_lock  # made again, the child's own, on first use
    classes = [std.tqdm]
    while classes:
        cls = classes.pop()
        if "_lock" in vars(cls):
            delattr(cls, "_lock")
        classes.extend(cls.__subclasses__())


def fork(body: Callable[[], int]) -> int:
    """Run ``body`` in a forked child; returns its pid (the caller waits)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            _own_tqdm_locks()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the child exits below)
            status = body()
        except BaseException:  # noqa: BLE001 (reported through the exit status)
            status = 71
        finally:
            os._exit(status)
    return pid


def wait(pid: int) -> tuple[str, int]:
    """("exit", status) or ("signal", number)."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "signal", os.WTERMSIG(status)
    return "exit", os.WEXITSTATUS(status)


def ingest_argv(corpus: Path, store: Path) -> list[str]:
    return ["ingest", str(corpus), "--store", str(store), "--json", "--quiet"]


def run_cli(argv: list[str], kill_at: int = 0, count_to: Path | None = None) -> int:
    """Fork a child running ``eragraph`` with ``argv``; SIGKILLed after write ``kill_at`` (0:
    never; the number of writes is written to ``count_to``). Returns the child's pid."""
    def body() -> int:
        from eragraph.cli import app as cli

        budget = {"writes": 0, "kill_at": kill_at}
        _install_killer(budget)
        status = cli.main(argv)
        if count_to is not None:
            count_to.write_text(str(budget["writes"]))
        return status
    return fork(body)


def digest_of(store: Path) -> dict:
    """The store's digest (tests/chaos.digest), its invariant violations and the work markers
    left in it (dirty layers, outbox and follow-up records), computed in a child; JSON-normal
    so that digests made anywhere compare."""
    read, write = os.pipe()

    def body() -> int:
        os.close(read)
        from chaos import digest

        from eragraph.bootstrap import build_engine
        from eragraph.config import settings_from_env
        from eragraph.services import invariants

        engine = build_engine("local", store, settings_from_env())
        # work markers a finished run leaves none of: dirty layers, outbox and follow-up records
        leftover = [k for prefix in ("dirty:", "outbox:", "followup:", "applying:")
                    for k in engine.graph.meta_keys(prefix)]
        out = {"digest": digest(engine), "violations": invariants.check(engine).violations[:5],
               "leftover": leftover[:5]}
        with os.fdopen(write, "w") as fh:
            json.dump(out, fh, default=list)
        return 0
    pid = fork(body)
    os.close(write)
    with os.fdopen(read) as fh:
        data = fh.read()
    how = wait(pid)
    assert how == ("exit", 0), how
    return json.loads(data)


def kill_at_time(argv: list[str], delay: float) -> tuple[str, int]:
    """Run the command and SIGKILL it ``delay`` seconds in (unless it ended first)."""
    pid = run_cli(argv)
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return ("signal", os.WTERMSIG(status)) if os.WIFSIGNALED(status) else ("exit", os.WEXITSTATUS(status))
        time.sleep(min(0.002, max(deadline - time.monotonic(), 0)))
    os.kill(pid, signal.SIGKILL)
    return wait(pid)
