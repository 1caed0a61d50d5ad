"""Conformance table: allocationMode All.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import (
    DRIVER,
    DRIVER_B,
    GPU_CLASS,
    NIC_CLASS,
    Case,
    check_case,
    consumes,
    counters,
    exclusive_alloc,
    gpus,
    params,
)
from sa_builders import alloc, claim, dev, req, res, rslice

from structured_allocator.core import AllocationError, PoolUnavailableError

CASES: dict[str, Case] = {
    "all-mode-complete-pool": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(3))],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "all-mode-selector-filters": Case(
        [claim("c", req("gpu", mode="All", selectors=(f'device.attributes["{DRIVER}"].numa == 1',)))],
        [rslice("s", gpus(3, numa=[0, 1, 1]))],
        [alloc(res("gpu", "gpu-1"), res("gpu", "gpu-2"))],
    ),
    "all-mode-incomplete-pool-error": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("part", gpus(2), count=2)],
        error=(PoolUnavailableError, f"resource pool {DRIVER}/node-1 is currently being updated"),
    ),
    "all-mode-no-devices-does-not-fit": Case(  # upstream: all-devices-slice-without-devices
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", [], node="node-1")],
        None,
        upstream=("all-devices-slice-without-devices",),
    ),
    "all-mode-device-in-use-does-not-fit": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", gpus(2))],
        None,
        allocated=[exclusive_alloc("gpu-1")],
        upstream=("all-devices-some-allocated",),
    ),
    "all-mode-one-device": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0")])],
        [alloc(res("gpu", "gpu-0"))],
        upstream=("all-devices-single",),
    ),
    "all-mode-device-consuming-counters": Case(
        [claim("c", req("gpu", mode="All"))],
        [
            rslice("s1", [dev("gpu-0", consumesCounters=[consumes("set", memory="4Gi")])], count=2),
            counters("s2", set={"memory": "8Gi"}),
        ],
        [alloc(res("gpu", "gpu-0"))],
        upstream=("all-devices-with-consumed-counters",),
    ),
    "all-mode-two-pools": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s1", [dev("gpu-0")], pool="p1"), rslice("s2", [dev("gpu-0")], pool="p2")],
        [alloc(res("gpu", "gpu-0", pool="p1"), res("gpu", "gpu-0", pool="p2"))],
        upstream=("all-devices-many",),
    ),
    "all-mode-then-other-driver": Case(
        [claim("c1", req("gpu", mode="All")), claim("c2", req("nic", cls="nic"))],
        [rslice("s", [dev("gpu-0")]), rslice("n", [dev("nic-0")], driver=DRIVER_B)],
        [alloc(res("gpu", "gpu-0")), alloc(res("nic", "nic-0", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("all-devices-plus-another",),
    ),
    "other-driver-then-all-mode": Case(
        [claim("c2", req("nic", cls="nic")), claim("c1", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0")]), rslice("n", [dev("nic-0")], driver=DRIVER_B)],
        [alloc(res("nic", "nic-0", driver=DRIVER_B)), alloc(res("gpu", "gpu-0"))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("all-devices-plus-another-reversed",),
    ),
    "all-mode-two-devices-then-other-driver": Case(
        [claim("c1", req("gpu", mode="All")), claim("c2", req("nic", cls="nic"))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")]), rslice("n", [dev("nic-0")], driver=DRIVER_B)],
        [alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1")), alloc(res("nic", "nic-0", driver=DRIVER_B))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("all-devices-many-plus-another",),
    ),
    "other-driver-then-all-mode-two-devices": Case(
        [claim("c2", req("nic", cls="nic")), claim("c1", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0"), dev("gpu-1")]), rslice("n", [dev("nic-0")], driver=DRIVER_B)],
        [alloc(res("nic", "nic-0", driver=DRIVER_B)), alloc(res("gpu", "gpu-0"), res("gpu", "gpu-1"))],
        classes=[GPU_CLASS, NIC_CLASS],
        upstream=("all-devices-many-plus-another-reversed",),
    ),
    "one-then-all-of-the-same-device": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0")])],
        None,
        upstream=("all-devices-no-solution",),
    ),
    "all-then-one-of-the-same-device": Case(
        [claim("c2", req("gpu", mode="All")), claim("c1", req("gpu"))],
        [rslice("s", [dev("gpu-0")])],
        None,
        upstream=("all-devices-no-solution-reversed",),
    ),
    "all-mode-no-slices": Case(
        [claim("c", req("gpu", mode="All"))], [], None, upstream=("all-devices-no-slices",)
    ),
    "all-mode-incomplete-pool-is-an-error": Case(
        [claim("c", req("gpu", mode="All"))],
        [rslice("s", [dev("gpu-0")], pool="p1", count=2)],
        error=(
            PoolUnavailableError,
            f'request "gpu": asks for all devices, but resource pool {DRIVER}/p1 is currently',
        ),
        upstream=("all-devices-of-the-incomplete-pool",),
    ),
    "all-mode-constraint-violated-is-an-error": Case(
        [claim("c", req("gpu", mode="All"), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])],
        [rslice("s", gpus(2, numa=[1, 2]))],
        error=(
            AllocationError,
            f'request "gpu": cannot add device {DRIVER}/node-1/gpu-1 because a claim constraint would not be '
            "satisfied",
        ),
        upstream=("with-constraint-not-matching-int-attribute-all-devices",),
    ),
    "all-mode-constraint-violated-after-taking-counters-is-an-error": Case(
        [claim("c", req("gpu", mode="All"), constraints=[{"matchAttribute": f"{DRIVER}/numa"}])],
        [
            rslice(
                "s1",
                [
                    dev("gpu-0", {"numa": 1}),
                    dev("gpu-1", {"numa": 2}, consumesCounters=[consumes("set", c="1")]),
                ],
                count=2,
            ),
            counters("s2", set={"c": "1"}),
        ],
        error=(AllocationError, f"cannot add device {DRIVER}/node-1/gpu-1 because a claim constraint"),
        upstream=("partitionable-all-mode-constraint-must-error-with-reserved-counter",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_all_mode(case: Case) -> None:
    check_case(case)
