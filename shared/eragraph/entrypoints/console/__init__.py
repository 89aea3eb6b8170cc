"""The browser console: static files (``static/``) served by ``eragraph serve`` at ``/`` and
``/console/<file>``, which call the JSON routes of the route table from the same origin."""
