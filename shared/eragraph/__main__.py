"""``python -m eragraph``: the ``eragraph`` command."""

from eragraph.entrypoints.cli.app import main

raise SystemExit(main())
