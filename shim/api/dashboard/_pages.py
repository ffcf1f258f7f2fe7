"""What every dashboard page shares: rendering, the viewer, and errors shown as pages.

Every page is rendered on the server with Jinja2 autoescaping, so model and
tool output (objectives, plan inputs, episodes, error messages) is text, never
markup. Pages call the same services as the API with the viewer's identity,
so roles, four-eyes and ownership hold exactly as there.

A page's router uses ``PageRoute``: a missing or refused session goes to the
login page, and a refusal is an error page; both are recorded as security
events just like a refusal on the API. A malformed parameter is answered as
the API answers it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, Undefined, select_autoescape
from markupsafe import Markup

from contracts import ErrorCode, GatehouseError, JsonValue, Role, canonical, escaped, visible
from shim.api.dashboard.session import csrf_of, same_origin, session_token
from shim.api.deps import ServiceDep, TokensDep, admit, identity_of
from shim.api.errors import record_refused
from shim.api.http import refuse_bad_parameters
from shim.api.services import Service
from shim.tokens import Identity, LiveTokens

__all__ = [
    "ANY_ROLE",
    "HEADERS",
    "HERE",
    "PageRoute",
    "checked_form",
    "common",
    "label",
    "page",
    "pretty",
    "viewer",
]

HERE = Path(__file__).parent


def _shown_as_text(value: object) -> object:
    """Every value a page prints, its hidden or reordering characters shown as
    escapes by the one allowlist (``contracts.escaped``): a name, a status, an
    error's message is as much text from outside as an objective is."""
    if isinstance(value, Markup):
        # Already HTML (join's output under autoescape): an escape is ASCII letters,
        # digits and a backslash, so the markup stays the markup it was.
        return Markup(escaped(str(value)))  # noqa: S704 - adds no markup to markup
    if value is None or isinstance(value, bool | int | float | Undefined):
        return value
    return escaped(str(value))


_env = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"], default=True),
    finalize=_shown_as_text,
)
# Text from planners and outside data: escaped for HTML by autoescape, and (one-line
# fields) its line breaks shown as \n by this filter; every value is escaped by
# ``_shown_as_text`` whether a template asks or not.
_env.filters["visible"] = visible


def when(value: object) -> str:
    """A stored time (ISO 8601, UTC) as people read it: ``2026-11-27 09:30:12 UTC``."""
    text = str(value or "")
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def shown(value: object) -> str:
    """A cell's value as people read it: yes and no, times in words, nothing for None."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}"
    text = str(value)
    return when(text) if len(text) >= 20 and text[4:5] == "-" and "T" in text else text


def visible_lines(text: str) -> str:
    """``visible`` line by line: the line breaks of a request stay line breaks."""
    return "\n".join(visible(line) for line in text.split("\n"))


# Names a page shows as words, not as the identifiers they are stored as: statuses
# (of runs and of steps) and budget kinds. Anything else: its underscores as spaces.
_WORDS = {
    "waiting_approval": "waiting for approval",
    "waiting_input": "waiting for input",
    "needs_operator": "needs an operator",
    "in_doubt": "in doubt",
    "max_steps": "max steps",
    "max_model_turns": "max model turns",
    "max_tokens": "max tokens",
    "max_cost_usd": "max cost (USD)",
    "max_wall_s": "max wall time (s)",
}


def label(value: object) -> str:
    """A stored name as people read it: ``waiting_approval`` is "waiting for approval"."""
    text = str(getattr(value, "value", value))
    return _WORDS.get(text, text.replace("_", " "))


_env.filters["visible_lines"] = visible_lines
_env.filters["label"] = label
_env.filters["when"] = when
_env.filters["shown"] = shown
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
        " img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # not no-referrer: with it Chromium sends "Origin: null" on form posts
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
ANY_ROLE = (Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)


class LoginNeededError(Exception):
    """No valid session: go to the login page (``refusal``: why a session's token was refused)."""

    def __init__(self, refusal: GatehouseError | None = None) -> None:
        super().__init__("login needed")
        self.refusal = refusal


def page(name: str, **context: object) -> HTMLResponse:
    """Render a template; ``http_status`` in the context sets the answer's status."""
    status = context.pop("http_status", 200)
    html = _env.get_template(name).render(**context)
    code = status if isinstance(status, int) else 200
    return HTMLResponse(html, status_code=code, headers=HEADERS)


def pretty(value: JsonValue) -> str:
    """In full, keys sorted, hidden and reordering characters escaped."""
    return canonical(value)


def viewer(*roles: Role) -> Callable[[Request, TokensDep, ServiceDep], Awaitable[Identity]]:
    """Who is looking, from the session's token; they must hold one of ``roles``."""

    async def me(request: Request, tokens: TokensDep, service: ServiceDep) -> Identity:
        refuse_bad_parameters(request)
        token = session_token(request)
        if token is None:
            raise LoginNeededError
        try:
            found = await identity_of(token, tokens, service.db)
        except GatehouseError as exc:
            raise LoginNeededError(exc) from exc  # revoked since logging in, a session ended
        return admit(request, found, roles)

    return me


def common(request: Request, me: Identity) -> dict[str, object]:
    """What every page's frame shows: who is logged in, the form token, a notice."""
    token = session_token(request) or ""
    return {"who": {"name": me.name, "roles": sorted(r.value for r in me.roles)},
            "csrf": csrf_of(token), "flash": request.query_params.get("done")}  # fmt: skip


async def checked_form(request: Request) -> dict[str, str]:
    """The posted form, if it came from this dashboard (CSRF token and Origin)."""
    form = await request.form()
    values = {k: v for k, v in form.items() if isinstance(v, str)}
    token = session_token(request) or ""
    if not same_origin(request) or values.get("csrf") != csrf_of(token):
        raise GatehouseError(
            ErrorCode.FORBIDDEN, "the form did not come from this dashboard (CSRF check)"
        )
    return values


async def _who_if_anyone(request: Request) -> Identity | None:
    """Who the session is, for an error page's frame; None whatever the reason not."""
    live = request.app.state.tokens
    service = getattr(request.app.state, "service", None)
    token = session_token(request)
    if token is None or not isinstance(live, LiveTokens) or not isinstance(service, Service):
        return None
    try:
        return await identity_of(token, live.current(), service.db)
    except GatehouseError:
        return None


async def _as_page(request: Request, handle: Callable[[], Awaitable[Response]]) -> Response:
    try:
        return await handle()
    except LoginNeededError as needed:
        if needed.refusal is not None:
            await record_refused(request, needed.refusal)
        target = quote(request.url.path + (f"?{request.url.query}" if request.url.query else ""))
        return RedirectResponse(f"/dashboard/login?next={target}", status_code=303)
    except GatehouseError as exc:
        await record_refused(request, exc)
        found = await _who_if_anyone(request)
        ctx = common(request, found) if found is not None else {"who": None}
        status = exc.code.http_status
        return page("error.html", http_status=status, status=status,
                    code=exc.code.value, message=exc.message, **ctx)  # fmt: skip


class PageRoute(APIRoute):
    """A dashboard route: what goes wrong is a page (or the login page), never JSON."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[object, object, Response]]:
        handle = super().get_route_handler()

        async def as_page(request: Request) -> Response:
            return await _as_page(request, lambda: handle(request))

        return as_page
