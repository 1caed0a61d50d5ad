"""Per-pool device counts (structured_allocator.poolmetrics.pool_counts): table cases, no server."""

from __future__ import annotations

from typing import Any

import pytest
from sa_builders import alloc, dev, res, rslice

from structured_allocator.core import SliceIndex
from structured_allocator.poolmetrics import AllocatorCollector, PoolCounts, oldest_pending, pool_counts

UNHEALTHY = {"key": "draflow.dev/unhealthy", "effect": "NoSchedule"}
GONE = {"key": "draflow.dev/driver-unavailable", "effect": "NoSchedule"}
INFO = {"key": "example.com/maintenance", "effect": "None"}


def counts(slices: list[dict[str, Any]], allocations: list[dict[str, Any]]) -> list[PoolCounts]:
    return pool_counts(SliceIndex(slices), allocations)


def test_an_empty_cluster_has_no_pools() -> None:
    assert counts([], []) == []


def test_free_devices_of_one_node_pool() -> None:
    (p,) = counts([rslice("s", [dev("gpu-0"), dev("gpu-1")], node="n1")], [])
    assert (p.driver, p.pool, p.node) == ("gpu.example.com", "n1", "n1")
    assert (p.total, p.allocated, p.tainted, p.unhealthy, p.free) == (2, 0, 0, 0, 2)


def test_an_allocated_device_counts_once_however_many_claims_share_it() -> None:
    slices = [rslice("s", [dev("gpu-0"), dev("gpu-1"), dev("gpu-2")], node="n1")]
    allocations = [alloc(res("a", "gpu-0", pool="n1")), alloc(res("b", "gpu-0", pool="n1")),
                   alloc(res("c", "gpu-1", pool="n1"))]
    (p,) = counts(slices, allocations)
    assert (p.total, p.allocated, p.free) == (3, 2, 1)


def test_admin_access_results_and_other_pools_do_not_count() -> None:
    slices = [rslice("s", [dev("gpu-0")], node="n1")]
    allocations = [alloc(res("a", "gpu-0", pool="n1", adminAccess=True)),
                   alloc(res("b", "gpu-0", pool="n2")),
                   alloc(res("c", "gpu-0", pool="n1", driver="other.example.com"))]
    (p,) = counts(slices, allocations)
    assert (p.allocated, p.free) == (0, 1)


def test_taints_unhealthy_and_the_breakdown_by_key() -> None:
    slices = [rslice("s", [dev("gpu-0", taints=[UNHEALTHY]), dev("gpu-1", taints=[GONE, UNHEALTHY]),
                           dev("gpu-2", taints=[INFO]), dev("gpu-3")], node="n1")]
    (p,) = counts(slices, [alloc(res("a", "gpu-1", pool="n1"))])
    # gpu-2's taint has effect None: tainted in the breakdown, still usable.
    assert (p.total, p.allocated, p.tainted, p.unhealthy, p.free) == (4, 1, 2, 2, 2)
    assert dict(p.taints) == {
        ("draflow.dev/unhealthy", "NoSchedule"): 2,
        ("draflow.dev/driver-unavailable", "NoSchedule"): 1,
        ("example.com/maintenance", "None"): 1,
    }


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    slices = [rslice("old", [dev("gpu-0"), dev("gpu-1"), dev("gpu-2")], node="n1", gen=1),
              rslice("new", [dev("gpu-0")], node="n1", gen=2)]
    (p,) = counts(slices, [])
    assert p.total == 1


@pytest.mark.parametrize(
    ("nodes", "node_label"),
    [pytest.param(["n1", "n1"], "n1", id="one node"), pytest.param(["n1", "n2"], "", id="two nodes")],
)
def test_node_name_only_when_every_slice_of_the_pool_names_the_same_node(
    nodes: list[str], node_label: str
) -> None:
    slices = [rslice(f"s{i}", [dev(f"gpu-{i}")], node=n, pool="shared-pool", count=2)
              for i, n in enumerate(nodes)]
    (p,) = counts(slices, [])
    assert (p.pool, p.node, p.total) == ("shared-pool", node_label, 2)


def test_pools_are_sorted_by_driver_then_pool() -> None:
    slices = [rslice("b", [dev("d")], node="n2"), rslice("a", [dev("d")], node="n1"),
              rslice("z", [dev("d")], node="n0", driver="a.example.com")]
    assert [(p.driver, p.pool) for p in counts(slices, [])] == [
        ("a.example.com", "n0"), ("gpu.example.com", "n1"), ("gpu.example.com", "n2")]


# -- waiting claims --------------------------------------------------------------------------------------


def test_no_family_the_allocator_exports_has_a_label_per_claim_or_pod() -> None:
    """Series per claim or pod grow with the cluster's churn (one new series per claim ever waiting):
    waiting claims are counted and aged per namespace; which ones wait is for ``/explain``."""
    per_object = {"resourceclaim", "claim", "pod", "uid"}
    families = {m.name: set(m._labelnames) for m in AllocatorCollector().describe()}
    assert {name: labels & per_object for name, labels in families.items() if labels & per_object} == {}
    assert families["draflow_resourceclaims_pending_oldest_timestamp_seconds"] == {"namespace"}


def test_the_oldest_waiting_claim_per_namespace() -> None:
    pending = {("a", "c1"): ("u1", 100.0), ("a", "c2"): ("u2", 50.0), ("a", "c3"): ("u3", None),
               ("b", "c4"): ("u4", 70.0), ("c", "c5"): ("u5", None)}
    assert oldest_pending(pending) == {"a": 50.0, "b": 70.0}
    assert oldest_pending({}) == {}
