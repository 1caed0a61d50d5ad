"""Conformance table: compatibility groups (DRADeviceCompatibilityGroups, alpha, off by default;
``Features(compatibility_groups=True)``). Devices drawing from one counter set are allocated together
only when their ``compatibilityGroups`` have a group in common — within a claim, across the claims of
one call, and with devices already allocated. The gate-off behaviour (slices with groups make their
pool incomplete) is in ``test_conformance_partitionable.py``.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import MULTI_CLASS, Case, check_case, consumes, counters, params, shared
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, sub

from structured_allocator.core import Features

GROUPS = Features(compatibility_groups=True)
NO_SCHEDULE = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}


def grouped(name: str, *groups: str, counter_set: str = "set-1", mem: str = "1", **extra: Any) -> Any:
    """A device drawing ``mem`` from ``counter_set`` with the given compatibility groups."""
    return dev(name, consumesCounters=[consumes(counter_set, groups, mem=mem)], **extra)


def pool(*devices: dict[str, Any], sets: tuple[str, ...] = ("set-1",)) -> list[dict[str, Any]]:
    """One pool on node-1: a slice with ``devices`` and a counter slice (mem 4 per counter set)."""
    return [
        rslice("devices", list(devices), count=2),
        counters("counters", **{s.replace("-", "_"): {"mem": "4"} for s in sets}),
    ]


def two_requests() -> dict[str, Any]:
    return claim("c", req("a"), req("b"))


CASES: dict[str, Case] = {
    "same-group-shares-the-counter-set": Case(
        [two_requests()],
        pool(grouped("mig-0", "mig", mem="2"), grouped("mig-1", "mig", mem="2")),
        [alloc(res("a", "mig-0"), res("b", "mig-1"))],
        features=GROUPS,
        upstream=("compatibility-groups-compatible",),
    ),
    "disjoint-groups-on-one-counter-set-do-not-fit": Case(
        [two_requests()],
        pool(grouped("mig-0", "mig", mem="2"), grouped("vgpu-0", "vgpu", mem="2")),
        None,
        features=GROUPS,
        upstream=("compatibility-groups-incompatible",),
    ),
    "without-the-gate-the-grouped-pool-is-unused": Case(
        # Gate off: the grouped slice is ignored, the pool is incomplete, nothing is allocated.
        [claim("c", req("a"))],
        pool(grouped("mig-0", "mig"), grouped("mig-1", "mig")),
        None,
    ),
    "a-device-rejected-by-its-taint-leaves-no-group-behind": Case(
        [claim("c", req("gpu"))],
        pool(grouped("mig-0", "mig", mem="2", taints=[NO_SCHEDULE]), grouped("vgpu-0", "vgpu", mem="2")),
        [alloc(res("gpu", "vgpu-0"))],
        features=GROUPS,
        upstream=("compatibility-groups-taint-rollback",),
    ),
    "allocated-peer-of-another-group-blocks": Case(
        [claim("c", req("gpu"))],
        pool(grouped("mig-0", "mig"), grouped("vgpu-0", "vgpu")),
        None,
        allocated_devices=("mig-0",),
        features=GROUPS,
        explain={"gpu": {"free": 1, "blocked_by_counters": 1, "usable": 0}},
        upstream=("compatibility-groups-incompatible-with-allocated-peer",),
    ),
    "allocated-peer-of-the-same-group-admits": Case(
        [claim("c", req("gpu"))],
        pool(grouped("mig-0", "mig"), grouped("mig-1", "mig")),
        [alloc(res("gpu", "mig-1"))],
        allocated_devices=("mig-0",),
        features=GROUPS,
        upstream=("compatibility-groups-compatible-with-allocated-peer",),
    ),
    "allocated-peer-groups-come-from-the-slice-not-the-claim": Case(
        # The allocated claim does not say anything about groups: the slice does.
        [claim("c", req("gpu"))],
        pool(grouped("mig-0", "mig", "vgpu"), grouped("vgpu-0", "vgpu")),
        [alloc(res("gpu", "vgpu-0"))],
        allocated=[claim("old", req("gpu"), allocation=alloc(res("gpu", "mig-0")))],
        features=GROUPS,
    ),
    "groups-are-per-counter-set": Case(
        [two_requests()],
        pool(
            grouped("mig-0", "mig", counter_set="set-1", mem="2"),
            grouped("vgpu-0", "vgpu", counter_set="set-2", mem="2"),
            sets=("set-1", "set-2"),
        ),
        [alloc(res("a", "mig-0"), res("b", "vgpu-0"))],
        features=GROUPS,
        upstream=("compatibility-groups-multiple-counter-sets",),
    ),
    "a-device-on-two-counter-sets-must-fit-both": Case(
        [two_requests()],
        pool(
            grouped("mig-0", "mig"),
            dev(
                "vgpu-wide",
                consumesCounters=[
                    consumes("set-1", ("vgpu",), mem="1"),
                    consumes("set-2", ("vgpu",), mem="1"),
                ],
            ),
            sets=("set-1", "set-2"),
        ),
        None,
        features=GROUPS,
        upstream=("compatibility-groups-multiple-counter-sets-spanning-device",),
    ),
    "a-failed-subrequest-gives-its-groups-back": Case(
        [claim("c", req("a"), first_available("b", sub("two", count=2), sub("one")))],
        pool(grouped("mig-0", "mig"), grouped("mig-1", "mig"), grouped("vgpu-0", "vgpu")),
        [alloc(res("a", "mig-0"), res("b/one", "mig-1"))],
        features=GROUPS,
        upstream=("compatibility-groups-with-prioritized-list",),
    ),
    "groups-steer-shares-of-multi-allocatable-devices": Case(
        [claim("c", req("a", capacity={"mem": "1"}), req("b", capacity={"mem": "1"}))],
        pool(
            grouped("mig-0", "mig", capacity={"mem": {"value": "1"}}, allowMultipleAllocations=True),
            grouped("vgpu-0", "vgpu", capacity={"mem": {"value": "1"}}, allowMultipleAllocations=True),
            grouped("mig-1", "mig", capacity={"mem": {"value": "1"}}, allowMultipleAllocations=True),
        ),
        [alloc(shared("a", "mig-0", 1, mem="1"), shared("b", "mig-1", 2, mem="1"))],
        classes=[MULTI_CLASS],
        features=GROUPS,
        upstream=("compatibility-groups-with-consumable-capacity",),
    ),
    "claims-of-one-call-share-the-group": Case(
        [claim("c0", req("gpu")), claim("c1", req("gpu"))],
        pool(grouped("mig-0", "mig"), grouped("mig-1", "mig")),
        [alloc(res("gpu", "mig-0")), alloc(res("gpu", "mig-1"))],
        features=GROUPS,
        upstream=("compatibility-groups-multiple-claims",),
    ),
    "claims-of-one-call-with-disjoint-groups-do-not-fit": Case(
        [claim("c0", req("gpu")), claim("c1", req("gpu"))],
        pool(grouped("mig-0", "mig"), grouped("vgpu-0", "vgpu")),
        None,
        features=GROUPS,
        upstream=("compatibility-groups-multiple-claims-incompatible",),
    ),
    "the-common-groups-narrow-with-every-device": Case(
        # a-b share x, b-c share y, a-c nothing: after a and b only x is common, so c is refused.
        [claim("c", req("gpu", count=3))],
        pool(grouped("a", "x"), grouped("b", "x", "y"), grouped("c", "y"), grouped("d", "x", "z")),
        [alloc(res("gpu", "a"), res("gpu", "b"), res("gpu", "d"))],
        features=GROUPS,
    ),
    "ungrouped-devices-go-only-with-ungrouped-peers": Case(
        [claim("c", req("gpu", count=2))],
        pool(dev("plain-0", consumesCounters=[consumes("set-1", mem="1")]), grouped("mig-0", "mig"),
             dev("plain-1", consumesCounters=[consumes("set-1", mem="1")])),
        [alloc(res("gpu", "plain-0"), res("gpu", "plain-1"))],
        features=GROUPS,
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_compatibility_groups(case: Case) -> None:
    check_case(case)
