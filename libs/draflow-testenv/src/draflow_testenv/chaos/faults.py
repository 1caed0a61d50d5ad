"""The faults a chaos run injects. Each is ``async (Ctx) -> None``: it breaks something and puts it back
(restarts what it killed); the runner then measures how long the stack takes to serve a new pod again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from draflow_runtime.dra import claim_results
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient
from draflow_testenv.environment import Environment
from draflow_testenv.wait import eventually

from .churn import Churn
from .stack import SHARDED, Stack
from .takeover import allocator_killed_mid_write, note_shards_held, shard_holder_killed

DRIVER = "gpu.draflow.example"


@dataclass
class Ctx:
    env: Environment
    stack: Stack
    kube: KubeClient
    namespace: str = "draflow-chaos"
    nats_outage: float = 30.0
    driver_gone_wait: float = 180.0  # upper bound for the slice-publisher's grace and its wipe
    churn: Churn | None = None
    notes: list[str] = field(default_factory=list)  # what the fault measured, for the report (its row)

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        print(f"    {msg}", flush=True)


Fault = Callable[[Ctx], Awaitable[None]]


def kill_restart(*names: str) -> Fault:
    """SIGKILL the replicas ``names`` at once, then start them again. When claim-controller replicas were
    among them: wait until every shard is held again (their Leases expire first) and note the time."""
    async def fault(ctx: Ctx) -> None:
        await asyncio.gather(*(ctx.stack.kill(n) for n in names))
        t0 = time.monotonic()
        for n in names:
            await ctx.stack.restart(n)
        sharded = [n for n in names if n.startswith(SHARDED + "-")]
        if sharded:
            await note_shards_held(ctx, t0, " + ".join(sharded))
    return fault


def failover(service: str) -> Fault:
    """SIGKILL the replica of ``service`` holding the Lease; wait until the other one leads; restart it."""
    async def fault(ctx: Ctx) -> None:
        leader = await eventually(lambda: ctx.stack.leader(ctx.kube, service), 60, f"{service} has a leader",
                                  interval=0.5)
        await ctx.stack.kill(leader)

        async def new_leader() -> str | None:
            now = await ctx.stack.leader(ctx.kube, service)
            return now if now and now != leader else None

        t0 = time.monotonic()
        await eventually(new_leader, 90, f"another {service} replica leads", interval=0.5)
        ctx.note(f"another {service} replica led {time.monotonic() - t0:.1f}s after the kill")
        await ctx.stack.restart(leader)
    return fault


async def device_tainted(ctx: Ctx) -> None:
    """A DeviceTaintRule with a ``NoExecute`` taint on one whole GPU a pod uses: the claim-controller evicts
    the pods using it and their claim lets go of it; then the rule is deleted."""
    async def victim() -> dict[str, str] | None:
        pods = (await ctx.kube.list(PODS, namespace=ctx.namespace)).get("items") or []
        running = {p["metadata"]["uid"] for p in pods if (p.get("status") or {}).get("phase") == "Running"}
        for claim in (await ctx.kube.list(RESOURCE_CLAIMS, namespace=ctx.namespace)).get("items") or []:
            reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or ()}
            for res in claim_results(claim):  # a pod's whole GPU (a PodGroup's claim is the group's)
                if "-part-" not in res["device"] and reserved and reserved <= running:
                    return {k: res[k] for k in ("driver", "pool", "device")}
        return None

    device = await eventually(victim, 60, "a whole GPU used by running pods", interval=1)
    name = f"chaos-taint-{int(time.monotonic())}"
    await ctx.kube.create(DEVICE_TAINT_RULES, {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
        "spec": {"deviceSelector": device, "taint": {"key": "draflow.dev/chaos", "effect": "NoExecute"}}})

    async def freed() -> bool:
        claims = (await ctx.kube.list(RESOURCE_CLAIMS, namespace=ctx.namespace)).get("items") or []
        return not any({k: r[k] for k in device} == device for c in claims for r in claim_results(c))

    try:
        await eventually(freed, 90, f"the pods on tainted {'/'.join(device.values())} evicted, claim freed",
                         interval=0.5)
    finally:
        with contextlib.suppress(NotFound):
            await ctx.kube.delete(DEVICE_TAINT_RULES, name)


async def nats_stopped(ctx: Ctx) -> None:
    await ctx.env.stop_nats()
    await asyncio.sleep(ctx.nats_outage)
    await ctx.env.start_nats()


async def apiserver_restart(ctx: Ctx) -> None:
    """SIGKILL kube-apiserver and start it again 2 s later with the same command (same port, same etcd)."""
    await ctx.env.crash_apiserver(downtime=2)


async def etcd_compaction(ctx: Ctx) -> None:
    """Compact etcd at its head: watches resuming at an older resourceVersion get 410 Gone."""
    await ctx.env.compact_etcd()


async def driver_gone(ctx: Ctx) -> None:
    """Kill reference-driver and keep it down until slice-publisher wiped its slices (longer than the
    grace), while pods use its devices; then start it again and wait until the slices are back."""
    async def slices() -> int:
        items = (await ctx.kube.list(RESOURCE_SLICES)).get("items") or []
        return sum(1 for s in items if s["spec"].get("driver") == DRIVER)

    await ctx.stack.kill("reference-driver")
    t0 = time.monotonic()
    await eventually(lambda: _zero(slices), ctx.driver_gone_wait, "the gone driver's slices are deleted",
                     interval=0.5)
    print(f"    slices wiped {time.monotonic() - t0:.0f}s after the driver died", flush=True)
    await ctx.stack.restart("reference-driver")
    await eventually(slices, 120, "the driver's slices are back", interval=0.5)


async def _zero(count: Callable[[], Awaitable[int]]) -> bool:
    return await count() == 0


def catalogue(short: bool) -> list[tuple[str, Fault]]:
    """The faults of a run, in order. ``short``: one of each kind that fits in ~3 minutes."""
    one = [
        ("kill kubelet-dra-shim", kill_restart("kubelet-dra-shim")),
        ("kill reference-driver + slice-publisher", kill_restart("reference-driver", "slice-publisher")),
        ("kill structured-allocator mid-write", allocator_killed_mid_write),
        ("kill claim-controller with most shards", shard_holder_killed),
        ("nats stopped", nats_stopped),
        ("kill kube-apiserver", apiserver_restart),
        ("etcd compaction", etcd_compaction),
        ("device taint NoExecute", device_tainted),
        ("driver gone > grace", driver_gone),
    ]
    if short:
        return one
    return [
        ("kill reference-driver", kill_restart("reference-driver")),
        ("kill kubelet-dra-shim", kill_restart("kubelet-dra-shim")),
        ("kill slice-publisher", kill_restart("slice-publisher")),
        ("kill claim-controller (all)",
         kill_restart("claim-controller-a", "claim-controller-b", "claim-controller-c")),
        ("kill structured-allocator (both)",
         kill_restart("structured-allocator-a", "structured-allocator-b")),
        ("kill reference-driver + kubelet-dra-shim", kill_restart("reference-driver", "kubelet-dra-shim")),
        ("kill claim-controller + structured-allocator",
         kill_restart("claim-controller-a", "claim-controller-b", "claim-controller-c",
                      "structured-allocator-a", "structured-allocator-b")),
        ("kill claim-controller with most shards", shard_holder_killed),
        ("failover structured-allocator", failover("structured-allocator")),
        ("kill structured-allocator mid-write", allocator_killed_mid_write),
        ("nats stopped", nats_stopped),
        ("kill kube-apiserver", apiserver_restart),
        ("etcd compaction", etcd_compaction),
        ("device taint NoExecute", device_tainted),
        ("driver gone > grace", driver_gone),
        ("kill slice-publisher + structured-allocator",
         kill_restart("slice-publisher", "structured-allocator-a", "structured-allocator-b")),
        # a second round: single replicas (leader or standby, whichever the name is), the faults again
        # under the state the first round left behind
        ("kill claim-controller-a", kill_restart("claim-controller-a")),
        ("kill structured-allocator-b", kill_restart("structured-allocator-b")),
        ("kill claim-controller with most shards (again)", shard_holder_killed),
        ("kill kubelet-dra-shim + slice-publisher", kill_restart("kubelet-dra-shim", "slice-publisher")),
        ("nats stopped (again)", nats_stopped),
        ("failover structured-allocator (again)", failover("structured-allocator")),
        ("kill structured-allocator mid-write (again)", allocator_killed_mid_write),
        ("driver gone > grace (again)", driver_gone),
    ]
