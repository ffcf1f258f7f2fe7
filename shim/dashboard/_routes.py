"""Dashboard pages: runs, a run (live), approvals, security events, workers.

Every page is rendered on the server with Jinja2 autoescaping, so model and
tool output (objectives, plan inputs, episodes, error messages) is text, never
markup. Pages call the same ``Service`` methods as the API with the caller's
identity, so roles, four-eyes and ownership hold exactly as there; a refusal is
recorded as a security event just like one on the API. The run page listens to
the run's event stream and re-renders its body as events arrive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Form, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sse_starlette import EventSourceResponse
from starlette.concurrency import run_in_threadpool

from contracts import (
    ApprovalRequest,
    CancelRequest,
    Decision,
    ErrorCode,
    GatehouseError,
    JsonValue,
    Role,
    RunStatus,
    RunView,
    canonical,
    shown_input,
    visible,
)
from policies.taint import tainted
from shim._events import event_stream, resume_point
from shim._health import workers
from shim._service import Service
from shim.dashboard._session import csrf_of, forget, identify, remember, same_origin, session_token
from shim.tokens import Identity, TokenStore

__all__ = ["add_dashboard_routes"]

_HERE = Path(__file__).parent
_env = Environment(
    loader=FileSystemLoader(_HERE / "templates"),
    autoescape=select_autoescape(["html"], default=True),
)
# Text from planners and outside data: escaped for HTML by autoescape, and its
# hidden or reordering characters shown as \uXXXX by this filter.
_env.filters["visible"] = visible
RunId = Annotated[str, PathParam(pattern=r"^run_[0-9a-f]{32}$")]
Sha256 = Annotated[str, PathParam(pattern=r"^[0-9a-f]{64}$")]
_HEADERS = {
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
_STATIC = {"live.js": "text/javascript", "style.css": "text/css"}
_ANY_ROLE = (Role.SUBMITTER, Role.APPROVER, Role.OPERATOR)


class _LoginNeededError(Exception):
    """No valid session: go to the login page (``refusal``: why a session's token was refused)."""

    def __init__(self, refusal: GatehouseError | None = None) -> None:
        super().__init__("login needed")
        self.refusal = refusal


_LOGIN_PROBLEMS = {
    ErrorCode.TOKEN_EXPIRED: "That token has expired.",
    ErrorCode.TOKEN_REVOKED: "That token was revoked.",
}


def _login_refused() -> GatehouseError:
    return GatehouseError(ErrorCode.UNAUTHORIZED, "dashboard login refused")


def _page(name: str, **context: object) -> HTMLResponse:
    """Render a template; ``http_status`` in the context sets the answer's status."""
    status = context.pop("http_status", 200)
    html = _env.get_template(name).render(**context)
    code = status if isinstance(status, int) else 200
    return HTMLResponse(html, status_code=code, headers=_HEADERS)


def _pretty(value: JsonValue) -> str:
    """In full, keys sorted, hidden and reordering characters escaped."""
    return canonical(value)


def add_dashboard_routes(
    app: FastAPI,
    svc: Callable[[], Service],
    tokens: Callable[[], TokenStore],
    record: Callable[[Request, GatehouseError], Awaitable[None]],
) -> None:
    def who(request: Request, *roles: Role) -> Identity:
        token = session_token(request)
        if token is None:
            raise _LoginNeededError
        try:
            found = tokens().check(token)
        except GatehouseError as exc:
            raise _LoginNeededError(exc) from exc  # e.g. revoked since logging in
        request.state.identity, request.state.token_id = found.name, found.token_id
        if roles and not found.has(*roles):
            wanted = " or ".join(r.value for r in roles)
            raise GatehouseError(ErrorCode.FORBIDDEN, f"{found.name} is not {wanted}")
        return found

    def common(request: Request, me: Identity) -> dict[str, object]:
        token = session_token(request) or ""
        return {"who": {"name": me.name, "roles": sorted(r.value for r in me.roles)},
                "csrf": csrf_of(token), "flash": request.query_params.get("done")}  # fmt: skip

    async def checked_form(request: Request, me: Identity) -> dict[str, str]:
        form = await request.form()
        values = {k: v for k, v in form.items() if isinstance(v, str)}
        token = session_token(request) or ""
        if not same_origin(request) or values.get("csrf") != csrf_of(token):
            raise GatehouseError(
                ErrorCode.FORBIDDEN, "the form did not come from this dashboard (CSRF check)"
            )
        return values

    async def guarded(request: Request, make: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await make()
        except _LoginNeededError as needed:
            if needed.refusal is not None:
                await record(request, needed.refusal)
            target = quote(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            return RedirectResponse(f"/dashboard/login?next={target}", status_code=303)
        except GatehouseError as exc:
            await record(request, exc)
            found = identify(request, tokens())
            ctx = common(request, found) if found is not None else {"who": None}
            status = exc.code.http_status
            return _page("error.html", http_status=status, status=status,
                         code=exc.code.value, message=exc.message, **ctx)  # fmt: skip

    @app.get("/dashboard/static/{name}")
    def dashboard_static(
        name: Annotated[str, PathParam(pattern=r"^[a-z]+\.(js|css)$")],
    ) -> Response:
        if name not in _STATIC:
            raise GatehouseError(ErrorCode.NOT_FOUND, f"no dashboard file {name!r}")
        return FileResponse(_HERE / "static" / name, media_type=_STATIC[name], headers=_HEADERS)

    @app.get("/dashboard/login")
    def login_page(next: Annotated[str, Query(max_length=500)] = "/dashboard") -> Response:
        return _page("login.html", who=None, next=next, problem=None)

    @app.post("/dashboard/login")
    async def login(
        request: Request,
        token: Annotated[str, Form(max_length=500)],
        next: Annotated[str, Form(max_length=500)] = "/dashboard",
    ) -> Response:
        refused = None if same_origin(request) else _login_refused()
        try:
            tokens().check(token.strip())
        except GatehouseError as exc:
            # An expired or revoked token is named as such (and by its id in the record).
            refused = exc if exc.code in _LOGIN_PROBLEMS else _login_refused()
        if refused is not None:
            await record(request, refused)
            problem = _LOGIN_PROBLEMS.get(refused.code, "That token is not valid.")
            return _page("login.html", http_status=401, who=None, next=next, problem=problem)
        # only somewhere on this dashboard: never an open redirect
        target = next if next.startswith("/dashboard") and "//" not in next else "/dashboard"
        response = RedirectResponse(target, status_code=303)
        remember(response, request, token.strip())
        return response

    @app.post("/dashboard/logout")
    async def logout(request: Request) -> Response:
        async def make() -> Response:
            await checked_form(request, who(request))
            response = RedirectResponse("/dashboard/login", status_code=303)
            forget(response)
            return response

        return await guarded(request, make)

    @app.get("/dashboard")
    async def runs_page(
        request: Request,
        status: Annotated[str, Query(max_length=40)] = "",
        recipe: Annotated[str, Query(max_length=64)] = "",
        cursor: Annotated[str | None, Query(max_length=200, pattern=r"^[^\x00]*$")] = None,
    ) -> Response:
        async def make() -> Response:
            me = who(request, *_ANY_ROLE)
            try:
                wanted = RunStatus(status) if status else None
            except ValueError as exc:
                raise GatehouseError(ErrorCode.INVALID_REQUEST, f"no status {status!r}") from exc
            page = await run_in_threadpool(
                lambda: svc().runs(wanted, 50, cursor, me, recipe=recipe.strip() or None)
            )
            nxt = {"status": status, "recipe": recipe, "cursor": page.next_cursor or ""}
            return _page("runs.html", runs=page.runs, statuses=[s.value for s in RunStatus],
                         status=status, recipe=recipe, next_cursor=page.next_cursor,
                         next_query=urlencode(nxt), **common(request, me))  # fmt: skip

        return await guarded(request, make)

    @app.get("/dashboard/approvals")
    async def approvals_page(request: Request) -> Response:
        async def make() -> Response:
            me = who(request, Role.APPROVER, Role.OPERATOR)
            page = await run_in_threadpool(svc().runs, RunStatus.WAITING_APPROVAL, 200, None, me)
            oldest = sorted(page.runs, key=lambda r: (r.updated_at, r.run_id))
            return _page("approvals.html", runs=oldest, **common(request, me))

        return await guarded(request, make)

    @app.get("/dashboard/security")
    async def security_page(request: Request) -> Response:
        async def make() -> Response:
            me = who(request, Role.OPERATOR)
            found = await run_in_threadpool(svc().security_events, 200)
            rows = [{**e, "text": _pretty(e)} for e in found]
            return _page("security.html", events=rows, **common(request, me))

        return await guarded(request, make)

    @app.get("/dashboard/workers")
    async def workers_page(request: Request) -> Response:
        async def make() -> Response:
            me = who(request, Role.OPERATOR)
            s = svc()
            report = await run_in_threadpool(
                workers, s.db, s.settings.app_version, s.settings.dead_after_s
            )
            rows = report.get("workers")
            listed = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
            columns = ["executor_id", "app_version", "hostname", "pid", "heartbeat_at",
                       "heartbeat_age_s", "live", "serves_queue"]  # fmt: skip
            return _page("workers.html", workers=listed, columns=columns, **common(request, me))

        return await guarded(request, make)

    def run_context(request: Request, me: Identity, view: RunView) -> dict[str, object]:
        s = svc()
        operator = me.has(Role.OPERATOR)
        calls = s.ledger(view.run_id) if operator else []
        durations = {c.step_id: f"{c.duration_ms} ms" for c in calls if c.duration_ms is not None}
        episodes = s.episodes(view.run_id) if operator else []
        card = view.plan_card
        inputs: list[str] = []
        if card is not None:
            outside = tainted(card.plan)
            inputs = [shown_input(st, st.step_id in outside) for st in card.plan.steps]
        own = view.submitted_by == me.name
        return {
            "view": view,
            "plan_inputs": inputs,
            "operator": operator,
            "can_decide": me.has(Role.APPROVER) and view.status is RunStatus.WAITING_APPROVAL,
            "can_cancel": (operator or (own and me.has(Role.SUBMITTER)))
            and not view.status.terminal,
            "calls": calls,
            "durations": durations,
            "episodes": [
                {**e.model_dump(mode="json"), "body_text": _pretty(e.model_dump(mode="json"))}
                for e in episodes
            ],
            "artifacts": s.artifacts(view.run_id) if operator else [],
            **common(request, me),
        }

    def run_for(request: Request, run_id: str) -> dict[str, object]:
        me = who(request, *_ANY_ROLE)
        view = svc().run(run_id, me)
        return run_context(request, me, view)

    @app.get("/dashboard/runs/{run_id}")
    async def run_page(request: Request, run_id: RunId) -> Response:
        async def make() -> Response:
            return _page("run.html", **await run_in_threadpool(run_for, request, run_id))

        return await guarded(request, make)

    @app.get("/dashboard/runs/{run_id}/body")
    async def run_body(request: Request, run_id: RunId) -> Response:
        async def make() -> Response:
            return _page("_run_body.html", **await run_in_threadpool(run_for, request, run_id))

        return await guarded(request, make)

    @app.get("/dashboard/runs/{run_id}/events")
    async def run_events_for_dashboard(request: Request, run_id: RunId) -> Response:
        async def make() -> Response:
            me = who(request, *_ANY_ROLE)
            start = resume_point(request.headers.get("last-event-id"), None)
            service = svc()
            await run_in_threadpool(service.run, run_id, me)
            return EventSourceResponse(event_stream(service, run_id, start), ping=15)

        return await guarded(request, make)

    async def decide(request: Request, run_id: str, decision: Decision) -> Response:
        async def make() -> Response:
            me = who(request, Role.APPROVER)
            form = await checked_form(request, me)
            try:
                body = ApprovalRequest(
                    plan_digest=form.get("plan_digest", ""),
                    comment=form.get("comment") or None,
                )
            except ValueError as exc:
                raise GatehouseError(ErrorCode.INVALID_REQUEST, "the form is not valid") from exc
            await run_in_threadpool(svc().decide, run_id, body, decision, me)
            done = quote(f"{decision.value} by {me.name}")
            return RedirectResponse(f"/dashboard/runs/{run_id}?done={done}", status_code=303)

        return await guarded(request, make)

    @app.post("/dashboard/runs/{run_id}/approve")
    async def approve_form(request: Request, run_id: RunId) -> Response:
        return await decide(request, run_id, Decision.APPROVED)

    @app.post("/dashboard/runs/{run_id}/reject")
    async def reject_form(request: Request, run_id: RunId) -> Response:
        return await decide(request, run_id, Decision.REJECTED)

    @app.post("/dashboard/runs/{run_id}/cancel")
    async def cancel_form(request: Request, run_id: RunId) -> Response:
        async def make() -> Response:
            me = who(request, Role.SUBMITTER, Role.OPERATOR)
            form = await checked_form(request, me)
            try:
                body = CancelRequest(reason=form.get("reason") or None)
            except ValueError as exc:
                raise GatehouseError(ErrorCode.INVALID_REQUEST, "the form is not valid") from exc
            await run_in_threadpool(svc().cancel, run_id, body, me)
            done = quote(f"cancel requested by {me.name}")
            return RedirectResponse(f"/dashboard/runs/{run_id}?done={done}", status_code=303)

        return await guarded(request, make)

    @app.post("/dashboard/runs/{run_id}/replay")
    async def replay_form(request: Request, run_id: RunId) -> Response:
        async def make() -> Response:
            me = who(request, Role.OPERATOR)
            await checked_form(request, me)
            report = await run_in_threadpool(svc().replay, run_id)
            verdict = (f"replayed {report.calls} calls from the ledger, "
                       f"{report.outbound_calls} outbound: "
                       + ("the trace matches" if report.match else "it DIVERGED"))  # fmt: skip
            return _page("result.html", heading=f"Replay of {run_id}", ok=report.match,
                         verdict=verdict, report=_pretty(report.model_dump(mode="json")),
                         run_id=run_id, **common(request, me))  # fmt: skip

        return await guarded(request, make)

    @app.get("/dashboard/runs/{run_id}/verify")
    async def verify_page(request: Request, run_id: RunId) -> Response:
        async def make() -> Response:
            me = who(request, Role.OPERATOR)
            report = await run_in_threadpool(svc().verify_ledger, run_id)
            ok = report.get("ok") is True
            verdict = "the hash chain verifies" if ok else "the hash chain does NOT verify"
            return _page("result.html", heading=f"Ledger of {run_id}", ok=ok, verdict=verdict,
                         report=_pretty(report), run_id=run_id, **common(request, me))  # fmt: skip

        return await guarded(request, make)

    @app.get("/dashboard/artifacts/{sha256}")
    async def artifact_download(request: Request, sha256: Sha256) -> Response:
        async def make() -> Response:
            who(request, Role.OPERATOR)
            media, content = await run_in_threadpool(svc().artifact, sha256)
            # a download, never a page of this origin: tool output is not trusted markup
            return Response(content, media_type="application/octet-stream", headers={
                **_HEADERS, "Content-Disposition": f'attachment; filename="{sha256}"',
                "Gatehouse-Media-Type": media})  # fmt: skip

        return await guarded(request, make)
