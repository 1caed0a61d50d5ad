"""ResourcePoolStatusRequest answers: partitionSummary (DRAPartitionableDevicesType) and
shareableSummary of whole pools, upstream controller_test.go's view cases in our words."""

from __future__ import annotations

from typing import Any

import pytest
from poolstatus_builders import DRIVER, NOW, allocation, answer, only_pool, request, slice_

from structured_allocator.poolstatus import compute_status
from structured_allocator.poolstatus_views import PREFIX_PARTITION_TYPE_MISSING

# --------------------------------------------------------------------- partition and shareable views


def counters(name: str, **values: str) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in values.items()}}


def consumes(counter_set: str, **values: str) -> dict[str, Any]:
    return {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in values.items()}}


def partition(name: str, attr: str, value: str, cost: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {attr: {"string": value}},
        "consumesCounters": [consumes("gpu-0", memory=cost)],
    }


GPU = "gpu.example.com"
PROFILE, CLASS = f"{GPU}/profile", f"{GPU}/class"


def partition_pool(*, declare: bool, mixed: bool = False) -> list[dict[str, Any]]:
    count = 3 if mixed else 2
    attr = {"partitionTypeAttribute": PROFILE} if declare else {}
    out = [
        slice_(
            "counters",
            "pool-0",
            [],
            driver=GPU,
            node="node-0",
            count=count,
            sharedCounters=[counters("gpu-0", memory="80Gi")],
        ),
        slice_(
            "devices",
            "pool-0",
            [
                partition("full-0", "profile", "Full", "80Gi"),
                partition("half-0", "profile", "Half", "40Gi"),
                partition("half-1", "profile", "Half", "40Gi"),
            ],
            driver=GPU,
            node="node-0",
            count=count,
            **attr,
        ),
    ]
    if mixed:
        out.append(
            slice_(
                "devices-2",
                "pool-0",
                [partition("a-0", "class", "A", "40Gi")],
                driver=GPU,
                node="node-0",
                count=count,
                partitionTypeAttribute=CLASS,
            )
        )
    return out


@pytest.mark.parametrize(
    ("case", "declare", "request_attr", "mixed", "want"),
    [
        (
            "pool declares the attribute",
            True,
            None,
            False,
            [(PROFILE, "Full", 1, 1), (PROFILE, "Half", 2, 2)],
        ),
        (
            "pool declaration beats the request default",
            True,
            f"{GPU}/other",
            False,
            [(PROFILE, "Full", 1, 1), (PROFILE, "Half", 2, 2)],
        ),
        (
            "request default applies when the pool declares none",
            False,
            PROFILE,
            False,
            [(PROFILE, "Full", 1, 1), (PROFILE, "Half", 2, 2)],
        ),
        (
            "pool mixes two grouping attributes",
            True,
            None,
            True,
            [(CLASS, "A", 1, 1), (PROFILE, "Full", 1, 1), (PROFILE, "Half", 2, 2)],
        ),
        ("neither the pool nor the request names one: no partition view", False, None, False, None),
    ],
)
def test_partition_summary(
    case: str,
    declare: bool,
    request_attr: str | None,
    mixed: bool,
    want: list[tuple[str, str, int, int]] | None,
) -> None:
    req = request(GPU, **({"defaultPartitionTypeAttribute": request_attr} if request_attr else {}))
    pool = only_pool(answer(req, partition_pool(declare=declare, mixed=mixed)))
    assert "validationError" not in pool, case
    got = [
        (p["attribute"], p["type"], p["total"], p["allocatable"]) for p in pool.get("partitionSummary", [])
    ]
    assert got == (want or []), case
    if want is None:
        assert "partitionSummary" not in pool


def test_partition_summary_counts_in_use_devices() -> None:
    pool = only_pool(
        answer(request(GPU), partition_pool(declare=True), [allocation("pool-0", "half-0", driver=GPU)])
    )
    assert [(p["type"], p["total"], p["allocatable"]) for p in pool["partitionSummary"]] == [
        ("Full", 1, 0),
        ("Half", 2, 1),
    ]
    assert (pool["allocatedDevices"], pool["availableDevices"]) == (1, 2)


def test_attribute_without_shared_counters_is_a_structural_error_but_counts_stay() -> None:
    # upstream TestSyncRequestWritesStructuralViewError: permanent, so the answer is written.
    slices = [slice_("slice-1", "pool-1", 2, partitionTypeAttribute=f"{DRIVER}/profile")]
    result = compute_status(request(), slices, [], [], NOW)
    pool = only_pool(result.status)
    assert not result.incomplete
    assert pool["validationError"].startswith(PREFIX_PARTITION_TYPE_MISSING)
    assert pool["totalDevices"] == 2 and "partitionSummary" not in pool
    assert result.status["conditions"][0]["message"] == "Calculated status for 1 pools (1 incomplete)"


@pytest.mark.parametrize(
    ("case", "capacity", "consumed", "want"),
    [
        ("single capacity", {"memory": "40Gi"}, {"memory": "10Gi"}, [("memory", "40Gi", "10Gi", "30Gi")]),
        (
            "multiple capacities",
            {"memory": "40Gi", "cores": "8"},
            {"memory": "10Gi", "cores": "2"},
            [("cores", "8", "2", "6"), ("memory", "40Gi", "10Gi", "30Gi")],
        ),
        (
            "nothing consumed of a key",
            {"memory": "40Gi", "cores": "8"},
            {"memory": "10Gi"},
            [("cores", "8", "0", "8"), ("memory", "40Gi", "10Gi", "30Gi")],
        ),
    ],
)
def test_shareable_summary(
    case: str, capacity: dict[str, str], consumed: dict[str, str], want: list[tuple[str, str, str, str]]
) -> None:
    device = {
        "name": "device-0",
        "allowMultipleAllocations": True,
        "capacity": {k: {"value": v} for k, v in capacity.items()},
    }
    pool = only_pool(
        answer(
            request(GPU),
            [slice_("shareable", "pool-0", [device], driver=GPU)],
            [allocation("pool-0", "device-0", driver=GPU, shareID="a" * 8, consumedCapacity=consumed)],
        )
    )
    summary = pool["shareableSummary"]
    assert (summary["fullyAvailableDevices"], summary["partiallyAvailableDevices"]) == (0, 1), case
    assert [(c["name"], c["total"], c["consumed"], c["available"]) for c in summary["capacity"]] == want


def test_consumption_of_several_shares_adds_up() -> None:
    device = {"name": "d", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "40Gi"}}}
    shares = [
        allocation("pool-0", "d", driver=GPU, shareID=f"s{i}", consumedCapacity={"memory": "15Gi"})
        for i in range(3)
    ]
    pool = only_pool(answer(request(GPU), [slice_("s", "pool-0", [device], driver=GPU)], shares))
    assert pool["allocatedDevices"] == 1
    assert pool["shareableSummary"]["capacity"] == [
        {"name": "memory", "total": "40Gi", "consumed": "45Gi", "available": "0"}
    ]


def test_a_quantity_that_does_not_parse_is_an_error_for_the_caller() -> None:
    # The controller answers Failed with this message (input the API server would not have accepted).
    device = {"name": "d", "allowMultipleAllocations": True, "capacity": {"memory": {"value": "lots"}}}
    with pytest.raises(ValueError, match="lots"):
        compute_status(request(GPU), [slice_("s", "pool-0", [device], driver=GPU)], [], [], NOW)
