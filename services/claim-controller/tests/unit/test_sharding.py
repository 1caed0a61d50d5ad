"""A pod and the claims it owns share one shard; giving up a shard stops its reconciles first."""

from __future__ import annotations

import asyncio
from typing import Any

from claim_controller.sharding import InFlight, claim_shard_key, pod_shard_key


def claim(name: str, owner: str | None = None) -> dict[str, Any]:
    ref = {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": "u-1", "controller": True}
    refs = [ref] if owner else []
    return {"metadata": {"name": name, "namespace": "ns", "ownerReferences": refs}}


def test_a_generated_claim_is_in_the_shard_of_its_pod() -> None:
    generated = claim("app-gpu-x7k2p", owner="app")
    assert claim_shard_key("ns", "app-gpu-x7k2p", generated) == pod_shard_key("ns", "app")


def test_a_claim_without_an_owner_pod_is_in_its_own_shard() -> None:
    assert claim_shard_key("ns", "shared", claim("shared")) == "ns/shared"
    assert claim_shard_key("ns", "gone", None) == "ns/gone"  # neither in the cache nor a tombstone


def test_a_podgroups_claim_is_in_the_shard_of_its_podgroup() -> None:
    owned = {"metadata": {"name": "workers-gpu-x7k2p", "namespace": "ns", "ownerReferences": [
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "workers", "uid": "g-1",
         "controller": True}]}}
    assert claim_shard_key("ns", "workers-gpu-x7k2p", owned) == "ns/workers"  # key podgroup:ns/workers


async def test_cancelling_a_shard_ends_its_reconciles_and_leaves_the_others_alone() -> None:
    in_flight = InFlight()
    started = {0: asyncio.Event(), 1: asyncio.Event()}
    ended: list[int] = []

    async def reconcile(shard: int) -> str:
        started[shard].set()
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(shard)
        return "done"

    lost = asyncio.create_task(in_flight.run(0, lambda: reconcile(0)))
    kept = asyncio.create_task(in_flight.run(1, lambda: reconcile(1)))
    await started[0].wait()
    await started[1].wait()

    await in_flight.cancel(0)

    assert ended == [0]  # cancel() returned only after the reconcile of shard 0 had ended
    assert await lost is None  # the worker sees "nothing to do": the new holder reconciles again
    assert not kept.done()
    kept.cancel()


async def test_a_reconcile_result_passes_through() -> None:
    async def reconcile() -> str:
        return "done"

    assert await InFlight().run(3, reconcile) == "done"
