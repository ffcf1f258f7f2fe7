"""Workers of a SQLite database told of queued work within the host: a datagram per
partition to each worker's socket once the transaction that queued it is over."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ledger import WakeSocket, open_database, wake_folder, work_queue


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'g.sqlite'}"


def test_each_file_has_a_short_folder_of_its_own(url: str, tmp_path: Path) -> None:
    folder = wake_folder(url)
    assert folder is not None
    assert folder == wake_folder(f"sqlite:///{tmp_path / '.' / 'g.sqlite'}")
    assert folder != wake_folder(f"sqlite:///{tmp_path / 'other.sqlite'}")
    assert len(str(folder / f"{2**22}-abcdef01.sock")) < 100  # a socket path's limit
    assert wake_folder("postgresql://db/gatehouse") is None


def test_a_worker_hears_what_a_transaction_queued_once_it_is_over(url: str) -> None:
    folder = wake_folder(url)
    assert folder is not None
    db, ear = open_database(url), WakeSocket(folder)
    try:
        with db.engine.begin() as conn:
            work_queue.notify_work(conn, "sub:alice")
            work_queue.notify_work(conn, "sub:bob")
            assert ear.hear(0) == set()  # not before the transaction is over
        assert ear.hear(1.0) == {"sub:alice", "sub:bob"}
        assert ear.hear(0) == set()  # each said once
        with db.engine.connect():  # a later use of the connection says nothing again
            pass
        assert ear.hear(0.05) == set()
    finally:
        ear.close()
        db.dispose()


def test_every_worker_is_told_and_a_dead_ones_socket_is_removed(url: str) -> None:
    folder = wake_folder(url)
    assert folder is not None
    db, one, two = open_database(url), WakeSocket(folder), WakeSocket(folder)
    # a worker killed before it removed its socket: bound, and nobody reads it
    dead = folder / f"{os.getpid()}-dead.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as left:
        left.bind(str(dead))
    try:
        with db.engine.begin() as conn:
            work_queue.notify_work(conn, "p")
        assert one.hear(1.0) == {"p"} and two.hear(1.0) == {"p"}
        assert not dead.exists()
    finally:
        one.close()
        two.close()
        db.dispose()
    assert not folder.exists()  # the last one out leaves no folder behind


def test_a_folder_others_can_reach_is_refused(url: str) -> None:
    folder = wake_folder(url)
    assert folder is not None
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    try:
        with pytest.raises(PermissionError):
            WakeSocket(folder)
    finally:
        folder.rmdir()


def test_a_folder_the_last_worker_out_removed_under_a_bind_is_made_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's bind racing the last one out (its ``close`` removes the folder
    between the folder's making and the bind) binds in the folder made again."""
    folder = wake_folder(url)
    assert folder is not None
    import ledger._inhost as inhost

    made = inhost._own_folder
    calls: list[bool] = []

    def raced(f: Path) -> bool:
        owned = made(f)
        if not calls:
            f.rmdir()  # the last worker out, at just that moment
        calls.append(owned)
        return owned

    monkeypatch.setattr(inhost, "_own_folder", raced)
    ear = WakeSocket(folder)
    try:
        assert calls == [True, True]
        assert ear.path.exists()
    finally:
        ear.close()
