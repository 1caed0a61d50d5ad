"""The stack a chaos run works on: the five services as ``make up`` starts them (``flow.service_commands``),
structured-allocator twice with ``--leader-elect``, claim-controller three times with ``--shards 4`` (each
replica holds the Leases of some shards: 2, 1 and 1), and what the harness needs to kill, restart and
watch them, plus :func:`snapshot` (the objects and node files the invariants look at)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from draflow_runtime.errors import AlreadyExists, NotFound
from draflow_runtime.journal import read_records
from draflow_runtime.kube import (
    LEASES,
    NAMESPACES,
    POD_GROUPS,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.environment import Environment
from draflow_testenv.flow import service_commands
from draflow_testenv.process import ManagedProcess
from draflow_testenv.servers import free_port

from .invariants import NodeFiles, Snapshot

LEADER_ELECTED = ("structured-allocator",)
SHARDED = "claim-controller"
SHARDS = 4
REPLICAS = {SHARDED: ("a", "b", "c")}  # the others: ("a", "b")
REPLICATED = (*LEADER_ELECTED, SHARDED)
LEASE_NAMESPACE = "draflow-system"
T = TypeVar("T")


@dataclass
class Stack:
    env: Environment
    fleet: Path | None = None
    nodes: list[str] = field(default_factory=list)
    procs: dict[str, ManagedProcess] = field(default_factory=dict)  # replica name -> process
    killed: set[int] = field(default_factory=set)  # pids the harness killed on purpose
    unplanned: list[str] = field(default_factory=list)

    async def start(self, nodes: int, gpus: int) -> None:
        commands = service_commands(self.env, nodes, gpus, free_port())
        for name, argv in commands:
            if name in REPLICATED:
                mode = ["--leader-elect"] if name in LEADER_ELECTED else ["--shards", str(SHARDS)]
                for replica in REPLICAS.get(name, ("a", "b")):
                    self.procs[f"{name}-{replica}"] = await self.env.run_service(
                        [*_no_port(argv), "--http-port", "0", *mode], name=f"{name}-{replica}")
            else:
                self.procs[name] = await self.env.run_service(argv, name=name)
        fleet_arg = commands[0][1].index("--fleet-root") + 1
        self.fleet = Path(commands[0][1][fleet_arg])

    def replicas(self, service: str) -> list[str]:
        return [n for n in self.procs if n == service or n.startswith(service + "-")]

    async def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.pid is not None:
            self.killed.add(proc.pid)
        await proc.kill()

    async def restart(self, name: str) -> None:
        """Start the replica ``name`` again with the same command, log file and environment."""
        old = self.procs[name]
        if old.running:
            await self.kill(name)
        self.procs[name] = await self.env.restart_service(old)

    def check_alive(self) -> list[str]:
        """Replicas that exited without the harness killing them (each reported once)."""
        found = []
        for name, proc in self.procs.items():
            if not proc.running and proc.pid not in self.killed:
                self.killed.add(proc.pid or -1)
                found.append(f"{name} exited with {proc.returncode} unplanned (log {proc.log_path})")
        self.unplanned += found
        return found

    async def leader(self, kube: KubeClient, service: str) -> str | None:
        """The replica of ``service`` that holds its Lease now, or None."""
        return await self.holder(kube, service, service)

    async def shard_holders(self, kube: KubeClient) -> list[str | None]:
        """Per shard of the claim-controller, the replica holding its Lease now (None: nobody alive)."""
        return [await self.holder(kube, SHARDED, f"{SHARDED}-shard-{i}") for i in range(SHARDS)]

    async def shards_of(self, kube: KubeClient) -> dict[str, list[int]]:
        """Running claim-controller replica -> the shards whose Lease it holds now (every replica listed)."""
        held: dict[str, list[int]] = {name: [] for name in self.replicas(SHARDED) if self.procs[name].running}
        for shard, name in enumerate(await self.shard_holders(kube)):
            if name is not None:
                held[name].append(shard)
        return held

    async def holder(self, kube: KubeClient, service: str, lease_name: str) -> str | None:
        """The running replica of ``service`` whose identity (``<host>_<pid>``) holds ``lease_name``."""
        try:
            lease = await kube.get(LEASES, lease_name, namespace=LEASE_NAMESPACE)
        except NotFound:
            return None
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        for name in self.replicas(service):
            pid = self.procs[name].pid
            if pid is not None and self.procs[name].running and holder.endswith(f"_{pid}"):
                return name
        return None


def _no_port(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--http-port":
            skip = True
        else:
            out.append(arg)
    return out


async def ensure_namespace(kube: KubeClient, name: str) -> None:
    with contextlib.suppress(AlreadyExists):
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def read_node_files(node_dir: Path) -> NodeFiles:
    """Claim UIDs of ``<fleet>/<node>/cdi/*_<uid>.json`` and of the reference driver's checkpoint:
    ``<fleet>/<node>/state/checkpoint.json`` (the snapshot, with its ``journalEpoch`` E), then the
    records of epoch E in ``checkpoint.journal.<E % 2>`` and of E + 1 in the other journal file."""
    files = NodeFiles()
    cdi = node_dir / "cdi"
    if cdi.is_dir():
        files.cdi = {p.stem.rsplit("_", 1)[-1] for p in cdi.glob("*.json")}
    state = node_dir / "state"
    try:
        payload = json.loads(json.loads((state / "checkpoint.json").read_text())["data"])
    except FileNotFoundError:
        payload = {}
    files.checkpoint = set(payload.get("preparedClaims") or {})
    epoch = int(payload.get("journalEpoch") or 0)
    for e in (epoch, epoch + 1):
        for raw in read_records(state / f"checkpoint.journal.{e % 2}", e).records:
            record = json.loads(raw)
            if record["op"] == "prepare":
                files.checkpoint.add(record["uid"])
            else:
                files.checkpoint.discard(record["uid"])
    return files


async def snapshot(kube: KubeClient, namespace: str, fleet: Path | None, nodes: list[str],
                   extended_names: frozenset[str] = frozenset()) -> Snapshot:
    """Pods first, then PodGroups, claims and slices (a pod seen bound had its claims reserved before; a
    claim seen reserved for a PodGroup had it before)."""
    pods: list[Any] = (await kube.list(PODS, namespace=namespace)).get("items") or []
    groups: list[Any] = (await kube.list(POD_GROUPS, namespace=namespace)).get("items") or []
    claims: list[Any] = (await kube.list(RESOURCE_CLAIMS, namespace=namespace)).get("items") or []
    slices: list[Any] = (await kube.list(RESOURCE_SLICES)).get("items") or []
    files = {n: read_node_files(fleet / n) for n in nodes} if fleet is not None else {}
    return Snapshot(pods, claims, slices, files, pod_groups=groups, extended_names=extended_names)


async def retry(call: Callable[[], Awaitable[T]], attempts: int = 60) -> T:
    """``call()`` until it does not raise (the API server may be coming back): ``attempts`` calls at most
    (at least one), a second apart; the last one's error goes up."""
    for _ in range(attempts - 1):
        try:
            return await call()
        except Exception:
            await asyncio.sleep(1)
    return await call()
