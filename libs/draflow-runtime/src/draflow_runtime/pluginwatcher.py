"""The kubelet plugin-registry watcher, once: which files are plugins, when a socket is a new registration.

The rules are kubelet v1.37.1's (``pkg/kubelet/pluginmanager``: ``pluginwatcher`` + ``reconciler``), shared
by kubelet-dra-shim (which registers plugins) and slice-publisher (which streams their inventory):

* a plugin is a **unix socket** anywhere under the registry directory, subdirectories included, whatever
  its name (``<driver>-reg.sock`` is the convention, not a rule); regular files and anything whose name
  starts with ``.`` (files and directories) are ignored;
* a socket's **identity is its path**; a socket created again at the same path (a restarted driver binds
  anew) is a new registration: the old one is removed first, then the new one registered. Here, polling
  instead of inotify, "created again" is a new (inode, mtime) :data:`Stamp`; a ``chmod``/``chown`` of the
  socket (its ctime) is not a re-creation, the kubelet ignores those events too;
* a socket that disappears is deregistered;
* a ``PluginInfo`` with an empty endpoint names the registration socket itself (:func:`get_info`).

:class:`PluginWatcher` polls every ``interval`` seconds (portable, one ``scandir`` per directory, one loop
for a whole fleet) and puts one key per changed socket, ``(node, socket path)``, in a work queue; the
:class:`SocketHandler` reconciles it from the last scan (``stamp`` None: gone). A handler that could not
finish (GetInfo failed, the plugin was refused) returns ``RequeueWithBackoff()`` and the runtime's
runner retries the key with the queue's exponential backoff (``retry_base`` doubling to ``retry_max``,
kubelet's operation executor backs off the same way) until the socket changes or the retry succeeds.

:func:`get_info` is the ``pluginregistration.Registration/GetInfo`` call both services make first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc

from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb2
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc

from .log import get_logger
from .reconcile import ReconcileResult, Runner
from .workqueue import QueueShutDown, WorkQueue

__all__ = [
    "DRA_PLUGIN_TYPE",
    "PluginInfo",
    "PluginWatcher",
    "SocketHandler",
    "SocketKey",
    "Stamp",
    "check_dra_plugin",
    "fleet_dirs",
    "get_info",
    "notify_registration",
    "plugin_sockets",
    "single_node_dirs",
    "stamp_of",
]

log = get_logger(__name__)

DRA_PLUGIN_TYPE = "DRAPlugin"
#: (inode, mtime in ns) of a socket file: a socket bound again at the same path gets a new one.
Stamp = tuple[int, int]
#: (node, socket path): one registration.
SocketKey = tuple[str, str]


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_mtime_ns)


#: A directory's listing, kept while the directory's (inode, mtime) stays the same: (subdirectories,
#: sockets with their stamps).
DirListing = tuple[list[str], dict[str, Stamp]]
#: Directory path -> (its stamp, its listing): what :func:`plugin_sockets` may reuse on the next scan.
DirCache = dict[str, tuple[Stamp, DirListing]]

#: A listing is reused only for a directory unchanged for this long: its mtime comes from a coarse clock
#: (a few ms), so two changes within one tick leave the same mtime, and a listing taken between them
#: would hide the second one forever (git's "racily clean" problem). Such a directory is listed again.
SETTLED_NS = 2_000_000_000


def _list_dir(path: str) -> DirListing:
    subdirs: list[str] = []
    sockets: dict[str, Stamp] = {}
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            with contextlib.suppress(FileNotFoundError):
                if entry.is_dir(follow_symlinks=False):
                    subdirs.append(entry.path)
                    continue
                st = entry.stat()  # follows a symlink, as the kubelet's os.Stat does
                if stat.S_ISSOCK(st.st_mode):
                    sockets[entry.path] = stamp_of(st)
    return subdirs, sockets


def plugin_sockets(
    directory: Path | str, cache: DirCache | None = None, now_ns: int | None = None
) -> dict[str, Stamp]:
    """Every plugin socket under ``directory`` (recursively; see the module docstring) with its stamp.
    A directory that does not exist has none; entries vanishing during the walk are skipped.

    With ``cache`` (the previous scan's, updated in place for the directories walked now) a directory
    whose (inode, mtime) did not change since it settled is not listed again: one ``stat`` instead of a
    ``scandir`` and a ``stat`` per entry, which at 1,000 nodes polled twice a second was a fifth of the
    publisher's CPU (py-spy). Creating, removing or renaming an entry changes its directory's mtime;
    what the kubelet ignores (a ``chmod``, a ``touch`` of a socket) is not seen then either.
    """
    now_ns = time.time_ns() if now_ns is None else now_ns
    found: dict[str, Stamp] = {}
    pending = [str(directory)]
    walked: set[str] = set()
    while pending:
        path = pending.pop()
        walked.add(path)
        try:
            dir_stamp = stamp_of(os.stat(path))
            hit = cache.get(path) if cache is not None else None
            if hit is not None and hit[0] == dir_stamp:
                subdirs, sockets = hit[1]
            else:
                subdirs, sockets = _list_dir(path)
                if cache is not None and now_ns - dir_stamp[1] > SETTLED_NS:
                    cache[path] = (dir_stamp, (subdirs, sockets))
                elif cache is not None:
                    cache.pop(path, None)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            if cache is not None:
                cache.pop(path, None)
            continue
        pending.extend(subdirs)
        found.update(sockets)
    if cache is not None:
        for gone in cache.keys() - walked:  # subdirectories removed since
            del cache[gone]
    return found


def single_node_dirs(node: str, registry_dir: Path | str) -> Callable[[], dict[str, Path]]:
    """One node, one registry directory."""
    return lambda: {node: Path(registry_dir)}


def fleet_dirs(root: Path | str) -> Callable[[], dict[str, Path]]:
    """Every ``<root>/<node>/plugins_registry`` that exists at the time of the call (nodes come and go)."""

    def scan() -> dict[str, Path]:
        out: dict[str, Path] = {}
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(root):
                reg = Path(entry.path) / "plugins_registry"
                if entry.is_dir() and reg.is_dir():
                    out[entry.name] = reg
        return out

    return scan


@dataclass(frozen=True)
class PluginInfo:
    """A ``PluginInfo`` answer: type, name, endpoint (the service socket) and supported versions."""

    type: str
    name: str
    endpoint: str
    versions: tuple[str, ...]


def check_dra_plugin(info: PluginInfo) -> None:
    """Raise ValueError (the reason) unless ``info`` describes a DRA plugin: type ``DRAPlugin``, a name
    and an endpoint. Which of its ``versions`` to speak is the caller's choice."""
    if info.type != DRA_PLUGIN_TYPE:
        raise ValueError(f"plugin type {info.type!r} is not {DRA_PLUGIN_TYPE!r}")
    if not info.name:
        raise ValueError("plugin info has an empty name")
    if not info.endpoint:
        raise ValueError("plugin info has an empty endpoint")


async def get_info(
    socket: str, rpc_timeout: float, *, options: Sequence[tuple[str, Any]] | None = None
) -> PluginInfo:
    """``Registration/GetInfo`` on a registration socket; raises ``grpc.aio.AioRpcError``. An empty
    endpoint means the registration socket itself (the kubelet's rule: one socket may serve both)."""
    async with grpc.aio.insecure_channel(f"unix:{socket}", options=options) as channel:
        stub = reg_grpc.RegistrationStub(channel)
        info = await stub.GetInfo(reg_pb2.InfoRequest(), timeout=rpc_timeout)
    return PluginInfo(info.type, info.name, info.endpoint or socket, tuple(info.supported_versions))


async def notify_registration(socket: str, registered: bool, error: str, rpc_timeout: float) -> None:
    """``Registration/NotifyRegistrationStatus``: tell the plugin the outcome (the kubelet's call, the
    shim makes it; raises ``grpc.aio.AioRpcError``)."""
    async with grpc.aio.insecure_channel(f"unix:{socket}") as channel:
        await reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
            reg_pb2.RegistrationStatus(plugin_registered=registered, error=error), timeout=rpc_timeout
        )


class SocketHandler(Protocol):
    """What a service does with registration sockets; called by the watcher's reconcile workers."""

    async def sync_socket(self, node: str, path: str, stamp: Stamp | None) -> ReconcileResult:
        """Make the registration of ``path`` match the directory: ``stamp`` None means the socket is
        gone; a stamp other than the one registered means it was created again. Idempotent."""
        ...

    async def close(self) -> None:
        """Drop every registration (the service stops)."""
        ...


class PluginWatcher:
    """Polls registry directories and reconciles one key per socket (see the module docstring).

    ``dirs()`` returns the directory of every served node, called on every scan. :meth:`run` until
    cancelled; :meth:`sync` is one pass done inline (start-up, tests).
    """

    def __init__(
        self,
        dirs: Callable[[], Mapping[str, Path]],
        handler: SocketHandler,
        *,
        interval: float,
        name: str = "plugin-watcher",
        workers: int = 4,
        retry_base: float = 1.0,
        retry_max: float = 60.0,
        timeout: float | None = 60.0,
    ) -> None:
        self.handler = handler
        self.interval = interval
        self.queue = WorkQueue(name=name, base_delay=retry_base, max_delay=retry_max)
        self.runner = Runner(name, self.queue, self._reconcile, workers=workers, timeout=timeout)
        self.found: dict[SocketKey, Stamp] = {}
        self.nodes: set[str] = set()
        self._listings: dict[str, DirCache] = {}  # node -> its directories' listings (plugin_sockets)
        #: Set once the first pass (:meth:`sync`) has reconciled every socket it found.
        self.scanned = asyncio.Event()
        self._dirs = dirs
        self._workers = workers

    def scan(self) -> list[SocketKey]:
        """One look at every directory; queue (and return) the sockets that appeared, changed or went."""
        dirs = self._dirs()
        self.nodes = set(dirs)
        self._listings = {node: self._listings.get(node, {}) for node in dirs}
        found: dict[SocketKey, Stamp] = {}
        now_ns = time.time_ns()
        for node, directory in dirs.items():
            for path, stamp in plugin_sockets(directory, self._listings[node], now_ns).items():
                found[(node, path)] = stamp
        changed = [key for key in found.keys() | self.found.keys() if found.get(key) != self.found.get(key)]
        self.found = found
        for key in changed:
            self.queue.add(key)
        return changed

    async def _reconcile(self, key: SocketKey) -> ReconcileResult:
        node, path = key
        return await self.handler.sync_socket(node, path, self.found.get(key))

    async def sync(self) -> None:
        """Scan and reconcile every key that is ready now, ``workers`` at a time; return when none is left
        (keys waiting for a retry are left to :meth:`run`)."""
        self.scan()

        async def drain() -> None:
            while len(self.queue):
                try:
                    key = await self.queue.get()
                except QueueShutDown:
                    return
                try:
                    await self.runner.process(key)
                finally:
                    self.queue.done(key)

        await asyncio.gather(*(drain() for _ in range(self._workers)))
        self.scanned.set()

    async def run(self) -> None:
        """Scan every ``interval`` and reconcile what changed, until cancelled. The first pass is a
        :meth:`sync` (``scanned`` is set once its sockets are reconciled)."""
        runner: asyncio.Task[None] | None = None
        try:
            await self.sync()
            runner = asyncio.create_task(self.runner.run(), name=f"{self.queue.name}-runner")
            while True:
                await asyncio.sleep(self.interval)
                self.scan()
        finally:
            self.queue.shutdown()
            if runner is not None:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)

    async def close(self) -> None:
        """Stop reconciling and drop every registration (after :meth:`run` was cancelled)."""
        self.queue.shutdown()
        await self.handler.close()
