"""The live dashboard, ``/dashboard``: server-rendered pages over the same service as the API.

See ``_routes.py`` for the pages and ``_session.py`` for logging in and forms.
"""

from shim.dashboard._routes import add_dashboard_routes

__all__ = ["add_dashboard_routes"]
