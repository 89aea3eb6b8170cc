"""``python -m eragraph``: the ``eragraph`` command."""

from eragraph.cli.app import main

raise SystemExit(main())
