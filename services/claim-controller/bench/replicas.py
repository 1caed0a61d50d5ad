"""``churn.py --replicas N``: the controller as N real ``claim-controller`` processes sharing the work
(``--shards``), instead of in the benchmark's own process.

Each replica gets the benchmark's kubeconfig, its own identity and HTTP port (its /metrics says how many
claims it created and how many reconciles it ran), NATS off and the log level ``warning`` as the in-process
controller. Their CPU time is read from ``/proc/<pid>/stat`` (Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import LEASES, KubeClient

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replicas:
    """``count`` claim-controller processes with ``--shards shards`` in ``namespace``."""

    def __init__(self, kubeconfig: str, namespace: str, count: int, shards: int, workers: int,
                 log_dir: Path) -> None:
        self.kubeconfig, self.namespace, self.count, self.shards = kubeconfig, namespace, count, shards
        self.workers = workers
        self.log_dir = log_dir
        self.ports = [_free_port() for _ in range(count)]
        self.procs: list[asyncio.subprocess.Process] = []
        self._cpu_at_start: list[float] = []

    async def start(self, kube: KubeClient, within: float = 120.0) -> None:
        """Start the processes; return once each is ready and each holds at least one shard."""
        exe = str(Path(sys.executable).parent / "claim-controller")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for i, port in enumerate(self.ports):
            argv = [exe, "--shards", str(self.shards), "--leader-election-namespace", self.namespace,
                    "--namespace", self.namespace, "--identity", f"bench-replica-{i}",
                    "--http-port", str(port), "--http-host", "127.0.0.1", "--nats-url", "",
                    "--workers", str(self.workers), "--log-level", "warning",
                    "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1"]
            log = (self.log_dir / f"replica-{i}.log").open("wb")
            self.procs.append(await asyncio.create_subprocess_exec(
                *argv, stdout=log, stderr=log, env={**os.environ, "KUBECONFIG": self.kubeconfig}))
        deadline = time.monotonic() + within
        while set(await self.holders(kube)) != {f"bench-replica-{i}" for i in range(self.count)}:
            if time.monotonic() > deadline or any(p.returncode is not None for p in self.procs):
                raise TimeoutError(f"replicas did not split the shards; logs in {self.log_dir}")
            await asyncio.sleep(0.5)
        self._cpu_at_start = [_cpu(proc.pid) for proc in self.procs]

    async def holders(self, kube: KubeClient) -> list[str]:
        out = []
        for shard in range(self.shards):
            with contextlib.suppress(NotFound):
                lease = await kube.get(LEASES, f"claim-controller-shard-{shard}", self.namespace)
                out.append((lease.get("spec") or {}).get("holderIdentity") or "")
        return out

    def cpu_per_replica(self) -> list[float]:
        """CPU seconds of each replica since the shards were split (the run itself)."""
        return [_cpu(proc.pid) - start for proc, start in zip(self.procs, self._cpu_at_start, strict=True)]

    def cpu_used(self) -> float:
        """CPU seconds of all replicas since the shards were split."""
        return sum(self.cpu_per_replica())

    async def samples(self) -> list[dict[str, float]]:
        """Per replica: claims created, reconciles and their summed duration (its /metrics)."""
        out = []
        cpu = self.cpu_per_replica()
        async with aiohttp.ClientSession() as http:
            for port, used in zip(self.ports, cpu, strict=True):
                async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                    text = await resp.text()
                values: dict[str, float] = {"cpu": used}
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name == "draflow_claim_controller_claims_created_total":
                            values["claims_created"] = sample.value
                        elif sample.labels.get("name") == "claim-controller" and \
                                sample.name.startswith("draflow_reconcile_duration_seconds_"):
                            values[sample.name.rpartition("_")[2]] = sample.value
                out.append(values)
        return out

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in self.procs:
            try:
                async with asyncio.timeout(20):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def summary(samples: list[dict[str, Any]]) -> str:
    return ", ".join(f"replica {i}: {int(s.get('claims_created', 0))} claims, {int(s.get('count', 0))} "
                     f"reconciles, {s.get('cpu', 0.0):.1f} s CPU" for i, s in enumerate(samples))
