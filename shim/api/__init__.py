"""The HTTP API: ``create_app`` composes it; ``shim.api.asgi:app`` is what uvicorn serves.

    app.py        create_app: routers, the door, error handlers, OpenAPI, the lifespan
    routes/       one router per resource: a handler takes the caller and the service
    services/     what the shim does, one module per feature (Service: what they share)
    dashboard/    the live dashboard, one router per page
    deps.py       the dependencies handlers take: the caller (require), the service
    params.py     the path, query and header parameters routes share
    http.py       bodies read in checked order, answers built from models
    door.py       rate limits and header limits, before any route
    errors.py     every error as the error envelope; refusals recorded
    openapi.py    the served OpenAPI document, told the truth

Bodies are read raw and checked in order — media type, size, JSON, schema,
model — so every bad input gets its own stable code and a 4xx. Responses are
built from the contract models. A lost database answers 503, never 500.
"""

from shim.api.app import create_app
from shim.api.services import Service

__all__ = ["Service", "create_app"]
