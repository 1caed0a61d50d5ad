"""Consumable capacity arithmetic (core/capacity.py) against the edge cases of upstream's
consumable_capacity_test.go (incubating, v0.37.1): defaults, rounding, the int64 / milli-unit
boundaries and which values violate a request policy."""

from __future__ import annotations

from typing import Any

import pytest

from structured_allocator.core.capacity import CapacityValueError, consumed_capacity, fits_capacity
from structured_allocator.core.pools import PreparedDevice
from structured_allocator.core.quantity import parse_quantity

MAX = str(2**63 - 1)


def device(value: str, **policy: Any) -> PreparedDevice:
    cap: dict[str, Any] = {"value": value}
    if policy:
        rng = {k: policy.pop(k) for k in ("min", "max", "step") if k in policy}
        if rng:
            policy["validRange"] = rng
        cap["requestPolicy"] = policy
    return PreparedDevice("d", "p", {"name": "x", "capacity": {"c": cap}})


def consumed(request: str | None, dev: PreparedDevice, fractional: bool = True) -> str:
    requests = {"c": parse_quantity(request)} if request is not None else {}
    return consumed_capacity(requests, dev, fractional)["c"].canonical()


@pytest.mark.parametrize(
    ("request_", "dev", "fractional", "expected"),
    [
        pytest.param(None, device("1"), True, "1", id="no-request-no-policy-takes-all"),
        pytest.param(None, device("2", default="1", min="1"), True, "1", id="no-request-takes-default"),
        pytest.param("2", device("2", default="1", min="1"), True, "2", id="above-min-unchanged"),
        pytest.param("1", device("2", default="1", min="2"), True, "2", id="below-min-rounds-to-min"),
        pytest.param("2", device("3", default="1", min="1", step="2"), True, "3", id="rounds-up-to-step"),
        pytest.param("2", device("2", default="1", min="1", step="1"), True, "2", id="on-step-unchanged"),
        pytest.param(
            "250m",
            device("1", default="200m", min="200m", max="1", step="100m"),
            True,
            "300m",
            id="milli-round-up",
        ),
        pytest.param(
            "400m",
            device("1", default="200m", min="200m", max="1", step="100m"),
            True,
            "400m",
            id="milli-aligned",
        ),
        pytest.param(
            "200m",
            device("1", default="200m", min="200m", max="1", step="100m"),
            False,
            "1",
            id="gate-off-integers",
        ),
        pytest.param(
            str(2**63 - 2),
            device(MAX, default="1", min="1", step="2"),
            False,
            MAX,
            id="rounds-exactly-to-maxint64",
        ),
        pytest.param("2", device("3", default="1", validValues=["1", "2", "3"]), True, "2", id="valid-value"),
        pytest.param(
            "2", device("3", default="1", validValues=["1", "3"]), True, "3", id="valid-values-round-up"
        ),
        pytest.param(
            "3",
            device("3", default="1", validValues=["1", "2"]),
            True,
            "3",
            id="above-valid-values-unchanged",
        ),
    ],
)
def test_consumed_value(request_: str | None, dev: PreparedDevice, fractional: bool, expected: str) -> None:
    assert consumed(request_, dev, fractional) == expected


@pytest.mark.parametrize(
    ("request_", "dev", "fractional", "message"),
    [
        pytest.param(
            str(2**64 + 3),
            device(str(2**64 + 3), default="0", min="0", step="3"),
            False,
            "exceeds MaxInt64",
            id="above-int64",
        ),
        pytest.param(
            MAX,
            device(str(2**63), default="0", min="0", step="2"),
            False,
            "passes MaxInt64",
            id="rounded-above-int64",
        ),
        pytest.param(
            "250500u",
            device("1", default="200m", min="200m", step="100m"),
            True,
            "not a representable milli",
            id="not-milli",
        ),
        pytest.param(
            "9223372036854775",
            device(MAX, default="0", min="0", step="3"),
            True,
            "milli-value range",
            id="rounded-past-milli-range",
        ),
        pytest.param("-5", device("10"), True, "negative", id="negative-request"),
        pytest.param(None, device("-1"), True, "negative", id="negative-device-capacity"),
    ],
)
def test_fail_closed(request_: str | None, dev: PreparedDevice, fractional: bool, message: str) -> None:
    requests = {"c": parse_quantity(request_)} if request_ is not None else {}
    with pytest.raises(CapacityValueError) as info:
        fits_capacity(requests, dev, None, None, fractional)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("request_", "dev", "fits"),
    [
        pytest.param("1", device("100", default="1", min="1", max="2"), True, id="below-max"),
        pytest.param("2", device("100", default="1", min="1", max="1"), False, id="above-max"),
        pytest.param("1", device("100", default="1", validValues=["1"]), True, id="in-valid-values"),
        pytest.param(
            "300m", device("100", default="200m", min="200m", max="1", step="100m"), True, id="milli-aligned"
        ),
        pytest.param("3", device("2"), False, id="more-than-the-device-has"),
        pytest.param("2", device("2"), True, id="exactly-what-the-device-has"),
    ],
)
def test_policy_and_capacity(request_: str, dev: PreparedDevice, fits: bool) -> None:
    assert fits_capacity({"c": parse_quantity(request_)}, dev, None, None, True) is fits


def test_capacity_the_device_lacks_skips_it() -> None:
    assert fits_capacity({"other": parse_quantity("1")}, device("1"), None, None, True) is None


def test_unrepresentable_wins_over_a_soft_mismatch_whatever_the_order() -> None:
    """Every capacity is resolved before any soft check: the outcome never depends on dict order."""
    raw = {
        "name": "x",
        "capacity": {
            "small": {"value": "1"},
            "huge": {
                "value": "1",
                "requestPolicy": {"default": "0", "validRange": {"min": "0", "step": "3"}},
            },
        },
    }
    dev = PreparedDevice("d", "p", raw)
    requests = {"small": parse_quantity("2"), "huge": parse_quantity(str(2**64))}
    with pytest.raises(CapacityValueError):
        fits_capacity(requests, dev, None, None, True)
