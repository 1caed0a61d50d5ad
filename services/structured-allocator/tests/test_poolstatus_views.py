"""The partition and shareable views of a pool: upstream's views_test.go (Kubernetes v1.37.1
``resourcepoolstatusrequest``) in our words."""

from __future__ import annotations

from typing import Any

import pytest

from structured_allocator.core import parse_quantity
from structured_allocator.poolstatus_views import (
    PREFIX_PARTITION_COST_MISMATCH,
    PREFIX_PARTITION_SUMMARY_OVER_CAP,
    PREFIX_PARTITION_TYPE_MISSING,
    DeviceRecord,
    PoolViewInput,
    partition_summary,
    pool_views,
    resolve_partition_type,
    resolve_partitions,
    shareable_summary,
)

GPU = "gpu.example.com"
PROFILE = f"{GPU}/profile"


def counters(name: str, **values: str) -> dict[str, Any]:
    return {"name": name, "counters": {k: {"value": v} for k, v in values.items()}}


def consumes(counter_set: str, **values: str) -> dict[str, Any]:
    return {"counterSet": counter_set, "counters": {k: {"value": v} for k, v in values.items()}}


def part(name: str, typ: str, *cost: dict[str, Any]) -> DeviceRecord:
    """A counter-consuming device whose grouping attribute and type are already resolved."""
    return DeviceRecord(name, partition_attr=PROFILE, partition_type=typ, consumes_counters=cost)


def pool(
    devices: list[DeviceRecord],
    shared: list[dict[str, Any]] | None = None,
    in_use: tuple[str, ...] = (),
    consumed: dict[str, str] | None = None,
) -> PoolViewInput:
    return PoolViewInput(
        GPU,
        "pool-0",
        devices,
        shared if shared is not None else [counters("gpu-0", memory="80Gi")],
        frozenset(in_use),
        {k: parse_quantity(v) for k, v in (consumed or {}).items()},
    )


FULL = consumes("gpu-0", memory="80Gi")
HALF = consumes("gpu-0", memory="40Gi")


@pytest.mark.parametrize(
    ("case", "view", "want"),
    [
        (
            "all fresh, each type measured on its own against the whole counter",
            pool([part("full-0", "Full", FULL), part("half-0", "Half", HALF), part("half-1", "Half", HALF)]),
            {"Full": (1, 1), "Half": (2, 2)},
        ),
        (
            "an in-use Full drains the counter for every type",
            pool(
                [part("full-0", "Full", FULL), part("half-0", "Half", HALF), part("half-1", "Half", HALF)],
                in_use=("full-0",),
            ),
            {"Full": (1, 0), "Half": (2, 0)},
        ),
        (
            "the number of unused devices bounds before the counter does",
            pool(
                [part(f"full-{i}", "Full", consumes("gpu-1", memory="80Gi")) for i in range(3)],
                [counters("gpu-1", memory="800Gi")],
            ),
            {"Full": (3, 3)},
        ),
        (
            "a device drawing from two counter sets is bounded by the tighter one",
            pool(
                [
                    part(f"full-{i}", "Full", consumes("mem", memory="80Gi"), consumes("cores", sm="8"))
                    for i in range(2)
                ],
                [counters("mem", memory="160Gi"), counters("cores", sm="8")],
            ),
            {"Full": (2, 1)},
        ),
        (
            "a counter set the pool does not publish never fits",
            pool([part("x-0", "X", consumes("nowhere", memory="1"))]),
            {"X": (1, 0)},
        ),
    ],
)
def test_partition_summary(case: str, view: PoolViewInput, want: dict[str, tuple[int, int]]) -> None:
    got, error = partition_summary(view)
    assert error == "", case
    assert {p["type"]: (p["total"], p["allocatable"]) for p in got or []} == want


@pytest.mark.parametrize(
    ("case", "devices", "prefix"),
    [
        (
            "a counter-consuming device without the attribute's value",
            [
                part("full-0", "Full", FULL),
                DeviceRecord("mystery", partition_attr=PROFILE, consumes_counters=(HALF,)),
            ],
            PREFIX_PARTITION_TYPE_MISSING,
        ),
        (
            "devices of one type with different costs",
            [part("half-0", "Half", HALF), part("half-1", "Half", consumes("gpu-0", memory="50Gi"))],
            PREFIX_PARTITION_COST_MISMATCH,
        ),
        (
            "more than 32 types",
            [part(f"d-{i}", f"T{i:02}", HALF) for i in range(33)],
            PREFIX_PARTITION_SUMMARY_OVER_CAP,
        ),
    ],
)
def test_partition_summary_errors(case: str, devices: list[DeviceRecord], prefix: str) -> None:
    got, error = partition_summary(pool(devices))
    assert got is None and error.startswith(prefix), case


def test_equal_costs_written_differently_are_the_same_cost() -> None:
    # 40Gi == 42949672960: the same cost (compared by value, not by spelling).
    got, error = partition_summary(
        pool([part("h0", "Half", HALF), part("h1", "Half", consumes("gpu-0", memory="42949672960"))])
    )
    assert error == "" and got == [{"attribute": PROFILE, "type": "Half", "total": 2, "allocatable": 2}]


def test_a_device_not_consuming_counters_is_not_a_partition() -> None:
    got, error = partition_summary(
        pool([part("full-0", "Full", FULL), DeviceRecord("plain", partition_attr=PROFILE)])
    )
    assert error == "" and [p["type"] for p in got or []] == ["Full"]


def test_hybrid_device_yields_both_views() -> None:
    device = DeviceRecord(
        "full-0",
        partition_attr=PROFILE,
        partition_type="Full",
        consumes_counters=(FULL,),
        allow_multiple=True,
        capacity={"memory": {"value": "80Gi"}},
    )
    partitions, shareable, error = pool_views(pool([device]))
    assert error == "" and partitions and shareable
    assert shareable["fullyAvailableDevices"] == 1


def test_grouping_attribute_without_counters_is_flagged_and_drops_the_partition_view() -> None:
    partitions, shareable, error = pool_views(pool([part("d0", "Full", FULL)], shared=[]))
    assert partitions is None and shareable is None and error.startswith(PREFIX_PARTITION_TYPE_MISSING)


def test_the_shareable_view_survives_a_partition_error() -> None:
    shareable_device = DeviceRecord("s", allow_multiple=True, capacity={"memory": {"value": "1Gi"}})
    partitions, shareable, error = pool_views(
        pool([DeviceRecord("m", partition_attr=PROFILE, consumes_counters=(HALF,)), shareable_device])
    )
    assert partitions is None and shareable is not None and error.startswith(PREFIX_PARTITION_TYPE_MISSING)


def test_the_partition_view_needs_a_grouping_attribute() -> None:
    typed, _, error = pool_views(pool([part("d0", "Full", FULL)]))
    assert error == "" and typed
    untyped, _, error = pool_views(
        pool([DeviceRecord("d0", consumes_counters=(consumes("gpu-0", memory="10Gi"),))])
    )
    assert error == "" and untyped is None


def test_shareable_summary() -> None:
    devices = [
        DeviceRecord(f"shareable-{i}", allow_multiple=True, capacity={"memory": {"value": "40Gi"}})
        for i in range(2)
    ] + [DeviceRecord("plain")]
    got, error = shareable_summary(pool(devices, in_use=("shareable-0",), consumed={"memory": "10Gi"}))
    assert error == "" and got == {
        "fullyAvailableDevices": 1,
        "partiallyAvailableDevices": 1,
        "capacity": [{"name": "memory", "total": "80Gi", "consumed": "10Gi", "available": "70Gi"}],
    }


def test_shareable_summary_multiple_capacities_sorted_by_name() -> None:
    devices = [
        DeviceRecord(
            f"s-{i}", allow_multiple=True, capacity={"memory": {"value": "40Gi"}, "cores": {"value": "4"}}
        )
        for i in range(2)
    ]
    got, _ = shareable_summary(pool(devices, in_use=("s-0",), consumed={"memory": "10Gi", "cores": "1"}))
    assert got is not None
    assert [(c["name"], c["total"], c["consumed"], c["available"]) for c in got["capacity"]] == [
        ("cores", "8", "1", "7"),
        ("memory", "80Gi", "10Gi", "70Gi"),
    ]


def test_no_shareable_devices_no_summary() -> None:
    assert shareable_summary(pool([DeviceRecord("plain")])) == (None, "")


DEVICE_ATTRS = {PROFILE: {"string": "Full"}, f"{GPU}/shape": {"string": "Small"}}


@pytest.mark.parametrize(
    ("case", "request_attr", "devices", "want"),
    [
        (
            "slice declaration wins over request default",
            f"{GPU}/shape",
            [DeviceRecord("d0", partition_attr=PROFILE, attributes=DEVICE_ATTRS)],
            [(PROFILE, "Full")],
        ),
        (
            "request default fills devices when no slice declares",
            f"{GPU}/shape",
            [DeviceRecord("d0", attributes=DEVICE_ATTRS)],
            [(f"{GPU}/shape", "Small")],
        ),
        (
            "request default ignored when any slice declares",
            f"{GPU}/shape",
            [
                DeviceRecord("d0", partition_attr=PROFILE, attributes=DEVICE_ATTRS),
                DeviceRecord("d1", attributes=DEVICE_ATTRS),
            ],
            [(PROFILE, "Full"), ("", None)],
        ),
        (
            "differing slice attributes are each kept",
            None,
            [
                DeviceRecord("d0", partition_attr=PROFILE, attributes=DEVICE_ATTRS),
                DeviceRecord("d1", partition_attr=f"{GPU}/shape", attributes=DEVICE_ATTRS),
            ],
            [(PROFILE, "Full"), (f"{GPU}/shape", "Small")],
        ),
        (
            "neither slice nor request names one",
            None,
            [DeviceRecord("d0", attributes=DEVICE_ATTRS)],
            [("", None)],
        ),
    ],
)
def test_resolve_partitions(
    case: str, request_attr: str | None, devices: list[DeviceRecord], want: list[tuple[str, str | None]]
) -> None:
    view = pool(devices)
    resolve_partitions(request_attr, view)
    assert [(d.partition_attr, d.partition_type) for d in view.devices] == want, case


def test_resolve_partition_type() -> None:
    attrs = {
        "profile": {"string": "Full"},
        "other.com/x": {"string": "ignore"},
        f"{GPU}/numeric-key": {"int": 3},
    }
    assert resolve_partition_type(GPU, attrs, PROFILE) == "Full"  # bare name in the driver's domain
    assert resolve_partition_type(GPU, attrs, f"{GPU}/numeric-key") is None  # not a string
    assert resolve_partition_type(GPU, attrs, f"{GPU}/missing") is None
    assert resolve_partition_type(GPU, attrs, "other.com/x") == "ignore"
    assert resolve_partition_type("other.com", {"x": {"string": "bare"}}, "third.com/x") is None
    both = {"profile": {"string": "Bare"}, PROFILE: {"string": "Explicit"}}
    assert resolve_partition_type(GPU, both, PROFILE) == "Explicit"
