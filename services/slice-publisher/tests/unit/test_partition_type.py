"""``partitionTypeAttribute`` (DRAPartitionableDevicesType) in the splitter: only on device slices with
counter-consuming devices, checked against the devices, and noticed when the API server drops it."""

from __future__ import annotations

from typing import Any

import pytest

from slice_publisher.splitter import DesiredPool, InvalidPool, partition_type_dropped, split_pool

DRIVER = "gpu.example.com"
ATTR = f"{DRIVER}/partitionType"
COUNTERS = ({"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}},)


def part(name: str, typ: str | None, *, consumes: bool = True) -> dict[str, Any]:
    dev: dict[str, Any] = {"name": name, "attributes": {"partitionType": {"string": typ}} if typ else {}}
    if consumes:
        dev["consumesCounters"] = [
            {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "40Gi"}}}
        ]
    return dev


def pool(devices: list[dict[str, Any]], attr: str = ATTR) -> DesiredPool:
    return DesiredPool(
        DRIVER,
        "node-a",
        "node-a",
        {"nodeName": "node-a"},
        tuple(devices),
        COUNTERS,
        partition_type_attribute=attr,
    )


def test_only_device_slices_with_counter_consuming_devices_carry_it() -> None:
    plain = [part(f"plain-{i}", None, consumes=False) for i in range(64)]
    contents = split_pool(pool([part("half-0", "half"), part("half-1", "half"), *plain]))
    assert [(next(iter(c)), c.get("partitionTypeAttribute")) for c in contents] == [
        ("sharedCounters", None),
        ("devices", ATTR),
        ("devices", None),
    ]


def test_without_the_attribute_nothing_changes() -> None:
    contents = split_pool(pool([part("half-0", "half")], attr=""))
    assert all("partitionTypeAttribute" not in c for c in contents)


def test_the_attribute_may_be_written_fully_qualified_on_the_device() -> None:
    dev = {**part("half-0", None), "attributes": {ATTR: {"string": "half"}}}
    assert split_pool(pool([dev]))[1]["partitionTypeAttribute"] == ATTR


@pytest.mark.parametrize(
    ("case", "device"),
    [
        ("missing", part("half-0", None)),
        ("not a string", {**part("half-0", None), "attributes": {"partitionType": {"int": 2}}}),
    ],
)
def test_a_counter_consuming_device_without_the_attribute_is_refused(
    case: str, device: dict[str, Any]
) -> None:
    with pytest.raises(InvalidPool) as err:
        split_pool(pool([device]))
    assert any("no string attribute" in p and "half-0" in p for p in err.value.problems), case


def test_a_dropped_attribute_is_noticed() -> None:
    sent = [
        {"metadata": {"name": "s-0"}, "spec": {"devices": [], "partitionTypeAttribute": ATTR}},
        {"metadata": {"name": "s-1"}, "spec": {"sharedCounters": []}},
    ]
    kept = {"s-0": {"spec": {"partitionTypeAttribute": ATTR}}, "s-1": {"spec": {}}}
    dropped = {"s-0": {"spec": {"devices": []}}, "s-1": {"spec": {}}}
    assert not partition_type_dropped(sent, kept)
    assert partition_type_dropped(sent, dropped)
    assert not partition_type_dropped(sent, {"s-0": None})  # deleted, not dropped
