"""Bearer tokens: who a request comes from, and the tokens file that says so.

The tokens file stores each token's SHA-256 digest with the identity and roles
it stands for, and its life (expiry, revocation, rotation). ``TokenStore``
turns a token into an ``Identity`` or a refusal; ``LiveTokens`` follows the
file under a running shim; the file functions change it safely (the CLI's
``gatehouse tokens``, ``gatehouse up`` and the demo).

    _store.py     Identity, TokenStore, bearer(): a token checked against one version
    _file.py      the file: states, issue, revoke, rotate, each change atomic and locked
    _live.py      LiveTokens: the file's latest good version, re-read when it changes
    _reserved.py  the names no token, sign-in or Slack mapping may give a person
"""

from shim.tokens._file import (
    DEFAULT_GRACE,
    DEFAULT_LIFETIME,
    Clock,
    Issued,
    TokenFileError,
    TokenRefusedError,
    TokenState,
    add_token,
    entry_id,
    issue_token,
    parse_duration,
    read_tokens,
    revoke_token,
    rotate_token,
    state_of,
    token_digest,
    utc_now,
)
from shim.tokens._live import RECHECK_S, LiveTokens
from shim.tokens._reserved import refuse_reserved, reserved_reason
from shim.tokens._store import Identity, TokenStore, bearer, missing_tokens_file

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_LIFETIME",
    "RECHECK_S",
    "Clock",
    "Identity",
    "Issued",
    "LiveTokens",
    "TokenFileError",
    "TokenRefusedError",
    "TokenState",
    "TokenStore",
    "add_token",
    "bearer",
    "entry_id",
    "issue_token",
    "missing_tokens_file",
    "parse_duration",
    "read_tokens",
    "refuse_reserved",
    "reserved_reason",
    "revoke_token",
    "rotate_token",
    "state_of",
    "token_digest",
    "utc_now",
]
