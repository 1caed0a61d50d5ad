"""What a stack makes kube-apiserver do: ``side_by_side.py --apiserver-profile DIR``.

draflow-testenv starts kube-apiserver with ``--profiling=false``; with this option it gets
``--profiling=true`` (the last flag wins) and, while the measured phase runs, CPU profiles of
``CHUNK`` seconds are fetched one after the other from ``/debug/pprof/profile`` with the admin client
certificate, saved as ``<workload>-<stack>-NN.pprof``. The chunk still running when the phase ends is
dropped (the API server stops profiling when its client goes away), so what follows the phase (the
correctness check's lists) is never in the profile. Then, next to the chunks:

- ``<workload>-<stack>-top.txt``: ``go tool pprof -top`` over all chunks (pprof merges profiles of one
  binary; Go profiles carry their symbols), by flat and by cumulative time, when ``go`` is on ``PATH``;
- ``<workload>-<stack>-requests.txt``: every request the API server counted in the phase
  (``apiserver_request_total``, reads and watches included, the benchmark's own too) and per placed pod,
  then the growth of the counters in ``COUNTERS`` (watch events sent and their bytes by kind, requests
  per authenticated user, client certificates verified), per placed pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
from collections import Counter
from pathlib import Path

import aiohttp

from draflow_testenv.admin import ssl_context
from draflow_testenv.environment import Environment

APISERVER_ARGS = ("--profiling=true",)
CHUNK = 5  # seconds per profile: at most this much of the phase's end is lost
COUNTERS = ("apiserver_watch_events_total", "apiserver_watch_events_sizes_sum",
            "apiserver_authenticated_user_requests", "apiserver_client_certificate_expiration_seconds_count")


def counters(text: str, names: tuple[str, ...] = COUNTERS) -> dict[str, float]:
    """The samples of the counters ``names`` in a Prometheus text page: full series (name and labels)
    to value."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(names):
            series, _, value = line.rpartition(" ")
            if series.split("{", 1)[0] in names:
                out[series] = float(value)
    return out


def counters_report(before: dict[str, float], after: dict[str, float], pods: int) -> list[str]:
    """Series that grew, in name order: ``series  growth  per-pod``."""
    lines = []
    for series in sorted(after):
        grown = after[series] - before.get(series, 0.0)
        if grown > 0:
            lines.append(f"{series}  {grown:.0f}  {f'{grown / pods:.2f}' if pods else '-'}")
    return lines


def requests_report(before: Counter[tuple[str, str, str]], after: Counter[tuple[str, str, str]],
                    pods: int) -> list[str]:
    """One line per (verb, resource, subresource) that grew between the snapshots, most first:
    ``VERB resource[/subresource]  count  per-pod``; a total line last."""
    grown = {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) > 0}
    lines = []
    for (verb, resource, sub), n in sorted(grown.items(), key=lambda kv: (-kv[1], kv[0])):
        name = "/".join(part for part in (resource, sub) if part) or "(none)"
        per_pod = f"{n / pods:.2f}" if pods else "-"
        lines.append(f"{verb:<16} {name:<36} {n:>7} {per_pod:>7}")
    total = sum(grown.values())
    lines.append(f"{'total':<16} {'':<36} {total:>7} {f'{total / pods:.2f}' if pods else '-':>7}")
    return lines


class Profiler:
    """Consecutive CPU profiles of the environment's kube-apiserver between ``start()`` and ``stop()``."""

    def __init__(self, env: Environment, out: Path, label: str) -> None:
        pki = env.state_dir / "pki"
        self._url = env.apiserver_url + f"/debug/pprof/profile?seconds={CHUNK}"
        self._metrics_url = env.apiserver_url + "/metrics"
        self._counters: dict[str, float] = {}
        self._ctx: ssl.SSLContext = ssl_context(pki / "ca.crt", pki / "admin.crt", pki / "admin.key")
        self._out = out
        self._label = label
        self._task: asyncio.Task[None] | None = None
        self.chunks: list[Path] = []

    async def start(self) -> None:
        self._out.mkdir(parents=True, exist_ok=True)
        self._counters = await self._read_counters()
        self._task = asyncio.create_task(self._run(), name="apiserver-profile")

    async def _read_counters(self) -> dict[str, float]:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ctx)) as http, \
                http.get(self._metrics_url) as resp:
            resp.raise_for_status()
            return counters(await resp.text())

    async def _run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=CHUNK + 60)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ctx)) as http:
            while True:
                async with http.get(self._url, timeout=timeout) as resp:
                    resp.raise_for_status()
                    data = await resp.read()
                path = self._out / f"{self._label}-{len(self.chunks):02d}.pprof"
                path.write_bytes(data)
                self.chunks.append(path)

    async def stop(self, before: Counter[tuple[str, str, str]], after: Counter[tuple[str, str, str]],
                   pods: int) -> None:
        """Drop the running chunk; write the request counts and (with ``go``) the merged top."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        lines = requests_report(before, after, pods)
        lines += ["", "counters: growth in the measured phase, per placed pod"]
        lines += counters_report(self._counters, await self._read_counters(), pods)
        (self._out / f"{self._label}-requests.txt").write_text(
            f"requests in the measured phase, {pods} pods placed\n" + "\n".join(lines) + "\n")
        go = shutil.which("go")
        if go is None or not self.chunks:
            return
        parts = []
        for order in ([], ["-cum"]):
            proc = await asyncio.create_subprocess_exec(
                go, "tool", "pprof", "-top", *order, "-nodecount=60", *map(str, self.chunks),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
            text, _ = await proc.communicate()
            parts.append(text.decode(errors="replace"))
        (self._out / f"{self._label}-top.txt").write_text("\n".join(parts))
