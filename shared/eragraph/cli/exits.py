"""The command's exit statuses (EXIT_HELP says them in --help; the CLI docs too) and the error
a command raises to stop with one of them."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1    # nothing (or not what was asked) was done: no such store, no input readable, ...
EXIT_USAGE = 2    # bad arguments or settings: argparse's own status
EXIT_PARTIAL = 3  # done, but some inputs were skipped (each one named on stderr)
EXIT_PIPE = 128 + 13  # stdout closed early (| head): what a shell reports for a tool SIGPIPE ends

EXIT_HELP = """exit status:
  0    success
  1    error: the command failed (no such store, no input could be read, no such document,
       a model call failed, reindex left invariant violations, ...)
  2    usage: bad arguments or settings (as argparse)
  3    partial: some inputs were skipped (each named on stderr), the rest was done
  141  stdout was closed early (e.g. | head): the command stops quietly, as on SIGPIPE"""


class CommandError(Exception):
    """A command cannot go on: main prints ``eragraph: <message>`` and exits with ``status``."""

    def __init__(self, message: str, status: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.status = status
