"""``python -m eragraph.cli``: the ``eragraph`` command (as ``python -m eragraph``)."""

from eragraph.cli.app import main

raise SystemExit(main())
