"""Conformance table: multi-allocatable devices sharing capacity (DRAConsumableCapacity): defaults,
policies, what existing and in-flight allocations already consume, allocationMode All, and the
fail-closed errors (negative or unrepresentable values).

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

import pytest
from conformance_kit import (
    DRIVER,
    GPU_CLASS,
    MULTI_CLASS,
    NIC_CLASS,
    Case,
    check_case,
    gpus,
    multi_dev,
    params,
    range_cap,
    shared,
    shared_alloc,
    values_cap,
)
from sa_builders import alloc, claim, first_available, req, rslice, sub

from structured_allocator.core import Features, InvalidCapacityError, InvalidRequestError

CASES: dict[str, Case] = {
    "capacity-feature-off-request-error": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", gpus(1))],
        features=Features(consumable_capacity=False),
        error=(InvalidRequestError, 'request "gpu": has capacity requests, but the DRAConsumableCapacity'),
        upstream=("consumable-capacity-disabled-feature",),
    ),
    "capacity-feature-off-subrequest-error": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu", sub("a", capacity={"memory": "1"}), sub("b", capacity={"memory": "1"})
                ),
            )
        ],
        [rslice("s", gpus(1))],
        features=Features(consumable_capacity=False),
        error=(InvalidRequestError, 'request "gpu/a": has capacity requests, but the DRAConsumableCapacity'),
        upstream=("consumable-capacity-disabled-feature-with-prioritized-list",),
    ),
    "capacity-request-for-capacity-the-device-lacks": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"bandwidth": "1"})])],
        None,
        upstream=("consumable-capacity-multi-allocatable-device-with-missing-capacity-request",),
    ),
    "capacity-all-mode-request-for-capacity-the-device-lacks": Case(
        [claim("c", req("gpu", mode="All", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"bandwidth": "1"})])],
        None,
        classes=[MULTI_CLASS],
        upstream=(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
        ),
    ),
    "capacity-no-capacities-shared-freely": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", [multi_dev("gpu-0")])],
        [alloc(shared("gpu", "gpu-0", 1)), alloc(shared("gpu", "gpu-0", 2))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",),
    ),
    "capacity-no-policy-no-request-takes-everything": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "1"}), multi_dev("gpu-1", {"memory": "1"})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="1")), alloc(shared("gpu", "gpu-1", 2, memory="1"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",),
    ),
    "capacity-no-policy-no-request-blocks-second-claim": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"})])],
        None,
        classes=[MULTI_CLASS],
        upstream=(
            "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
        ),
    ),
    "capacity-no-policy-requests-share": Case(
        [
            claim("c1", req("gpu", capacity={"memory": "1"})),
            claim("c2", req("gpu", capacity={"memory": "1"})),
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="1")), alloc(shared("gpu", "gpu-0", 2, memory="1"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",),
    ),
    "capacity-policy-default-applies-without-request": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2")), alloc(shared("gpu", "gpu-0", 2, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",),
    ),
    "capacity-zero-default-consumes-nothing": Case(
        [claim("c1", req("gpu")), claim("c2", req("gpu"))],
        [rslice("s", [multi_dev("gpu-0", {"memory": values_cap("1", "0")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="0")), alloc(shared("gpu", "gpu-0", 2, memory="0"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-zero-request-policy",),
    ),
    "capacity-request-not-among-valid-values": Case(
        [claim("c", req("gpu", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": values_cap("1", "0")})])],
        None,
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-violates-zero-request-policy",),
    ),
    "capacity-range-rounds-up-to-min": Case(
        [
            claim("c1", req("gpu", capacity={"memory": "1"})),
            claim("c2", req("gpu", capacity={"memory": "1"})),
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2")), alloc(shared("gpu", "gpu-0", 2, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",),
    ),
    "capacity-range-rounds-up-to-step": Case(
        [claim("c", req("gpu", capacity={"memory": "3"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="4"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-range-policy-step",),
    ),
    "capacity-valid-values-exact": Case(
        [claim("c", req("gpu", capacity={"memory": "2"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": values_cap("4", "1", "2")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-valid-values-policy",),
    ),
    "capacity-valid-values-round-up": Case(
        [claim("c", req("gpu", capacity={"memory": "2"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": values_cap("3", "1", "3")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="3"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",),
    ),
    "capacity-second-claim-exceeds-device": Case(
        [
            claim("c1", req("gpu", capacity={"memory": "1"})),
            claim("c2", req("gpu", capacity={"memory": "2"})),
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("2")})])],
        None,
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",),
    ),
    "capacity-request-above-policy-max": Case(
        [claim("c", req("gpu", capacity={"memory": "6"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("10")})])],
        None,
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",),
    ),
    "capacity-uses-what-existing-shares-left": Case(
        [claim("c", req("gpu", capacity={"memory": "2"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2"))],
        classes=[MULTI_CLASS],
        allocated=[shared_alloc("gpu-0", 90, memory="2")],
        upstream=("consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",),
    ),
    "capacity-full-device-skipped-for-next": Case(
        [claim("c", req("gpu", capacity={"memory": "2"}))],
        [
            rslice(
                "s",
                [
                    multi_dev("gpu-0", {"memory": range_cap("2")}),
                    multi_dev("gpu-1", {"memory": range_cap("2")}),
                ],
            )
        ],
        [alloc(shared("gpu", "gpu-1", 1, memory="2"))],
        classes=[MULTI_CLASS],
        allocated=[shared_alloc("gpu-0", 90, memory="2")],
        upstream=("consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",),
    ),
    "capacity-full-device-does-not-fit": Case(
        [claim("c", req("gpu", capacity={"memory": "2"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("2")})])],
        None,
        classes=[MULTI_CLASS],
        allocated=[shared_alloc("gpu-0", 90, memory="2")],
        summary='claim "c" request "gpu": 1 devices of class gpu, 1 blocked by capacity, 0 usable, 1 needed',
        upstream=("consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",),
    ),
    "capacity-backtracks-to-bigger-device-for-constraint": Case(
        [
            claim(
                "c1",
                req("a", capacity={"memory": "2"}),
                req("b", capacity={"memory": "2"}),
                constraints=[{"matchAttribute": f"{DRIVER}/kind"}],
            ),
            claim("c2", req("gpu", capacity={"memory": "2"})),
        ],
        [
            rslice(
                "s",
                [
                    multi_dev("gpu-small", {"memory": range_cap("2")}, {"kind": "x"}),
                    multi_dev("gpu-big", {"memory": range_cap("4")}, {"kind": "y"}),
                ],
            )
        ],
        [
            alloc(shared("a", "gpu-big", 2, memory="2"), shared("b", "gpu-big", 3, memory="2")),
            alloc(shared("gpu", "gpu-small", 4, memory="2")),
        ],
        upstream=("consumable-capacity-with-multi-allocatable-device-backtrack",),
    ),
    "capacity-first-available-picks-subrequest-that-fits": Case(
        [
            claim(
                "c",
                first_available(
                    "gpu",
                    sub("big", capacity={"memory": "4"}),
                    sub("fits", capacity={"memory": "2"}),
                    sub("any"),
                ),
            )
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("2")})])],
        [alloc(shared("gpu/fits", "gpu-0", 1, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-with-subrequest",),
    ),
    # --- allocationMode All: static capacity when collecting, what is left when allocating --------------
    "capacity-all-mode-skips-device-without-the-capacity": Case(
        [claim("c", req("gpu", mode="All", capacity={"memory": "2"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"}), multi_dev("gpu-1")])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",),
    ),
    "capacity-all-mode-skips-device-too-small": Case(
        [claim("c", req("gpu", mode="All", capacity={"memory": "2"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"}), multi_dev("gpu-1", {"memory": "1"})])],
        [alloc(shared("gpu", "gpu-0", 1, memory="2"))],
        classes=[MULTI_CLASS],
        upstream=(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
        ),
    ),
    "capacity-all-mode-after-request-of-same-claim-still-fits": Case(
        [claim("c", req("one", capacity={"memory": "1"}), req("all", mode="All", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"}), multi_dev("gpu-1", {"memory": "1"})])],
        [
            alloc(
                shared("one", "gpu-0", 1, memory="1"),
                shared("all", "gpu-0", 2, memory="1"),
                shared("all", "gpu-1", 3, memory="1"),
            )
        ],
        upstream=("consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",),
    ),
    "capacity-all-mode-next-to-existing-share-fits": Case(
        [claim("c", req("all", mode="All", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "2"}), multi_dev("gpu-1", {"memory": "1"})])],
        [alloc(shared("all", "gpu-0", 1, memory="1"), shared("all", "gpu-1", 2, memory="1"))],
        allocated=[shared_alloc("gpu-0", 90, memory="1")],
        upstream=("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",),
    ),
    # Issue 12 defect 2: the 1-unit gpu-0 was charged twice in one claim.
    "capacity-all-mode-device-filled-by-same-claim-fails": Case(
        [claim("c", req("one", capacity={"memory": "1"}), req("all", mode="All", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "1"}), multi_dev("gpu-1", {"memory": "1"})])],
        None,
        upstream=(
            "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
        ),
    ),
    "capacity-all-mode-two-all-requests-cannot-double-charge": Case(
        [
            claim(
                "c",
                req("a", mode="All", capacity={"memory": "1"}),
                req("b", mode="All", capacity={"memory": "1"}),
            )
        ],
        [rslice("s", [multi_dev("gpu-0", {"memory": "1"})])],
        None,
    ),
    # Issue 12 defect 2: a matching device that is already full makes All fail, not a subset.
    "capacity-all-mode-device-full-from-existing-share-fails": Case(
        [claim("c", req("all", mode="All", capacity={"memory": "1"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "1"}), multi_dev("gpu-1", {"memory": "1"})])],
        None,
        allocated=[shared_alloc("gpu-0", 90, memory="1")],
        upstream=("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",),
    ),
    # --- fail closed ---------------------------------------------------------------------------------
    "capacity-request-above-int64-is-an-error": Case(
        [claim("c", req("gpu", capacity={"memory": "18446744073709551616"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "cannot be represented"),
        upstream=("consumable-capacity-range-policy-request-above-int64-rejected",),
    ),
    "capacity-rounded-request-above-int64-is-an-error": Case(
        [claim("c", req("gpu", capacity={"memory": "9223372036854775807"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "cannot be represented"),
        upstream=("consumable-capacity-range-policy-rounded-value-overflow-rejected",),
    ),
    "capacity-unrepresentable-aborts-instead-of-trying-next-device": Case(
        [claim("c", req("gpu", capacity={"memory": "18446744073709551616"}))],
        [
            rslice(
                "s",
                [
                    multi_dev("gpu-0", {"memory": range_cap("4")}),
                    multi_dev("gpu-1", {"memory": "36893488147419103232"}),
                ],
            )
        ],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "cannot be represented"),
        upstream=("consumable-capacity-range-policy-overflow-aborts-not-skip",),
    ),
    "capacity-all-mode-unrepresentable-is-an-error": Case(
        [claim("c", req("gpu", mode="All", capacity={"memory": "18446744073709551616"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": range_cap("4")})])],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "cannot be represented"),
        upstream=("consumable-capacity-range-policy-allocation-mode-all-overflow-aborts",),
    ),
    # Issue 12 defect 2: a negative request used to lower the running total instead.
    "capacity-negative-request-is-an-error": Case(
        [claim("c", req("gpu", capacity={"memory": "-5"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "10"})])],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "capacity 'memory': capacity value is negative"),
        upstream=("consumable-capacity-negative-request-aborts",),
    ),
    "capacity-negative-request-cannot-make-room-for-another": Case(
        [claim("c", req("a", capacity={"memory": "-5"}), req("b", capacity={"memory": "10"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "10"})])],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "negative"),
    ),
    "capacity-negative-device-capacity-is-an-error": Case(
        [claim("c", req("gpu"))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "-1"})])],
        classes=[MULTI_CLASS],
        error=(InvalidCapacityError, "negative"),
    ),
    # Upstream never reaches request "b" (nothing fits "a"): does not fit, and the explanation must not raise.
    "capacity-negative-request-of-unreached-request-does-not-fit": Case(
        [claim("c", req("a", cls="nic"), req("b", capacity={"memory": "-5"}))],
        [rslice("s", [multi_dev("gpu-0", {"memory": "10"})])],
        None,
        classes=[GPU_CLASS, NIC_CLASS],
        explain={"b": {"blocked_by_capacity": 1}},
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_capacity_sharing(case: Case) -> None:
    check_case(case)
