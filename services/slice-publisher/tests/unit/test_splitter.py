"""Table tests of the pure slice splitter."""

from __future__ import annotations

import pytest

from slice_publisher.splitter import (
    DesiredPool,
    InvalidPool,
    split_devices,
    split_pool,
    uses_advanced_features,
)


def devs(n: int, **extra: object) -> tuple[dict, ...]:
    return tuple({"name": f"gpu-{i}", **extra} for i in range(n))


def pool(devices=(), counters=(), placement=None) -> DesiredPool:
    return DesiredPool(
        "gpu.example.com",
        "node-a",
        "node-a",
        placement or {"nodeName": "node-a"},
        tuple(devices),
        tuple(counters),
    )


def sizes(contents: list[dict]) -> list[tuple[str, int]]:
    return [(next(iter(c)), len(next(iter(c.values())))) for c in contents]


@pytest.mark.parametrize(
    ("name", "devices", "reserve", "want"),
    [
        ("empty pool is one empty slice", (), False, [("devices", 0)]),
        ("8 plain devices fit one slice", devs(8), False, [("devices", 8)]),
        ("exactly 128 plain devices", devs(128), False, [("devices", 128)]),
        ("200 plain devices: 128 + 72", devs(200), False, [("devices", 128), ("devices", 72)]),
        (
            "200 tainted devices: 64s",
            devs(200, taints=[{"key": "k", "effect": "NoSchedule"}]),
            False,
            [("devices", 64)] * 3 + [("devices", 8)],
        ),
        (
            "200 plain devices with taint room reserved",
            devs(200),
            True,
            [("devices", 64)] * 3 + [("devices", 8)],
        ),
        (
            "list attribute lowers the limit",
            devs(100, attributes={"a": {"ints": [1]}}),
            False,
            [("devices", 64), ("devices", 36)],
        ),
    ],
)
def test_split_sizes(name, devices, reserve, want):
    assert sizes(split_pool(pool(devices), reserve_for_taints=reserve)) == want, name


def test_one_advanced_device_caps_its_slice_only():
    devices = list(devs(200))
    devices[150] = {**devices[150], "taints": [{"key": "k", "effect": "NoSchedule"}]}
    chunks = split_devices(devices, reserve_for_taints=False)
    assert [len(c) for c in chunks] == [128, 64, 8]
    assert all(len(c) <= 64 for c in chunks if any(uses_advanced_features(d) for d in c))


def test_split_keeps_driver_order_and_every_device_once():
    devices = devs(300)
    contents = split_pool(pool(devices), reserve_for_taints=False)
    flat = [d["name"] for c in contents for d in c["devices"]]
    assert flat == [d["name"] for d in devices]


def test_shared_counters_get_their_own_slices_first():
    counters = [{"name": f"cs-{i}", "counters": {"mem": {"value": "1Gi"}}} for i in range(10)]
    devices = [
        {"name": "gpu-0", "consumesCounters": [{"counterSet": "cs-0", "counters": {"mem": {"value": "1Gi"}}}]}
    ]
    contents = split_pool(pool(devices, counters))
    assert sizes(contents) == [("sharedCounters", 8), ("sharedCounters", 2), ("devices", 1)]


@pytest.mark.parametrize(
    ("name", "p", "problem"),
    [
        ("duplicate device", pool([{"name": "a"}, {"name": "a"}]), "duplicate device"),
        (
            "dangling counter set",
            pool([{"name": "a", "consumesCounters": [{"counterSet": "x", "counters": {}}]}]),
            "unknown counter set",
        ),
        (
            "unknown counter",
            pool(
                [{"name": "a", "consumesCounters": [{"counterSet": "x", "counters": {"c": {}}}]}],
                [{"name": "x", "counters": {"m": {"value": "1"}}}],
            ),
            "unknown counters",
        ),
        ("no placement", pool(placement={"nodeName": ""}), "placement"),
        ("two placements", pool(placement={"nodeName": "a", "allNodes": True}), "placement"),
    ],
)
def test_invalid_pools_are_rejected(name, p, problem):
    with pytest.raises(InvalidPool) as err:
        split_pool(p)
    assert any(problem in msg for msg in err.value.problems), name
