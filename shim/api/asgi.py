"""ASGI entry point: ``uvicorn shim.api.asgi:app`` (settings from the environment)."""

from contracts import hide_url_secrets_in_logs
from shim.api.app import create_app
from shim.settings import ShimSettings

# uvicorn's access log writes each request target, query string and all (an OIDC
# callback's code and state among them); so does httpx for the shim's own requests.
hide_url_secrets_in_logs()
app = create_app(ShimSettings.from_env())
