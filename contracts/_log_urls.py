"""URLs in log lines without what may be a secret: the query, the userinfo, the fragment.

An http step's URL, a webhook's, a model's endpoint, a request to the shim:
any of them may carry a token in its query string (``?token=…``) or a password
before its host, and the HTTP client and server libraries log every request
they make or answer at INFO. ``url_for_log`` is the one spelling of a URL in a
log; ``hide_url_secrets_in_logs`` makes every log record of the process use
it, whoever logs (httpx, uvicorn's access log, Gatehouse's own loggers),
before any handler formats the line. What is recorded in the ledger is not a
log and keeps the URL as it was asked for.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

__all__ = ["hide_url_secrets_in_logs", "url_for_log"]

# A URL with a scheme, inside any text; it ends at whitespace or a quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
# A request target as a server logs it (uvicorn: "GET /path?query HTTP/1.1").
_TARGET = re.compile(r"(/[^\s?#]*)[?#]\S*")
_HIDDEN = "?..."  # where a query was: the reader knows there was one


def url_for_log(url: str) -> str:
    """``url`` as a log line may show it: scheme, host, port and path; a query is
    shown as ``?...``, userinfo and fragment are dropped."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(a URL that does not parse)"
    netloc = parts.netloc.rpartition("@")[2]
    shown = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else parts.path
    return shown + (_HIDDEN if parts.query else "")


def _target_for_log(target: str) -> str:
    found = _TARGET.fullmatch(target)
    if found is None:
        return target
    return found.group(1) + (_HIDDEN if "?" in target.split("#", 1)[0] else "")


def _scrub_text(text: str) -> str:
    if "://" in text:
        text = _URL.sub(lambda m: url_for_log(m.group()), text)
    return _target_for_log(text) if text.startswith("/") else text


def _scrub_arg(arg: object) -> object:
    if isinstance(arg, str):
        return _scrub_text(arg)
    if arg is None or isinstance(arg, int | float | bytes):
        return arg
    # An URL object (httpx.URL, as httpx logs each request): shown by its text.
    try:
        text = str(arg)
    except Exception:  # noqa: BLE001  (a log line must never fail for an argument's str)
        return arg
    return _scrub_text(text) if "://" in text else arg


def _scrub(record: logging.LogRecord) -> None:
    if isinstance(record.msg, str) and "://" in record.msg:
        record.msg = _scrub_text(record.msg)
    if isinstance(record.args, tuple):
        record.args = tuple(_scrub_arg(a) for a in record.args)
    elif isinstance(record.args, dict):
        record.args = {k: _scrub_arg(v) for k, v in record.args.items()}


_MARK = "_gatehouse_hides_url_secrets"


def hide_url_secrets_in_logs() -> None:
    """From now on every log record of this process shows its URLs as ``url_for_log``
    does (once per process; calling again changes nothing). A record factory, not a
    handler's filter: it holds for every logger and every handler, pytest's too."""
    made = logging.getLogRecordFactory()
    if getattr(made, _MARK, False):
        return

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = made(*args, **kwargs)
        _scrub(record)
        return record

    setattr(factory, _MARK, True)
    logging.setLogRecordFactory(factory)
