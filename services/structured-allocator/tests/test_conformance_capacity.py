"""Conformance table: Consumable capacity (DRAConsumableCapacity, DRAFractionalCapacityRange).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import (
    DEDICATED_CLASS,
    DRIVER,
    MEM,
    MULTI_CLASS,
    Case,
    attr,
    check_case,
    consumes,
    counters,
    gpus,
    multi_dev,
    params,
    range_cap,
    shared,
    shared_alloc,
)
from sa_builders import alloc, claim, dev, first_available, req, res, rslice, share, sub

from structured_allocator.core import Features, InvalidRequestError

MULTI_CAP = {
    "memory": {
        "value": "100Gi",
        "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "max": "60Gi", "step": "10Gi"}},
    },
    "bandwidth": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "20", "40"]}},
}


FRACTION = {
    "value": "1",
    "requestPolicy": {"default": "200m", "validRange": {"min": "200m", "step": "100m", "max": "1"}},
}


CASES: dict[str, Case] = {
    "capacity-step-rounding-and-share": Case(
        [claim("c", req("gpu", capacity={"memory": "15Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("gpu", "gpu-0", shareID=share(1), consumedCapacity={"memory": "20Gi", "bandwidth": "10"})
            )
        ],
    ),
    "capacity-valid-values-rounding": Case(
        [claim("c", req("gpu", capacity={"bandwidth": "25"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("gpu", "gpu-0", shareID=share(1), consumedCapacity={"memory": "10Gi", "bandwidth": "40"})
            )
        ],
    ),
    "capacity-above-max-not-eligible": Case(
        [claim("c", req("gpu", capacity={"memory": "70Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
        explain={"gpu": {"blocked_by_capacity": 1, "usable": 0}},
    ),
    "capacity-exceeded-by-existing-shares": Case(
        [claim("c", req("gpu", capacity={"memory": "20Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
        allocated=[
            shared_alloc("gpu-0", 90, memory="60Gi", bandwidth="10"),
            claim(
                "e2",
                req("gpu"),
                allocation=alloc(res("gpu", "gpu-0", shareID=share(91), consumedCapacity={"memory": "30Gi"})),
            ),
        ],
        summary='claim "c" request "gpu": 1 devices of class gpu, 1 blocked by capacity, 0 usable, 1 needed',
    ),
    "capacity-fits-next-to-existing-share": Case(
        [claim("c", req("gpu", capacity={"memory": "40Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("gpu", "gpu-0", shareID=share(1), consumedCapacity={"memory": "40Gi", "bandwidth": "10"})
            )
        ],
        allocated=[shared_alloc("gpu-0", 90, memory="60Gi", bandwidth="10")],
    ),
    "capacity-two-requests-share-one-device": Case(
        [claim("c", req("a", capacity={"memory": "50Gi"}), req("b", capacity={"memory": "50Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        [
            alloc(
                res("a", "gpu-0", shareID=share(1), consumedCapacity={"memory": "50Gi", "bandwidth": "10"}),
                res("b", "gpu-0", shareID=share(2), consumedCapacity={"memory": "50Gi", "bandwidth": "10"}),
            )
        ],
    ),
    "capacity-third-share-exceeds": Case(
        [
            claim(
                "c",
                req("a", capacity={"memory": "50Gi"}),
                req("b", capacity={"memory": "50Gi"}),
                req("d", capacity={"memory": "10Gi"}),
            )
        ],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
    ),
    # Within one request devices are combinations, not permutations: one device cannot fill two slots.
    "capacity-count-two-needs-two-devices": Case(
        [claim("c", req("gpu", count=2, capacity={"memory": "50Gi"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
    ),
    "capacity-unknown-capacity-name-skips-device": Case(
        [claim("c", req("gpu", capacity={"nope": "1"}))],
        [rslice("s", [dev("gpu-0", cap=MULTI_CAP, allowMultipleAllocations=True)])],
        None,
    ),
    "capacity-request-on-exclusive-device": Case(
        [claim("c", req("gpu", capacity={"memory": "50Gi"}))],
        [rslice("s", [dev("gpu-0", cap={"memory": "40Gi"}), dev("gpu-1", cap={"memory": "80Gi"})])],
        [alloc(res("gpu", "gpu-1"))],
    ),
    "capacity-request-feature-off-error": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", gpus(1))],
        features=Features(consumable_capacity=False),
        error=(InvalidRequestError, "DRAConsumableCapacity"),
    ),
    # --- upstream: dedicated devices, class selection on allowMultipleAllocations, exactness ---------------
    "capacity-request-on-dedicated-device-allocates-it-whole": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", [dev("gpu-0", cap={"memory": "1"})])],
        [alloc(res("gpu", "gpu-0"))],
        classes=[DEDICATED_CLASS],
        upstream=("consumable-capacity-dedicated-device-with-consumable-capacity-request",),
    ),
    "capacity-dedicated-device-once": Case(
        [
            claim("c1", req("gpu", capacity={"memory": "1"})),
            claim("c2", req("gpu", capacity={"memory": "1"})),
        ],
        [rslice("s", [dev("gpu-0", cap={"memory": range_cap("2")})])],
        None,
        classes=[DEDICATED_CLASS],
        upstream=("consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",),
    ),
    "capacity-huge-values-exact": Case(
        [
            claim(
                "c",
                req("a", capacity={"memory": "2"}),
                req("b", capacity={"memory": "1000000000000000000000"}),
            )
        ],
        [
            rslice(
                "s",
                [
                    multi_dev(
                        "gpu-0",
                        {
                            "memory": {
                                "value": "1000000000000000000002",
                                "requestPolicy": {
                                    "default": "1000000000000000000000",
                                    "validRange": {"min": "2"},
                                },
                            }
                        },
                    )
                ],
            )
        ],
        [alloc(shared("a", "gpu-0", 1, memory="2"), shared("b", "gpu-0", 2, memory="1000E"))],
        upstream=("consumable-capacity-requests-are-not-modified",),
    ),
    "class-excludes-multi-allocatable-device": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "1"})])],
        None,
        classes=[DEDICATED_CLASS],
        upstream=("allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",),
    ),
    "multi-allocatable-device-allocated-exclusively-is-in-use": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("2")})])],
        None,
        classes=[MULTI_CLASS],
        allocated_devices=("gpu-0",),
        upstream=(
            "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
        ),
    ),
    "device-no-longer-multi-allocatable-with-shares": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", [dev("gpu-0", cap={"memory": range_cap("2")})])],
        None,
        classes=[MULTI_CLASS],
        allocated=[shared_alloc("gpu-0", 90, memory="1")],
        upstream=(
            "allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
        ),
    ),
    # --- DRAFractionalCapacityRange -------------------------------------------------------------------------
    "fractional-range-gate-off-rounds-on-integers": Case(
        [claim("c", req("gpu", capacity={"memory": "200m"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": FRACTION})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="1"))],
        classes=[MULTI_CLASS],
        features=Features(fractional_capacity_range=False),
        upstream=("consumable-capacity-fractional-range-gate-disabled",),
    ),
    "fractional-range-rounds-up-in-milli-units": Case(
        [claim("c", req("gpu", capacity={"memory": "250m"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": FRACTION})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="300m"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-fractional-range-gate-enabled-round-up",),
    ),
    # --- upstream: multi-allocatable partitions (counters charged once per device) ------------------------
    "multi-allocatable-partitions-first-available": Case(
        [
            claim(
                "c",
                req("a"),
                first_available(
                    "r",
                    sub("x", selectors=(f'{MEM}.compareTo(quantity("6Gi")) >= 0',)),
                    sub("y", selectors=(f'{MEM}.compareTo(quantity("4Gi")) >= 0',)),
                ),
            )
        ],
        [
            rslice(
                "s1",
                [
                    multi_dev(f"gpu-{i}", {"memory": m}, consumesCounters=[consumes("set", memory=m)])
                    for i, m in enumerate(["4Gi", "6Gi", "4Gi"])
                ],
                count=2,
            ),
            counters("s2", set={"memory": "8Gi"}),
        ],
        [alloc(shared("a", "gpu-0", 1, memory="4Gi"), shared("r/y", "gpu-2", 2, memory="4Gi"))],
        classes=[MULTI_CLASS],
        upstream=("allow-multiple-allocations-with-partitionable-device",),
    ),
    "shared-partition-of-earlier-cycle-holds-the-counter": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}, selectors=(f'{attr("mode")} == "b"',)))],
        [
            rslice(
                "s1",
                [
                    multi_dev(
                        "gpu-0",
                        {"memory": "1"},
                        {"mode": "a"},
                        consumesCounters=[consumes("set", memory="1")],
                    ),
                    multi_dev(
                        "gpu-1",
                        {"memory": "1"},
                        {"mode": "b"},
                        consumesCounters=[consumes("set", memory="1")],
                    ),
                ],
                count=2,
            ),
            counters("s2", set={"memory": "1"}),
        ],
        None,
        classes=[MULTI_CLASS],
        allocated=[shared_alloc("gpu-0", 90, memory="1")],
        upstream=("allow-multiple-allocations-with-shared-device-counter-cross-cycle",),
    ),
    "shared-partition-not-charged-twice": Case(
        [claim("c", req("gpu"))],
        [
            rslice("s1", [multi_dev("gpu-0", consumesCounters=[consumes("set", c="1")])], count=2),
            counters("s2", set={"c": "1"}),
        ],
        [alloc(shared("gpu", "gpu-0", 1))],
        allocated=[shared_alloc("gpu-0", 90)],
        upstream=("partitionable-consumable-capacity-shared-device-counter-not-recharged",),
    ),
    "multi-allocatable-partitions-two-counter-sets": Case(
        [
            claim(
                "c",
                req("a", capacity={"c0": "1"}),
                req("b", capacity={"c0": "2"}),
                first_available(
                    "r",
                    sub(
                        "x",
                        capacity={"c0": "1"},
                        selectors=(f'device.capacity["{DRIVER}"].c0.compareTo(quantity("4")) >= 0',),
                    ),
                    sub(
                        "y",
                        capacity={"c0": "1"},
                        selectors=(f'device.capacity["{DRIVER}"].c0.compareTo(quantity("2")) >= 0',),
                    ),
                ),
            )
        ],
        [
            rslice(
                "s1",
                [
                    multi_dev(
                        f"gpu-{i}",
                        {"c0": c0, "c1": range_cap("4")},
                        consumesCounters=[consumes("set-1", c0=c0), consumes("set-2", c1="4")],
                    )
                    for i, c0 in enumerate(["2", "4", "2"])
                ],
                count=2,
            ),
            counters("s2", set_1={"c0": "4"}, set_2={"c1": "8"}),
        ],
        [
            alloc(
                shared("a", "gpu-0", 1, c0="1", c1="2"),
                shared("b", "gpu-2", 2, c0="2", c1="2"),
                shared("r/y", "gpu-0", 3, c0="1", c1="2"),
            )
        ],
        upstream=("consumable-capacity-with-partitionable-device-multiple-capacity-pools",),
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_capacity(case: Case) -> None:
    check_case(case)
