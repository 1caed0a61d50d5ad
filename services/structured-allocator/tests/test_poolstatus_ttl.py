"""Expiry of ResourcePoolStatusRequests: upstream's TestShouldDeleteRequest / TestIsOlderThan cases
(Kubernetes v1.37.1) in our words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from structured_allocator.poolstatus_controller import rfc3339, should_delete

NOW = datetime(2026, 11, 24, 16, 0, tzinfo=UTC)


def req(
    created: timedelta | None, answered: timedelta | None = None, *, condition: str = "Complete"
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "r"}
    if created is not None:
        meta["creationTimestamp"] = rfc3339(NOW - created)
    body: dict[str, Any] = {"metadata": meta, "spec": {"driver": "test.example.com"}}
    if answered is not None:
        body["status"] = {
            "poolCount": 0,
            "conditions": [
                {
                    "type": condition,
                    "status": "True",
                    "lastTransitionTime": rfc3339(NOW - answered),
                    "reason": "CalculationComplete",
                    "message": "Calculated status for 0 pools",
                }
            ],
        }
    return body


@pytest.mark.parametrize(
    ("case", "request_", "want"),
    [
        ("completed, not expired", req(timedelta(0), timedelta(0)), False),
        ("completed an hour and a minute ago", req(timedelta(hours=2), timedelta(minutes=61)), True),
        (
            "completed 59 minutes ago, created long before",
            req(timedelta(hours=30), timedelta(minutes=59)),
            False,
        ),
        ("failed two hours ago", req(timedelta(hours=2), timedelta(hours=2), condition="Failed"), True),
        (
            "status without Complete/Failed: the creation time counts",
            req(timedelta(hours=2), timedelta(0), condition="Other"),
            True,
        ),
        ("pending, not expired", req(timedelta(hours=23)), False),
        ("pending for 25 hours", req(timedelta(hours=25)), True),
        ("unknown creation time never expires", req(None), False),
    ],
)
def test_should_delete(case: str, request_: dict[str, Any], want: bool) -> None:
    assert should_delete(request_, NOW) is want, case
