"""ResourcePoolStatusRequest answers (DRAResourcePoolStatus): the cases of upstream's
``resourcepoolstatusrequest`` controller_test.go (Kubernetes v1.37.1) in our words, plus the exact
status shape (conditions, sorting, limit)."""

from __future__ import annotations

from typing import Any

import pytest
from poolstatus_builders import DRIVER, NOW, allocation, answer, only_pool, request, slice_

from structured_allocator.poolstatus import compute_status, failed_status
from structured_allocator.poolstatus_views import PREFIX_POOL_INCOMPLETE

# ----------------------------------------------------------------------------- TestCalculatePoolStatus


@pytest.mark.parametrize(
    ("case", "req", "slices", "allocs", "pools", "total", "allocated"),
    [
        ("single-pool-no-allocations", request(), [slice_("slice-1", "pool-1", 4)], [], 1, 4, 0),
        (
            "single-pool-with-allocations",
            request(),
            [slice_("slice-1", "pool-1", 4)],
            [allocation("pool-1", "device-0"), allocation("pool-1", "device-1")],
            1,
            4,
            2,
        ),
        (
            "multiple-pools",
            request(),
            [slice_("slice-1", "pool-1", 4), slice_("slice-2", "pool-2", 8, node="node-2")],
            [],
            2,
            12,
            0,
        ),
        (
            "filter-by-driver",
            request(),
            [slice_("slice-1", "pool-1", 4), slice_("slice-2", "pool-2", 8, driver="other.example.com")],
            [],
            1,
            4,
            0,
        ),
        (
            "filter-by-pool-name",
            request(poolName="pool-1"),
            [slice_("slice-1", "pool-1", 4), slice_("slice-2", "pool-2", 8)],
            [],
            1,
            4,
            0,
        ),
        (
            "multiple-slices-same-pool",
            request(),
            [slice_("slice-1", "pool-1", 4, count=2), slice_("slice-2", "pool-1", 4, count=2)],
            [],
            1,
            8,
            0,
        ),
        (
            "no-matching-pools",
            request("nonexistent.example.com"),
            [slice_("slice-1", "pool-1", 4)],
            [],
            0,
            0,
            0,
        ),
        (
            "older-generation-slices-ignored",
            request(),
            [
                slice_("slice-old", "pool-1", 8, generation=1),
                slice_("slice-new-1", "pool-1", 4, generation=2, count=2),
                slice_("slice-new-2", "pool-1", 4, generation=2, count=2),
            ],
            [],
            1,
            8,
            0,
        ),
    ],
)
def test_pool_counts(
    case: str,
    req: dict[str, Any],
    slices: list[dict[str, Any]],
    allocs: list[dict[str, Any]],
    pools: int,
    total: int,
    allocated: int,
) -> None:
    status = answer(req, slices, allocs)
    got = status.get("pools") or []
    assert len(got) == pools, case
    assert status["poolCount"] == pools
    assert sum(p["totalDevices"] for p in got) == total
    assert sum(p["allocatedDevices"] for p in got) == allocated
    assert [c["type"] for c in status["conditions"]] == ["Complete"]


@pytest.mark.parametrize("old_first", [True, False])
def test_a_pool_of_a_newer_generation_reports_that_generation(old_first: bool) -> None:
    old, new = slice_("old", "pool-1", 8, generation=1), slice_("new", "pool-1", 2, generation=3)
    pool = only_pool(answer(request(), [old, new] if old_first else [new, old]))
    assert (pool["generation"], pool["totalDevices"], pool["resourceSliceCount"]) == (3, 2, 1)


def test_limit_truncates_and_pool_count_says_how_many_matched() -> None:
    status = answer(request(limit=1), [slice_("slice-2", "pool-2", 8), slice_("slice-1", "pool-1", 4)])
    assert status["poolCount"] == 2
    assert [p["poolName"] for p in status["pools"]] == ["pool-1"]  # sorted before truncation
    assert status["conditions"][0]["message"] == "Calculated status for 1 pools"


def test_default_limit_is_100() -> None:
    slices = [slice_(f"s-{i:03}", f"pool-{i:03}", 1) for i in range(101)]
    status = answer(request(), slices)
    assert (status["poolCount"], len(status["pools"]), status["pools"][-1]["poolName"]) == (
        101,
        100,
        "pool-099",
    )


def test_incomplete_pool_has_a_validation_error_and_no_counts() -> None:
    result = compute_status(
        request(), [slice_(f"slice-{i}", "pool-1", 4, count=5) for i in range(3)], [], [], NOW
    )
    pool = only_pool(result.status)
    assert result.incomplete
    assert pool["validationError"] == (
        f"{PREFIX_POOL_INCOMPLETE} pool {DRIVER}/pool-1 is incomplete: observed 3/5 slices at generation 1"
    )
    assert not {
        "totalDevices",
        "allocatedDevices",
        "availableDevices",
        "unavailableDevices",
        "resourceSliceCount",
    } & set(pool)


def test_mix_of_complete_and_incomplete_pools() -> None:
    result = compute_status(
        request(),
        [
            slice_("slice-1", "pool-1", 4, count=1),
            slice_("slice-2a", "pool-2", 4, count=3, node="node-2"),
            slice_("slice-2b", "pool-2", 4, count=3, node="node-2"),
        ],
        [],
        [],
        NOW,
    )
    pools = result.status["pools"]
    assert result.incomplete
    assert [("validationError" in p, p.get("totalDevices")) for p in pools] == [(False, 4), (True, None)]
    assert result.status["conditions"][0]["message"] == "Calculated status for 2 pools (1 incomplete)"


def test_an_incomplete_pool_cut_off_by_the_limit_does_not_hold_the_answer() -> None:
    result = compute_status(
        request(limit=1), [slice_("a", "pool-1", 1), slice_("b", "pool-2", 1, count=2)], [], [], NOW
    )
    assert not result.incomplete and result.status["poolCount"] == 2


def test_all_pools_complete_no_validation_errors() -> None:
    result = compute_status(
        request(),
        [slice_("slice-1a", "pool-1", 4, count=2), slice_("slice-1b", "pool-1", 4, count=2)],
        [],
        [],
        NOW,
    )
    assert not result.incomplete
    assert "validationError" not in only_pool(result.status)
    assert only_pool(result.status)["totalDevices"] == 8


@pytest.mark.parametrize(
    ("nodes", "want"),
    [
        (["node-1", "node-1"], "node-1"),  # same-node-pool-sets-nodename
        (["node-1", "node-2"], None),  # mixed-node-pool-clears-nodename
        ([None, None], None),  # nil-nodename-slices-no-nodename
        ([None, "node-1"], None),
    ],
)
def test_node_name_only_when_every_slice_names_the_same_node(
    nodes: list[str | None], want: str | None
) -> None:
    pool = only_pool(
        answer(
            request(),
            [
                slice_(f"s{i}", "pool-1", 4, node=n, count=2, **({} if n else {"allNodes": True}))
                for i, n in enumerate(nodes)
            ],
        )
    )
    assert pool.get("nodeName") == want


def test_status_shape() -> None:
    status = answer(request(), [slice_("s", "pool-1", 2)], [allocation("pool-1", "device-1")])
    assert status == {
        "poolCount": 1,
        "pools": [
            {
                "driver": DRIVER,
                "poolName": "pool-1",
                "generation": 1,
                "nodeName": "node-1",
                "resourceSliceCount": 1,
                "totalDevices": 2,
                "allocatedDevices": 1,
                "availableDevices": 1,
                "unavailableDevices": 0,
            }
        ],
        "conditions": [
            {
                "type": "Complete",
                "status": "True",
                "lastTransitionTime": NOW,
                "reason": "CalculationComplete",
                "message": "Calculated status for 1 pools",
            }
        ],
    }


def test_no_pools_omits_the_list() -> None:
    status = answer(request("nonexistent.example.com"), [slice_("s", "pool-1", 2)])
    assert status["poolCount"] == 0 and "pools" not in status
    assert status["conditions"][0]["message"] == "Calculated status for 0 pools"


def test_pools_are_sorted_by_name() -> None:
    pools = ("pool-b", "pool-a/x", "pool-c", "pool-a")  # slice names s-0.. in this order
    status = answer(request(), [slice_(f"s-{i}", n, 1) for i, n in enumerate(pools)])
    assert [p["poolName"] for p in status["pools"]] == ["pool-a", "pool-a/x", "pool-b", "pool-c"]


def test_failed_status() -> None:
    assert failed_status("bad quantity", NOW) == {
        "poolCount": 0,
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "lastTransitionTime": NOW,
                "reason": "CalculationFailed",
                "message": "bad quantity",
            }
        ],
    }


# ---------------------------------------------------------------------- TestCalculatePoolStatus_DeviceCounts


def tainted(effect: str) -> list[dict[str, Any]]:
    devices = [{"name": f"device-{i}"} for i in range(5)]
    for d in devices[:2]:
        d["taints"] = [{"key": "example.com/maintenance", "effect": effect}]
    return [slice_("slice-1", "pool-1", devices)]


RULE = {
    "metadata": {"name": "rule-1"},
    "spec": {
        "deviceSelector": {"driver": DRIVER, "pool": "pool-1", "device": "device-0"},
        "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"},
    },
}


@pytest.mark.parametrize(
    ("case", "slices", "allocs", "rules", "want"),
    [
        (
            "repeated claims on one device count once",
            [slice_("slice-1", "pool-1", 4)],
            [allocation("pool-1", "device-0")] * 3,
            [],
            (4, 1, 3, 0),
        ),
        (
            "adminAccess claim is not an allocation",
            [slice_("slice-1", "pool-1", 4)],
            [allocation("pool-1", "device-0"), allocation("pool-1", "device-1", adminAccess=True)],
            [],
            (4, 1, 3, 0),
        ),
        ("noSchedule taint is unavailable", tainted("NoSchedule"), [], [], (5, 0, 3, 2)),
        ("noExecute taint is unavailable", tainted("NoExecute"), [], [], (5, 0, 3, 2)),
        ("none taint is available", tainted("None"), [], [], (5, 0, 5, 0)),
        (
            "taint rule applies (DRADeviceTaintRules on: the caller passes the rules)",
            [slice_("slice-1", "pool-1", 4)],
            [],
            [RULE],
            (4, 0, 3, 1),
        ),
        (
            "taint rule ignored (DRADeviceTaintRules off: no rules passed)",
            [slice_("slice-1", "pool-1", 4)],
            [],
            [],
            (4, 0, 4, 0),
        ),
        (
            "a rule without a selector selects nothing",
            [slice_("slice-1", "pool-1", 4)],
            [],
            [{"spec": {"taint": {"key": "k", "effect": "NoExecute"}}}],
            (4, 0, 4, 0),
        ),
        (
            "a rule with an empty selector selects every device",
            [slice_("slice-1", "pool-1", 4)],
            [],
            [{"spec": {"deviceSelector": {}, "taint": {"key": "k", "effect": "NoExecute"}}}],
            (4, 0, 0, 4),
        ),
        (
            "a rule of another pool does not count",
            [slice_("slice-1", "pool-1", 4)],
            [],
            [{"spec": {"deviceSelector": {"pool": "pool-2"}, "taint": {"key": "k", "effect": "NoExecute"}}}],
            (4, 0, 4, 0),
        ),
        (
            "an allocated tainted device is subtracted twice, never below zero",
            tainted("NoSchedule"),
            [allocation("pool-1", f"device-{i}") for i in range(4)],
            [],
            (5, 4, 0, 2),
        ),
        (
            "other drivers' allocations do not count",
            [slice_("slice-1", "pool-1", 4)],
            [allocation("pool-1", "device-0", driver="other.example.com")],
            [],
            (4, 0, 4, 0),
        ),
    ],
)
def test_device_counts(
    case: str,
    slices: list[dict[str, Any]],
    allocs: list[dict[str, Any]],
    rules: list[dict[str, Any]],
    want: tuple[int, int, int, int],
) -> None:
    pool = only_pool(answer(request(), slices, allocs, rules))
    got = (
        pool["totalDevices"],
        pool["allocatedDevices"],
        pool["availableDevices"],
        pool["unavailableDevices"],
    )
    assert got == want, case
