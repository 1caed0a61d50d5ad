"""What the benchmark scripts (``services/*/bench/*.py``) share: a cluster to run against, service
processes with a log file, and /proc readings of them. No numbers are judged here.

``async with cluster(kubeconfig) as path``: the given kubeconfig, or a fresh local environment
(:class:`~draflow_testenv.environment.Environment`, stopped at the end) and its admin kubeconfig.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

__all__ = ["cluster", "cpu_seconds", "load_note", "percentile", "rss_kib", "service_bin", "spawn", "stop"]


@contextlib.asynccontextmanager
async def cluster(kubeconfig: str | None) -> AsyncIterator[str]:
    """``kubeconfig`` when given, else a fresh local environment's admin kubeconfig while the block runs."""
    if kubeconfig:
        yield kubeconfig
        return
    from .environment import Environment

    async with Environment() as env:
        yield str(env.kubeconfig)


def service_bin(name: str) -> str:
    """The console script ``name`` (e.g. ``reference-driver``): on PATH, else beside this Python."""
    return shutil.which(name) or str(Path(sys.executable).parent / name)


async def spawn(argv: list[str], log: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    """Start ``argv`` in its own session, stdout and stderr appended to ``log``."""
    with open(log, "ab") as out:  # noqa: ASYNC230 (a log file, once per process)
        return await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True
        )


async def stop(proc: asyncio.subprocess.Process, timeout: float = 30.0) -> None:  # noqa: ASYNC109
    """SIGTERM, and SIGKILL after ``timeout`` seconds; returns once the process is reaped."""
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` now (VmRSS), KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))


def load_note(loads: list[float]) -> str:
    """A line saying the machine was loaded (1-minute load average above the core count), else ""."""
    cores = os.cpu_count() or 1
    if not loads or max(loads) <= cores:
        return ""
    return (
        f"**Loaded machine**: load average {min(loads):.1f} to {max(loads):.1f} on {cores} cores during the "
        "measurement (other jobs ran meanwhile): latencies are pessimistic and noisy; CPU times less so."
    )


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
