"""Unit tests for policies.commands.check_argv."""

from __future__ import annotations

from typing import Any

import pytest

from contracts import CommandRule, Connector, DriverKind, ErrorCode, GatehouseError
from policies.commands import check_argv

ECHO = CommandRule(name="echo", path="/usr/bin/echo", max_args=4)
HEAD = CommandRule(name="head", path="/usr/bin/head", allowed_flags=["-c", "-n"], max_args=2)
DIGITS = CommandRule(name="seq", path="/usr/bin/seq", arg_pattern=r"^[0-9]{1,3}$")
NOARGS = CommandRule(name="true", path="/usr/bin/true", max_args=0)
CONNECTOR = Connector(
    connector_id="shell",
    driver_kind=DriverKind.RESTRICTED_SHELL,
    description="test connector",
    commands=[ECHO, HEAD, DIGITS, NOARGS],
)


def _refused(argv: Any) -> GatehouseError:
    with pytest.raises(GatehouseError) as info:
        check_argv(argv, CONNECTOR)
    assert info.value.code is ErrorCode.COMMAND_NOT_ALLOWED
    return info.value


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["echo"], ECHO),
        (["echo", "hello", "world"], ECHO),
        (["echo", "a", "b", "c", "d"], ECHO),
        (["echo", "key=value", "user@host", "a,b", "x:y"], ECHO),
        (["echo", "dir/file.txt", "./x", "a..b"], ECHO),
        (["head", "-c", "100"], HEAD),
        (["head", "-n", "5"], HEAD),
        (["seq", "1", "999"], DIGITS),
        (["true"], NOARGS),
    ],
)
def test_allowed_argv_returns_its_rule(argv: list[str], rule: CommandRule) -> None:
    assert check_argv(argv, CONNECTOR) == rule


@pytest.mark.parametrize("argv", [[], "echo hi", None, ("echo",), {"argv": ["echo"]}])
def test_argv_must_be_a_non_empty_list(argv: Any) -> None:
    _refused(argv)


def test_items_must_be_strings() -> None:
    error = _refused(["echo", "ok", 3])
    assert error.details["index"] == 2


@pytest.mark.parametrize("name", ["rm", "sh", "bash", "ECHO", "echo ", ""])
def test_unknown_command_is_refused(name: str) -> None:
    error = _refused([name])
    assert error.details["index"] == 0


@pytest.mark.parametrize("name", ["/usr/bin/echo", "./echo", "bin/echo", "../echo"])
def test_argv0_must_not_be_a_path(name: str) -> None:
    error = _refused([name, "hi"])
    assert error.details["index"] == 0


def test_too_many_args_is_refused() -> None:
    _refused(["echo", "a", "b", "c", "d", "e"])
    _refused(["true", "x"])


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (["echo", "hello world"], 1),  # space is outside the default pattern
        (["echo", "ok", "$(id)"], 2),
        (["echo", "a;b"], 1),
        (["echo", "`id`"], 1),
        (["echo", "*"], 1),
        (["echo", ""], 1),
        (["echo", "x" * 257], 1),
        (["seq", "1000"], 1),
        (["seq", "1", "a"], 2),
    ],
)
def test_args_must_fully_match_the_pattern(argv: list[str], index: int) -> None:
    error = _refused(argv)
    assert error.details["index"] == index


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (["echo", "-n", "hi"], 1),  # echo lists no flags
        (["head", "-c100"], 1),  # flags match exactly, not by prefix
        (["head", "--bytes=100"], 1),
        (["head", "-n", "-v"], 2),
        (["head", "-"], 1),
    ],
)
def test_flags_must_be_listed_exactly(argv: list[str], index: int) -> None:
    error = _refused(argv)
    assert error.details["index"] == index


@pytest.mark.parametrize(
    ("argv", "index"),
    [
        (["echo", "/etc/passwd"], 1),
        (["echo", "ok", "/"], 2),
        (["echo", ".."], 1),
        (["echo", "../secret"], 1),
        (["echo", "a/../../b"], 1),
        (["echo", "a/.."], 1),
        (["echo", "if=/etc/passwd"], 1),  # dd-style key=value
        (["echo", "host:/etc"], 1),
        (["echo", "@/etc/passwd"], 1),  # curl-style @file
        (["echo", "x=../y"], 1),
        (["echo", "a,/etc"], 1),
    ],
)
def test_paths_outside_the_workspace_are_refused(argv: list[str], index: int) -> None:
    error = _refused(argv)
    assert error.details["index"] == index
    assert error.details["arg"] == argv[index]


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\n", "a\rb"])
def test_nul_and_newlines_are_refused(bad: str) -> None:
    error = _refused(["echo", "ok", bad])
    assert error.details["index"] == 2


def test_newline_in_argv0_is_refused() -> None:
    _refused(["echo\n"])


def test_anchored_pattern_cannot_be_bypassed_by_a_trailing_newline() -> None:
    rule = CommandRule(name="seq", path="/usr/bin/seq", arg_pattern=r"^[0-9]+$")
    connector = Connector(
        connector_id="s",
        driver_kind=DriverKind.RESTRICTED_SHELL,
        description="d",
        commands=[rule],
    )
    assert check_argv(["seq", "12"], connector) == rule
    with pytest.raises(GatehouseError):
        check_argv(["seq", "12\n"], connector)


def test_invalid_rule_pattern_is_a_refusal() -> None:
    rule = CommandRule(name="echo", path="/usr/bin/echo", arg_pattern="([")
    connector = Connector(
        connector_id="s",
        driver_kind=DriverKind.RESTRICTED_SHELL,
        description="d",
        commands=[rule],
    )
    with pytest.raises(GatehouseError) as info:
        check_argv(["echo", "x"], connector)
    assert info.value.code is ErrorCode.COMMAND_NOT_ALLOWED


def test_details_name_the_command() -> None:
    error = _refused(["echo", "/etc/passwd"])
    assert error.details["command"] == "echo"
