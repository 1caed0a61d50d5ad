"""Builders of the ResourcePoolStatusRequest unit tests (slices, allocations, requests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from structured_allocator.poolstatus import compute_status

NOW = "2026-11-24T16:00:00Z"
DRIVER = "test.example.com"


def slice_(
    name: str,
    pool: str,
    devices: int | list[dict[str, Any]],
    *,
    driver: str = DRIVER,
    node: str | None = "node-1",
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    devs = [{"name": f"device-{i}"} for i in range(devices)] if isinstance(devices, int) else devices
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devs,
        **spec,
    }
    if node is not None:
        body["nodeName"] = node
    return {"metadata": {"name": name}, "spec": body}


def allocation(pool: str, device: str, *, driver: str = DRIVER, **result: Any) -> dict[str, Any]:
    return {
        "devices": {"results": [{"request": "r", "driver": driver, "pool": pool, "device": device, **result}]}
    }


def request(driver: str = DRIVER, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "test-request"}, "spec": {"driver": driver, **spec}}


def answer(
    req: dict[str, Any],
    slices: list[dict[str, Any]],
    allocations: Sequence[dict[str, Any]] = (),
    rules: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    return compute_status(req, slices, allocations, rules, NOW).status


def only_pool(status: dict[str, Any]) -> dict[str, Any]:
    assert len(status.get("pools") or []) == 1, status
    return dict(status["pools"][0])
