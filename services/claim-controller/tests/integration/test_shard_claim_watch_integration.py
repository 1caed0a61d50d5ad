"""With ``--shards`` a replica watches only the generated claims of the shards it holds (label selector),
and every claim without a shard label (user claims here). A shard moving to another replica loses
nothing: the new holder lists the shard's claims when it wins it, the old one stops watching them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cc_kit import Kit, eventually, plain_claim, pod, template

from claim_controller.claimcache import ShardedClaims
from claim_controller.controller import Controller
from claim_controller.naming import SHARD_LABEL
from claim_controller.sharding import pod_shard_key
from draflow_runtime.kube import PODS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from draflow_runtime.shards import shard_of

pytestmark = pytest.mark.integration

SHARDS = 4


def shard(kit: Kit, pod_name: str) -> int:
    return shard_of(pod_shard_key(kit.namespace, pod_name), SHARDS)


def cached_names(controller: Controller) -> set[str]:
    return {c["metadata"]["name"] for c in controller.claims.list()}


async def recorded(kit: Kit, name: str) -> str | None:
    statuses = ((await kit.get(PODS, name)) or {}).get("status", {}).get("resourceClaimStatuses") or []
    return statuses[0].get("resourceClaimName") if statuses else None


async def test_a_replica_caches_only_its_shards_generated_claims_and_a_moved_shard_loses_nothing(
    kit: Kit,
) -> None:
    await kit.create(RESOURCE_CLAIM_TEMPLATES, template("t"))
    await kit.create(RESOURCE_CLAIMS, plain_claim("shared"))
    # no device-taint eviction: its holder (shard 0) watches every claim
    a = await kit.start_controller(shards=SHARDS, device_taint_eviction=False)
    b = await kit.start_controller(shards=SHARDS, device_taint_eviction=False)
    assert isinstance(a.claims, ShardedClaims) and isinstance(b.claims, ShardedClaims)
    for s in (0, 1):
        await a.shard_acquired(s)
    for s in (2, 3):
        await b.shard_acquired(s)

    names = [f"p-{i:02d}" for i in range(16)]
    for name in names:
        await kit.create(PODS, pod(name, {"gpu": {"resourceClaimTemplateName": "t"},
                                          "user": {"resourceClaimName": "shared"}}))
    generated: dict[str, str] = {}
    for name in names:
        generated[name] = await eventually(lambda n=name: recorded(kit, n), what=f"claim of {name}")
    claims = {c["metadata"]["name"]: c for c in await kit.claims()}
    for name, claim_name in generated.items():
        assert claims[claim_name]["metadata"]["labels"][SHARD_LABEL] == f"{shard(kit, name)}-of-{SHARDS}"
    assert "labels" not in claims["shared"]["metadata"] or \
        SHARD_LABEL not in claims["shared"]["metadata"]["labels"]

    def of(shards: set[int]) -> set[str]:
        return {generated[n] for n in names if shard(kit, n) in shards}
    await eventually(lambda: cached_names(a) == of({0, 1}) | {"shared"}, what="A caches shards 0, 1")
    await eventually(lambda: cached_names(b) == of({2, 3}) | {"shared"}, what="B caches shards 2, 3")

    # shard 2 moves from B to A; a pod of shard 2 created while nobody holds it
    await b.shard_lost(2)
    assert 2 not in b.claims.parts
    assert cached_names(b) == of({3}) | {"shared"}
    late = next(n for n in (f"late-{i}" for i in range(100)) if shard(kit, n) == 2)
    await kit.create(PODS, pod(late, {"gpu": {"resourceClaimTemplateName": "t"}}))
    await a.shard_acquired(2)
    generated[late] = await eventually(lambda: recorded(kit, late), what="the new holder serves the late pod")
    names.append(late)
    await eventually(lambda: cached_names(a) == of({0, 1, 2}) | {"shared"}, what="A caches shard 2 now")
    owned: dict[str, Any] = {}
    for c in await kit.claims():
        for ref in c["metadata"].get("ownerReferences") or ():
            owned.setdefault(ref["name"], []).append(c["metadata"]["name"])
    assert {n: len(owned[n]) for n in names} == dict.fromkeys(names, 1)


async def test_two_shards_given_up_at_once_stop_every_claim_watch(kit: Kit) -> None:
    """The holder of shard 0 (device-taint eviction on) watches every shard's claims; shard 2 given up
    while giving up shard 0 is still stopping those watches stops every watch, each once (a KeyError
    before: both calls dropped the same watch)."""
    controller = await kit.start_controller(shards=SHARDS)
    claims = controller.claims
    assert isinstance(claims, ShardedClaims)
    await controller.shard_acquired(0)
    await controller.shard_acquired(2)
    assert set(claims.parts) == set(range(SHARDS))
    losing_0 = asyncio.create_task(controller.shard_lost(0))
    await eventually(lambda: len(claims.parts) < SHARDS or losing_0.done(), interval=0,
                     what="the first watch is being stopped")
    assert 0 < len(claims.parts) < SHARDS
    await controller.shard_lost(2)
    await losing_0
    assert claims.parts == {} and controller.held == set()
