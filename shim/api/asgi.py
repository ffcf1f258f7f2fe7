"""ASGI entry point: ``uvicorn shim.api.asgi:app`` (settings from the environment)."""

from shim.api.app import create_app
from shim.settings import ShimSettings

app = create_app(ShimSettings.from_env())
