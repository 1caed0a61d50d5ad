"""``draflow status``'s pool-status section: formatting the allocator's ResourcePoolStatusRequest answers."""

from __future__ import annotations

from typing import Any

from draflow_cli.poolstatus import format_answers

COMPLETE = [{"type": "Complete", "status": "True", "reason": "CalculationComplete", "message": "m"}]


def answer(*pools: dict[str, Any], pool_count: int | None = None) -> dict[str, Any]:
    return {"poolCount": len(pools) if pool_count is None else pool_count, "pools": list(pools),
            "conditions": COMPLETE}


def test_rows_details_and_notes() -> None:
    text = format_answers({
        "gpu.example.com": answer(
            {"driver": "gpu.example.com", "poolName": "node-a", "generation": 1, "nodeName": "node-a",
             "resourceSliceCount": 2, "totalDevices": 4, "allocatedDevices": 1, "availableDevices": 2,
             "unavailableDevices": 1,
             "partitionSummary": [{"attribute": "gpu.example.com/profile", "type": "Full", "total": 1,
                                   "allocatable": 0},
                                  {"attribute": "gpu.example.com/profile", "type": "Half", "total": 2,
                                   "allocatable": 1}],
             "shareableSummary": {"fullyAvailableDevices": 0, "partiallyAvailableDevices": 1, "capacity": [
                 {"name": "memory", "total": "40Gi", "consumed": "10Gi", "available": "30Gi"}]}},
            {"driver": "gpu.example.com", "poolName": "rolling", "generation": 3,
             "validationError": "PoolIncomplete: pool gpu.example.com/rolling is incomplete"},
            pool_count=3),
        "nic.example.com": None,
        "bad.example.com": {"poolCount": 0, "conditions": [{"type": "Failed", "message": "bad quantity"}]},
    }, 5.0)
    rows = [line.split() for line in text.splitlines() if line.startswith("gpu.example.com ")]
    assert rows == [["gpu.example.com", "node-a", "node-a", "2", "4", "1", "1", "2"],
                    ["gpu.example.com", "rolling", "-", "-", "-", "-", "-", "-"]]
    assert "node-a: partitions by gpu.example.com/profile (allocatable/total): Full 0/1, Half 1/2" in text
    assert "node-a: shareable devices 0 fully, 1 partially available; memory 10Gi/40Gi consumed, " \
           "30Gi available" in text
    assert "rolling: PoolIncomplete: pool gpu.example.com/rolling is incomplete" in text
    assert "gpu.example.com: 2 of 3 pools shown" in text
    assert "nic.example.com: no answer within 5s" in text
    assert "bad.example.com: failed: bad quantity" in text


def test_nothing_answered_prints_only_the_notes() -> None:
    assert format_answers({"d": None}, 1.5) == (
        "d: no answer within 1.5s (is the structured-allocator running, with DRAResourcePoolStatus on?)")
