"""The plugin-registry watcher's rules (kubelet v1.37.1's), on real files and unix sockets."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from draflow_runtime.pluginwatcher import PluginWatcher, Stamp, plugin_sockets, single_node_dirs
from draflow_runtime.reconcile import Done, ReconcileResult, RequeueWithBackoff
from draflow_testenv.wait import eventually


@pytest.fixture
def reg() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def bind(path: Path) -> socket.socket:
    """A unix socket file at ``path`` (the caller closes it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


class Recorder:
    """A handler that records every call; fails ``fail`` times per socket first."""

    def __init__(self, fail: int = 0) -> None:
        self.calls: list[tuple[str, str, Stamp | None]] = []
        self.fail = fail
        self.closed = False

    async def sync_socket(self, node: str, path: str, stamp: Stamp | None) -> ReconcileResult:
        self.calls.append((node, path, stamp))
        if stamp is not None and sum(1 for _, p, _ in self.calls if p == path) <= self.fail:
            return RequeueWithBackoff()
        return Done()

    async def close(self) -> None:
        self.closed = True


def test_only_sockets_not_dot_files_at_any_depth(reg: Path) -> None:
    socks = [
        bind(reg / "a-reg.sock"),
        bind(reg / "b.registration"),
        bind(reg / "sub" / "deeper" / "c-reg.sock"),
        bind(reg / ".hidden-reg.sock"),
        bind(reg / ".dotdir" / "d-reg.sock"),
    ]
    try:
        (reg / "notes.sock").write_text("a regular file, not a socket")
        found = plugin_sockets(reg)
        want = [reg / "a-reg.sock", reg / "b.registration", reg / "sub" / "deeper" / "c-reg.sock"]
        assert sorted(found) == sorted(str(p) for p in want)
        assert plugin_sockets(reg / "missing") == {}
    finally:
        for s in socks:
            s.close()


async def test_identity_is_the_path_a_chmod_is_no_change_a_new_socket_is(reg: Path) -> None:
    handler = Recorder()
    watcher = PluginWatcher(single_node_dirs("n", reg), handler, interval=3600)
    path = reg / "gpu-reg.sock"
    sock = bind(path)
    await watcher.sync()
    assert [(n, p) for n, p, _ in handler.calls] == [("n", str(path))]
    first = handler.calls[0][2]

    os.chmod(path, 0o600)
    assert watcher.scan() == []

    sock.close()
    path.unlink()
    sock = bind(path)  # created again at the same path (a restarted driver)
    try:
        await watcher.sync()
        assert len(handler.calls) == 2 and handler.calls[1][2] not in (None, first)
    finally:
        sock.close()
    path.unlink()
    await watcher.sync()
    assert handler.calls[-1] == ("n", str(path), None)
    await watcher.close()
    assert handler.closed


async def test_a_failed_socket_is_retried_with_backoff_until_it_succeeds(reg: Path) -> None:
    handler = Recorder(fail=2)
    watcher = PluginWatcher(
        single_node_dirs("n", reg), handler, interval=3600, retry_base=0.01, retry_max=0.05
    )
    sock = bind(reg / "gpu-reg.sock")
    task = asyncio.create_task(watcher.run())
    try:
        await eventually(lambda: len(handler.calls) == 3, 10, "two retries, then done")
        assert watcher.queue.num_requeues(("n", str(reg / "gpu-reg.sock"))) == 0  # the Done reset it
    finally:
        task.cancel()
        sock.close()


def test_a_settled_directory_is_not_listed_again_and_changes_still_show(reg: Path) -> None:
    """With a cache, an unchanged directory costs one stat; every add, remove or re-creation still shows."""
    cache: dict = {}
    later = lambda: os.stat(reg).st_mtime_ns + 10**12  # noqa: E731  (long settled)
    a = bind(reg / "sub" / "a-reg.sock")
    try:
        assert list(plugin_sockets(reg, cache, later())) == [str(reg / "sub" / "a-reg.sock")]
        assert str(reg / "sub") in cache
        b = bind(reg / "sub" / "b-reg.sock")
        b.close()
        assert sorted(plugin_sockets(reg, cache, later())) == [
            str(reg / "sub" / "a-reg.sock"), str(reg / "sub" / "b-reg.sock")
        ]
        before = plugin_sockets(reg, cache, later())[str(reg / "sub" / "a-reg.sock")]
        a.close()
        (reg / "sub" / "a-reg.sock").unlink()
        a = bind(reg / "sub" / "a-reg.sock")  # created again
        again = plugin_sockets(reg, cache, later())
        assert again[str(reg / "sub" / "a-reg.sock")] != before
        shutil.rmtree(reg / "sub")
        assert plugin_sockets(reg, cache, later()) == {}
        assert str(reg / "sub") not in cache
    finally:
        a.close()


def test_a_directory_changed_within_one_clock_tick_is_listed_again(reg: Path) -> None:
    """Two changes within one tick of the coarse mtime clock leave the same mtime: a listing taken
    between them must not be reused, or the second change would never be seen."""
    cache: dict = {}
    a = bind(reg / "a-reg.sock")
    b = None
    try:
        mtime = os.stat(reg).st_mtime_ns
        assert list(plugin_sockets(reg, cache, mtime + 1_000_000)) == [str(reg / "a-reg.sock")]
        b = bind(reg / "b-reg.sock")
        os.utime(reg, ns=(mtime, mtime))  # as if both changes fell into the same tick
        assert sorted(plugin_sockets(reg, cache, mtime + 10**12)) == [
            str(reg / "a-reg.sock"), str(reg / "b-reg.sock")
        ]
    finally:
        a.close()
        if b is not None:
            b.close()
