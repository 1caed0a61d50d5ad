"""Faults on the replicated controllers' hand-over: the claim-controller replica holding the most shards
SIGKILLed while pods are being made in its shards, and the leading structured-allocator SIGKILLed between
a claim's status write and its pod's binding. Each notes what it measured in the run's report
(``Ctx.note``): how long the takeover took after the kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, cast

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import PODS, RESOURCE_CLAIMS
from draflow_runtime.shards import shard_of
from draflow_testenv.wait import eventually

from .stack import SHARDED, SHARDS, retry

if TYPE_CHECKING:
    from .faults import Ctx

ALLOCATOR = "structured-allocator"
BURST = 4  # pods made in a killed replica's shards while nobody holds them
MID_WRITE_TRIES = 25  # claim writes the harness stops the allocator at, looking for one not yet bound


async def all_shards_held(ctx: Ctx) -> bool:
    """Every claim-controller shard's Lease is held by a running replica."""
    return all(h is not None for h in await ctx.stack.shard_holders(ctx.kube))


async def note_shards_held(ctx: Ctx, since: float, what: str) -> None:
    """Wait until every shard is held by a running replica again; note the time since ``since``."""
    await eventually(lambda: all_shards_held(ctx), 120, f"every {SHARDED} shard held again", interval=0.25)
    ctx.note(f"{what}: every shard held again {time.monotonic() - since:.1f}s after the kill")


async def shard_holder_killed(ctx: Ctx) -> None:
    """SIGKILL the claim-controller replica holding the most shards (of a tie, the one holding shard 0: it
    also evicts for device taints) and at once make pods whose keys fall in its shards. Wait until the
    others hold every shard (its Leases expire first) and until those pods have their claims; note both
    times, restart it and note when it holds shards again (they move back: rendezvous hashing)."""
    async def most() -> tuple[str, list[int]] | None:
        held = await ctx.stack.shards_of(ctx.kube)
        if sum(map(len, held.values())) < SHARDS:
            return None
        name = max(held, key=lambda n: (len(held[n]), 0 in held[n]))
        return name, held[name]

    victim, shards = await eventually(most, 90, f"every {SHARDED} shard held", interval=0.5)
    await ctx.stack.kill(victim)
    t0 = time.monotonic()
    churn = ctx.churn
    assert churn is not None
    ns = ctx.namespace
    pods = [await retry(lambda: churn.add_probe(lambda n: shard_of(f"{ns}/{n}", SHARDS) in shards))
            for _ in range(BURST)]
    made = time.monotonic() - t0
    await eventually(lambda: all_shards_held(ctx), 120, f"the other {SHARDED} replicas hold every shard",
                     interval=0.25)
    taken = time.monotonic() - t0

    async def claimed() -> bool:
        return all([await _has_claims(ctx, pod) for pod in pods])

    await eventually(claimed, 120, f"pods {pods} made in shards {shards} have their claims", interval=0.25)
    ctx.note(f"{victim} held shards {shards}: taken over {taken:.1f}s after the kill; {len(pods)} pods made "
             f"in them {made:.1f}s after it had their claims after {time.monotonic() - t0:.1f}s")
    for pod in pods:
        await retry(functools.partial(churn.remove_probe, pod))
    await ctx.stack.restart(victim)
    t1 = time.monotonic()

    async def back() -> list[int] | None:
        return (await ctx.stack.shards_of(ctx.kube)).get(victim) or None

    again = await eventually(back, 120, f"restarted {victim} holds a shard", interval=0.5)
    ctx.note(f"{victim} restarted: holds shards {again} {time.monotonic() - t1:.1f}s later")


async def _has_claims(ctx: Ctx, pod: str) -> bool:
    try:
        obj = await ctx.kube.get(PODS, pod, namespace=ctx.namespace)
    except NotFound:
        return True  # gone: nothing to wait for
    return all(s.get("resourceClaimName") for s in _statuses(obj)) and bool(_statuses(obj))


def _statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return (pod.get("status") or {}).get("resourceClaimStatuses") or []


async def allocator_killed_mid_write(ctx: Ctx) -> None:
    """SIGKILL the leading structured-allocator between a claim's write (allocation + ``reservedFor``) and
    its pod's binding. On a claim newly reserved for a pod (watch), the leader is stopped (SIGSTOP), and
    the claims and pods are read: when a claim is reserved for a pod that is not bound (its binding never
    sent), it is SIGKILLed, else continued and the hunt goes on (at most ``MID_WRITE_TRIES`` times; then
    it is SIGKILLed anyway, noted). The other replica must take over and bind those pods (or the pods go)."""
    leader = await eventually(lambda: ctx.stack.leader(ctx.kube, ALLOCATOR), 60, f"{ALLOCATOR} has a leader",
                              interval=0.5)
    proc = ctx.stack.procs[leader]
    caught: list[str] = []
    tries = 0
    claims = await ctx.kube.list(RESOURCE_CLAIMS, namespace=ctx.namespace)
    try:
        while tries < MID_WRITE_TRIES and not caught:
            await asyncio.wait_for(_newly_reserved(ctx, claims["metadata"]["resourceVersion"]), 60)
            tries += 1
            await proc.pause()
            await asyncio.sleep(0.2)  # a binding request already sent lands
            claims = await ctx.kube.list(RESOURCE_CLAIMS, namespace=ctx.namespace)
            pods = (await ctx.kube.list(PODS, namespace=ctx.namespace)).get("items") or []
            caught = reserved_unbound(claims.get("items") or [], pods)
            if not caught:
                proc.resume()
    except BaseException:
        proc.resume()
        raise
    await ctx.stack.kill(leader)
    t0 = time.monotonic()
    if not caught:
        ctx.note(f"{leader}: no claim write caught before its binding in {tries} tries; killed anyway")

    async def other() -> str | None:
        now = await ctx.stack.leader(ctx.kube, ALLOCATOR)
        return now if now and now != leader else None

    await eventually(other, 90, f"another {ALLOCATOR} replica leads", interval=0.5)
    led = time.monotonic() - t0
    await ctx.stack.restart(leader)

    async def bound() -> bool:
        return all([await _bound_or_gone(ctx, pod) for pod in caught])

    await eventually(bound, 120, f"pods {caught} reserved but not bound at the kill are bound", interval=0.5)
    if caught:
        ctx.note(f"{leader} killed (try {tries}) with {len(caught)} pod(s) reserved, not bound "
                 f"({', '.join(caught)}); the other replica led {led:.1f}s after the kill and bound them "
                 f"after {time.monotonic() - t0:.1f}s")


async def _newly_reserved(ctx: Ctx, resource_version: str) -> None:
    """Until a claim is written reserved for a pod (from ``resource_version`` on)."""
    while True:
        events = cast(AsyncGenerator[tuple[str, dict[str, Any]], None], ctx.kube.watch(
            RESOURCE_CLAIMS, namespace=ctx.namespace, resource_version=resource_version, timeout_seconds=30))
        async with contextlib.aclosing(events):  # the watch's connection is closed when we stop early
            async for etype, claim in events:
                if etype == "BOOKMARK":
                    resource_version = claim["metadata"]["resourceVersion"]
                    continue
                resource_version = claim["metadata"].get("resourceVersion", resource_version)
                status = claim.get("status") or {}
                if etype == "MODIFIED" and status.get("allocation") and any(
                        r.get("resource") == "pods" for r in status.get("reservedFor") or ()):
                    return


def reserved_unbound(claims: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[str]:
    """Pods (names) some claim is reserved for that are not bound and not being deleted: the allocator
    wrote the claim and has not bound the pod yet. Pure."""
    unbound = {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods
               if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")}
    out = {unbound[r["uid"]] for c in claims for r in (c.get("status") or {}).get("reservedFor") or ()
           if r.get("resource") == "pods" and r.get("uid") in unbound}
    return sorted(out)


async def _bound_or_gone(ctx: Ctx, pod: str) -> bool:
    try:
        obj = await ctx.kube.get(PODS, pod, namespace=ctx.namespace)
    except NotFound:
        return True
    return bool(obj["spec"].get("nodeName")) or bool(obj["metadata"].get("deletionTimestamp"))
