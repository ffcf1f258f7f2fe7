"""Restricted-shell command policy: which argv a step may run.

Pure, no I/O. The program is chosen by *name* from the connector's allowlist
and run by the rule's absolute path, never looked up on PATH and never through
a shell, so the only attack surface left is the arguments. Those must match the
rule's pattern, flags must be listed one by one, and no argument may point
outside the run's workspace (absolute paths, ``..`` components), including
the value half of ``key=value`` / ``--opt=value`` / ``@file`` forms.
"""

from __future__ import annotations

import re

from contracts import CommandRule, Connector, ErrorCode, GatehouseError, JsonObject

__all__ = ["check_argv"]

# Characters that split an argument into pieces a program may treat as paths
# (dd's if=/x, --file=/x, host:/x, curl's @/x, comma lists).
_VALUE_SEPARATORS = re.compile(r"[=,:@]")
_FORBIDDEN_CHARS = ("\x00", "\n", "\r")


def _refuse(message: str, argv: object, index: int | None = None) -> GatehouseError:
    details: JsonObject = {}
    if isinstance(argv, list) and argv and isinstance(argv[0], str):
        details["command"] = argv[0][:128]
    if index is not None:
        details["index"] = index
        if isinstance(argv, list) and index < len(argv) and isinstance(argv[index], str):
            details["arg"] = argv[index][:256]
    return GatehouseError(ErrorCode.COMMAND_NOT_ALLOWED, message, details)


def _escapes_workspace(arg: str) -> bool:
    """True if the argument, or any value piece of it, is absolute or climbs with ``..``."""
    pieces = [arg, *_VALUE_SEPARATORS.split(arg)]
    for piece in pieces:
        if piece.startswith("/"):
            return True
        if ".." in piece.split("/"):
            return True
    return False


def _find_rule(name: str, connector: Connector) -> CommandRule | None:
    for rule in connector.commands:
        if rule.name == name:
            return rule
    return None


def check_argv(argv: list[str], connector: Connector) -> CommandRule:
    """Return the rule that allows ``argv``, or raise COMMAND_NOT_ALLOWED.

    ``argv`` arrives from a plan (JSON), so its shape is checked here too
    rather than trusted from the annotation. The error's details name the
    offending argument's index.
    """
    if not isinstance(argv, list) or not argv:
        raise _refuse("argv must be a non-empty list of strings", argv)
    for index, item in enumerate(argv):
        if not isinstance(item, str):
            raise _refuse("every argv item must be a string", argv, index)
        if any(ch in item for ch in _FORBIDDEN_CHARS):
            raise _refuse("argv items may not contain NUL, CR or newline", argv, index)

    name = argv[0]
    if "/" in name:
        raise _refuse("argv[0] must be a command name, never a path", argv, 0)
    rule = _find_rule(name, connector)
    if rule is None:
        raise _refuse(f"command {name!r} is not allowlisted", argv, 0)

    args = argv[1:]
    if len(args) > rule.max_args:
        raise _refuse(f"{name} takes at most {rule.max_args} arguments, got {len(args)}", argv)
    try:
        pattern = re.compile(rule.arg_pattern)
    except re.error as exc:
        raise _refuse(f"the rule for {name} has an invalid arg_pattern: {exc}", argv) from exc

    for index, arg in enumerate(args, start=1):
        if pattern.fullmatch(arg) is None:
            raise _refuse("argument does not match the rule's arg_pattern", argv, index)
        if arg.startswith("-") and arg not in rule.allowed_flags:
            raise _refuse("flag is not in the rule's allowed_flags", argv, index)
        if _escapes_workspace(arg):
            raise _refuse("argument is an absolute path or has a '..' component", argv, index)
    return rule
