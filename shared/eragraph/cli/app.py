"""The `eragraph` command: ``main`` parses the command line (``parser``), runs the command's
function (``ingest``, ``query``, ``serve``, ``admin``, ``tools``) and turns what stops it into
one line on stderr and an exit status (``exits``)."""

from __future__ import annotations

import os
import sys

from ..domain.model import EragraphError
from .exits import EXIT_ERROR, EXIT_PIPE, EXIT_USAGE, CommandError
from .parser import build_parser


def _stdout_closed() -> int:
    """The reader of stdout went away (``eragraph query ... | head -n 1``): stop quietly, as a
    Unix tool that SIGPIPE ends. Python's recipe: point stdout (and stderr, often the same
    pipe) at /dev/null so the interpreter's final flush cannot raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # not a real file (a test's capture)
            pass
    os.close(devnull)
    return EXIT_PIPE


def _fail(message: str, status: int) -> int:
    try:
        print(f"eragraph: {message}", file=sys.stderr)
    except BrokenPipeError:
        return _stdout_closed()
    return status


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (exits.EXIT_HELP lists them)."""
    from ..services.summary_search import BadQueryError

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        status = args.func(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        return _stdout_closed()
    except CommandError as exc:
        return _fail(str(exc), exc.status)
    except BadQueryError as exc:  # the question or its parameters (empty, unknown mode, k out of range)
        return _fail(f"error: {exc}", EXIT_USAGE)
    except ValueError as exc:  # a setting (ERAGRAPH_*) or argument value that cannot be used
        return _fail(f"error: {exc}", EXIT_USAGE)
    except EragraphError as exc:
        return _fail(f"error: {exc}", EXIT_ERROR)
    except RuntimeError as exc:  # a model provider gave up (providers.prompts.ModelCallError)
        return _fail(f"model call failed: {exc}", EXIT_ERROR)


if __name__ == "__main__":
    sys.exit(main())
