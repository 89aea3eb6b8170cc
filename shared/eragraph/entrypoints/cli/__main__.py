"""``python -m eragraph.entrypoints.cli``: the ``eragraph`` command (as ``python -m eragraph``)."""

from eragraph.entrypoints.cli.app import main

raise SystemExit(main())
