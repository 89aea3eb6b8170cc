"""The ``eragraph`` command (``python -m eragraph`` runs it too), one module per reason to change:

    app       main: runs a command, turns what stops it into a line on stderr and an exit status
    parser    every command's flags and the function that runs it
    exits     the exit statuses and CommandError
    store     the store a command works on: checked, opened through bootstrap, the writer lock
    render    what the commands print (JSON with --json, else the human-readable form)
    progress  an ingest's progress bars on stderr and the wrappers that feed them
    client    the HTTP client of a running `eragraph serve`
    ingest    ingest, delete, rebuild: the commands that write documents
    query     query, from a local store or a server
    serve     serve (the HTTP API) and mcp (the MCP tools over stdio)
    admin     stats, status, tenants, reindex: look at and look after a store
    smoke     smoke: a deployed stack end to end (smoke_stack: the stack and its callers;
              smoke_run: the steps; smoke_doors: the doors' steps)
    tools     demo, bench, router

A new command is its function in the module of its group and one ``command(...)`` line in
``parser``; the CLI reaches adapters only through ``bootstrap`` (``build_engine`` and
``bootstrap.store_access``)."""
