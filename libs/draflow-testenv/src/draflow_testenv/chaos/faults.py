"""The faults a chaos run injects. Each is ``async (Ctx) -> None``: it breaks something and puts it back
(restarts what it killed); the runner then measures how long the stack takes to serve a new pod again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from draflow_runtime.dra import claim_results
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient
from draflow_testenv.environment import Environment
from draflow_testenv.wait import eventually

from .stack import SHARDED, Stack

DRIVER = "gpu.draflow.example"


@dataclass
class Ctx:
    env: Environment
    stack: Stack
    kube: KubeClient
    namespace: str = "draflow-chaos"
    nats_outage: float = 30.0
    driver_gone_wait: float = 180.0  # upper bound for the slice-publisher's grace and its wipe


Fault = Callable[[Ctx], Awaitable[None]]


def kill_restart(*names: str) -> Fault:
    """SIGKILL the replicas ``names`` at once, then start them again."""
    async def fault(ctx: Ctx) -> None:
        await asyncio.gather(*(ctx.stack.kill(n) for n in names))
        for n in names:
            await ctx.stack.restart(n)
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

        await eventually(new_leader, 90, f"another {service} replica leads", interval=0.5)
        await ctx.stack.restart(leader)
    return fault


async def shard_holder_killed(ctx: Ctx) -> None:
    """SIGKILL the claim-controller replica holding shard 0 (``--shards``); wait until the other replica
    holds every shard (the dead one's Leases expire first; the time it took is printed); restart it."""
    async def holder() -> str | None:
        return (await ctx.stack.shard_holders(ctx.kube))[0]

    victim = await eventually(holder, 60, f"{SHARDED} shard 0 has a holder", interval=0.5)
    await ctx.stack.kill(victim)
    t0 = time.monotonic()

    async def taken_over() -> bool:
        holders = await ctx.stack.shard_holders(ctx.kube)
        return all(h is not None and h != victim for h in holders)

    await eventually(taken_over, 90, f"the other {SHARDED} replica holds every shard", interval=0.25)
    print(f"    shards taken over {time.monotonic() - t0:.1f}s after the kill", flush=True)
    await ctx.stack.restart(victim)


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
        ("failover structured-allocator", failover("structured-allocator")),
        ("kill claim-controller shard holder", shard_holder_killed),
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
        ("kill claim-controller (both)", kill_restart("claim-controller-a", "claim-controller-b")),
        ("kill structured-allocator (both)",
         kill_restart("structured-allocator-a", "structured-allocator-b")),
        ("kill reference-driver + kubelet-dra-shim", kill_restart("reference-driver", "kubelet-dra-shim")),
        ("kill claim-controller + structured-allocator",
         kill_restart("claim-controller-a", "claim-controller-b", "structured-allocator-a",
                      "structured-allocator-b")),
        ("kill claim-controller shard holder", shard_holder_killed),
        ("failover structured-allocator", failover("structured-allocator")),
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
        ("kill claim-controller shard holder (again)", shard_holder_killed),
        ("kill kubelet-dra-shim + slice-publisher", kill_restart("kubelet-dra-shim", "slice-publisher")),
        ("nats stopped (again)", nats_stopped),
        ("failover structured-allocator (again)", failover("structured-allocator")),
        ("driver gone > grace (again)", driver_gone),
    ]
