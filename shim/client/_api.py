"""The API's methods, written once for both clients.

Each method is a ``Calls`` entry (``shim.client._calls``: the request as data and how its
answer is read) bound to the client it is read from and sent with that client's
``send``: blocking on :class:`~shim.client.Client`, awaited on
:class:`~shim.client.AsyncClient`. A type checker sees ``api.run(run_id)`` as a
``RunView`` on the one and an awaitable ``RunView`` on the other (``Method.__get__``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Generic, ParamSpec, Protocol, Self, TypeVar, overload

from shim.client._calls import Call, Calls
from shim.client._local import found_shim
from shim.client._transport import Connection, Notice, connection

__all__ = ["Api", "Method"]

P = ParamSpec("P")
T = TypeVar("T")
U = TypeVar("U")


class _Awaits(Protocol):
    """A client whose ``send`` is awaited (``AsyncClient``)."""

    def send(self, call: Call[U]) -> Awaitable[U]: ...


class _Blocks(Protocol):
    """A client whose ``send`` blocks (``Client``)."""

    def send(self, call: Call[U]) -> U: ...


class Method(Generic[P, T]):
    """One API method: ``make`` builds its call, the client it is read from sends it."""

    def __init__(self, make: Callable[P, Call[T]]) -> None:
        self._make = make
        self.__doc__ = make.__doc__

    @overload
    def __get__(self, client: None, owner: type[object]) -> Method[P, T]: ...

    @overload
    def __get__(self, client: _Awaits, owner: type[object]) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, client: _Blocks, owner: type[object]) -> Callable[P, T]: ...

    def __get__(
        self, client: _Awaits | _Blocks | None, owner: type[object]
    ) -> Method[P, T] | Callable[P, T | Awaitable[T]]:
        if client is None:
            return self
        make, send = self._make, client.send

        def bound(*args: P.args, **kwargs: P.kwargs) -> T | Awaitable[T]:
            return send(make(*args, **kwargs))

        bound.__doc__ = self.__doc__
        return bound


class Api(ABC):
    """What both clients are: how one is made (``__init__``, ``from_env``; each client
    opens its own kind of connection, ``_open``) and the methods both have."""

    # While a waited-for run's status stands still, how often its steps are looked at.
    look_s = 2.0

    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout: float = 30,
        ca: str | None = None,
        *,
        retry_for: float = 0.0,
        notice: Notice | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._retry_for = retry_for
        self._notice = notice
        self._open(connection(base_url, token, timeout, ca))

    @abstractmethod
    def _open(self, how: Connection) -> None:
        """Open this client's own kind of connection (blocking, or asyncio) as ``_http``."""

    @classmethod
    def from_env(
        cls, token: str | None = None, *, retry_for: float = 0.0, notice: Notice | None = None
    ) -> Self:
        """A client for the shim this folder's user would reach, found as the CLI finds
        it: ``GATEHOUSE_URL``, else the stack ``gatehouse up`` runs from this folder
        (``var/stack.json``), else ``http://127.0.0.1:8000``; the token ``token`` or
        ``GATEHOUSE_TOKEN``; the CA ``GATEHOUSE_CA``, if set."""
        return cls(**found_shim(token), retry_for=retry_for, notice=notice)

    # The API's methods, in the order docs/client.md lists them.

    submit = Method(Calls.submit)
    submit_archive = Method(Calls.submit_archive)
    output_archive = Method(Calls.output_archive)
    run = Method(Calls.run)
    runs = Method(Calls.runs)
    get_json = Method(Calls.get_json)
    artifact = Method(Calls.artifact)
    decide = Method(Calls.decide)
    approve = Method(Calls.approve)
    reject = Method(Calls.reject)
    cancel = Method(Calls.cancel)
    logout = Method(Calls.logout)
    message = Method(Calls.message)
    ledger = Method(Calls.ledger)
    verify_ledger = Method(Calls.verify_ledger)
    replay = Method(Calls.replay)
    explain = Method(Calls.explain)
    fork = Method(Calls.fork)
    resolve = Method(Calls.resolve)
    episodes = Method(Calls.episodes)
    artifacts = Method(Calls.artifacts)
    changed = Method(Calls.changed)
