"""A pod and the claims it owns share one shard (and its label); giving up a shard stops its reconciles
first."""

from __future__ import annotations

import asyncio
from typing import Any

from claim_controller.naming import SHARD_LABEL, claim_body
from claim_controller.sharding import (
    InFlight,
    claim_shard,
    claim_shard_key,
    labelled_shard,
    pod_shard_key,
    shard_labels,
    shard_of,
    shard_selector,
    unlabelled_selector,
)


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


def labelled(name: str, value: str | None, owner: str | None = None) -> dict[str, Any]:
    obj = claim(name, owner)
    if value is not None:
        obj["metadata"]["labels"] = {SHARD_LABEL: value}
    return obj


def test_a_generated_claim_is_labelled_with_its_pods_shard_of_this_shard_count() -> None:
    pod_shard = shard_of(pod_shard_key("ns", "app"), 4)
    assert shard_labels("ns", "app", 4) == {SHARD_LABEL: f"{pod_shard}-of-4"}
    assert shard_labels("ns", "app", 1) == {}  # one shard: nothing to filter, claims stay as upstream's
    generated = labelled("app-gpu-x7k2p", f"{pod_shard}-of-4", owner="app")
    assert labelled_shard(generated, 4) == pod_shard == claim_shard("ns", "app-gpu-x7k2p", generated, 4)


def test_a_label_of_another_shard_count_or_malformed_counts_as_none() -> None:
    for value in ("1-of-2", "4-of-4", "01-of-4", "x-of-4", "1-of-", "-of-4", "1", ""):
        assert labelled_shard(labelled("c", value), 4) is None, value
    assert labelled_shard(labelled("c", None), 4) is None
    # then the owner decides, as without labels
    stale = labelled("app-gpu-x7k2p", "1-of-2", owner="app")
    assert claim_shard("ns", "app-gpu-x7k2p", stale, 4) == shard_of(pod_shard_key("ns", "app"), 4)


def test_a_claim_labelled_by_someone_else_is_in_the_labels_shard_the_only_one_watching_it() -> None:
    other = next(s for s in range(4) if s != shard_of("ns/shared", 4))
    assert claim_shard("ns", "shared", labelled("shared", f"{other}-of-4"), 4) == other


def test_selectors_split_the_claims_between_the_shards_and_the_unlabelled_watch() -> None:
    assert shard_selector(2, 4) == f"{SHARD_LABEL}=2-of-4"
    assert unlabelled_selector(4) == f"{SHARD_LABEL} notin (0-of-4,1-of-4,2-of-4,3-of-4)"
    assert unlabelled_selector(4, but=1) == f"{SHARD_LABEL} notin (0-of-4,2-of-4,3-of-4)"
    assert "claim-controller-shard" in SHARD_LABEL and SHARD_LABEL.startswith("draflow.dev/")


def test_a_templates_value_for_the_shard_label_is_never_copied() -> None:
    template = {"spec": {"metadata": {"labels": {SHARD_LABEL: "3-of-4", "team": "a"}}, "spec": {}}}
    owner = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "name": "g", "uid": "u"}
    assert claim_body(owner, "ns", "gpu", template)["metadata"]["labels"] == {"team": "a"}
