"""Supervision of the environment's server processes.

Each process runs in its own session (process group) with stdout and stderr appended to
``<logs>/<name>.log``, which is kept after shutdown. ``stop()`` sends SIGTERM to the group, then SIGKILL after
a grace period. Nothing leaks when the owner dies: every live process is registered for an ``atexit``
clean-up, and each is started under ``setpriv --pdeathsig KILL`` (where ``setpriv`` exists) so the kernel
kills it when its parent dies without running any Python (SIGKILL, a crash).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

_SETPRIV = shutil.which("setpriv")
_LIVE: dict[int, ManagedProcess] = {}


class NotReady(RuntimeError):
    """A process did not become ready in time (or exited); the message quotes its log tail."""

    def __init__(self, name: str, reason: str, log_path: Path) -> None:
        tail = log_tail(log_path)
        super().__init__(f"{name} {reason}; log {log_path}, last lines:\n{tail}")
        self.name = name
        self.log_path = log_path


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        data = path.read_bytes()[-16384:]
    except OSError:
        return "(no log)"
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


class ManagedProcess:
    """One supervised server process. Not restartable: :meth:`again` makes the next one."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, *,
        env: Mapping[str, str] | None = None, cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None

    def again(self) -> ManagedProcess:
        """A new, not yet started process with this one's command, log file, environment and directory."""
        return ManagedProcess(self.name, self.argv, self.log_path, env=self.env, cwd=self.cwd)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = self.argv
        if _SETPRIV:
            argv = [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        with self._open_log() as log:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )
        _LIVE[self._proc.pid] = self

    def _open_log(self) -> BinaryIO:
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed by the caller)
        log.write(f"=== {time.strftime('%H:%M:%S')} start: {' '.join(self.argv)}\n".encode())
        log.flush()
        return log

    async def wait_ready(
        self, check: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.1,  # noqa: ASYNC109
    ) -> None:
        """Poll ``check`` until it returns True; raise ``NotReady`` on timeout or if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise NotReady(self.name, f"exited with code {self.returncode} before it was ready",
                               self.log_path)
            with contextlib.suppress(Exception):
                if await check():
                    return
            if time.monotonic() > deadline:
                raise NotReady(self.name, f"not ready after {timeout:.0f}s", self.log_path)
            await asyncio.sleep(interval)

    async def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds. Idempotent."""
        proc = self._proc
        if proc is None:
            return None
        if proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            _signal_group(proc.pid, signal.SIGCONT)  # a paused process handles SIGTERM once continued
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                _signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
        _signal_group(proc.pid, signal.SIGKILL)  # stragglers left in the group
        _LIVE.pop(proc.pid, None)
        return proc.returncode

    async def pause(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109 - one deadline for the wait
        """SIGSTOP the process group: sockets stay open, nothing is answered (a stalled server). Returns
        once every thread of the process is stopped (a signal is delivered asynchronously: a busy thread
        may still answer a request sent right after the kill), so what a test does next meets a stalled
        server; raises AssertionError if it is not running or does not stop within ``timeout``."""
        proc = self._proc
        assert proc is not None and proc.returncode is None, f"{self.name} is not running"
        _signal_group(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not _all_threads_stopped(proc.pid):
            assert time.monotonic() < deadline, f"{self.name} (pid {proc.pid}) still running after SIGSTOP"
            await asyncio.sleep(0.01)

    def resume(self) -> None:
        """SIGCONT the process group after :meth:`pause`."""
        if self._proc is not None and self._proc.returncode is None:
            _signal_group(self._proc.pid, signal.SIGCONT)

    async def kill(self) -> int | None:
        """SIGKILL the process group at once (a crash, for tests): no SIGTERM first, so the process never
        starts a graceful shut-down (releasing a Lease, flushing spans) it would not get in a crash."""
        proc = self._proc
        if proc is None:
            return None
        _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        _LIVE.pop(proc.pid, None)
        return proc.returncode

    async def wait(self) -> int:
        assert self._proc is not None
        return await self._proc.wait()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _all_threads_stopped(pid: int) -> bool:
    """True once every thread of ``pid`` is in the stopped state ('T')."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, IndexError):
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state in ("T", "t") for state in states)


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def kill_groups(pids: list[int], grace: float = 5.0) -> None:
    """Synchronously SIGTERM the process groups led by ``pids``, then SIGKILL what is left after ``grace``."""
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        _signal_group(pid, signal.SIGKILL)


@atexit.register
def _kill_leftovers() -> None:
    pids = list(_LIVE)
    _LIVE.clear()
    if pids:
        kill_groups(pids, grace=3.0)
