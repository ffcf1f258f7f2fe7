"""ASGI entry point: ``uvicorn shim.asgi:app`` (settings from the environment)."""

from shim.app import create_app
from shim.settings import ShimSettings

app = create_app(ShimSettings.from_env())
