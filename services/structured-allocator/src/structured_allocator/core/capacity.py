"""Consumable capacity (DRAConsumableCapacity): how much of each capacity an allocation consumes,
request-policy rounding and validation, and the "fits in what is left" check — as upstream
``consumable_capacity.go`` (incubating, v0.37).

* consumed = the request, else ``requestPolicy.default``, else the full capacity value;
* rounding: below ``validRange.min`` → min; else up to ``min + n*step``; else up to the next
  ``validValues`` entry;
* a consumed value violating ``max``, the step or the valid values makes the device ineligible
  (a value equal to ``default`` never violates);
* allocated + allocating + consumed must stay ≤ the capacity value, for every capacity of the device;
* a request naming a capacity the device does not have skips the device (``None``).

Fail closed, as upstream: a consumed value that is negative (old stored objects can carry one) or a
request that cannot be represented in the range arithmetic (past ``MaxInt64`` on the integer path,
not exactly representable in int64 milli-units on the fractional path) raises
:class:`CapacityValueError` — broken input, never "does not fit" and never a charge.

Range arithmetic (step rounding and the step check) runs like upstream's: on milli-units when
DRAFractionalCapacityRange is on and min/max/step are all representable in int64 milli-units with a
step of at least ``1m``; otherwise on integers after rounding every value up (``Quantity.Value()``).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Literal

from .pools import CapacityInfo, PreparedDevice
from .quantity import Quantity, nano_units

__all__ = [
    "CapacityValueError",
    "Needs",
    "capacity_needs",
    "consumed_capacity",
    "fits_capacity",
    "fits_in_use",
]

MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)


class CapacityValueError(ValueError):
    """A capacity value the allocator must not act on (negative or not representable)."""

    def __init__(self, capacity: str, message: str) -> None:
        super().__init__(f"capacity {capacity!r}: {message}")
        self.capacity = capacity


class _NotRepresentable(Exception):
    pass


def _milli(q: Quantity) -> int | None:
    """``safeMilliValue``: the value in milli-units if that is exact and fits int64."""
    m = q.value * 1000
    if m.denominator != 1 or not MIN_INT64 <= m.numerator <= MAX_INT64:
        return None
    return m.numerator


def _use_milli(cap: CapacityInfo, fractional: bool) -> bool:
    if not fractional:
        return False
    for q in (cap.range_min, cap.range_max, cap.range_step):
        if q is not None and _milli(q) is None:
            return False
    step = _milli(cap.range_step) if cap.range_step is not None else None
    return step is None or step >= 1


def _round_up_range(requested: Quantity, cap: CapacityInfo, fractional: bool) -> Quantity:
    assert cap.range_min is not None
    if requested.value < cap.range_min.value:
        return cap.range_min
    step_q = cap.range_step
    if step_q is None:
        return requested
    if _use_milli(cap, fractional):
        req_m = _milli(requested)
        if req_m is None:
            raise _NotRepresentable(f"request {requested} is not a representable milli value")
        step_m, min_m = _milli(step_q), _milli(cap.range_min)
        assert step_m is not None and min_m is not None
        n = -(-(req_m - min_m) // step_m)
        if n > (MAX_INT64 - min_m) // step_m:
            raise _NotRepresentable(
                f"rounding request {requested} up to the next step passes the milli-value range"
            )
        return Quantity(Fraction(min_m + step_m * n, 1000), step_q.format)
    if requested.value > MAX_INT64:
        raise _NotRepresentable(f"request {requested} exceeds MaxInt64")
    req_i, step_i, min_i = requested.ceil_int(), step_q.ceil_int(), cap.range_min.ceil_int()
    if step_i <= 0:
        raise _NotRepresentable(f"step {step_q} is not positive")
    n = -(-(req_i - min_i) // step_i)
    if min_i >= 0 and n > (MAX_INT64 - min_i) // step_i:
        raise _NotRepresentable(f"rounding request {requested} up to the next step passes MaxInt64")
    return Quantity(Fraction(min_i + step_i * n), step_q.format)


def _has_policy(cap: CapacityInfo) -> bool:
    return bool(cap.default or cap.valid_values or cap.has_range)


def _calculate(requested: Quantity | None, cap: CapacityInfo, fractional: bool) -> Quantity:
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if not _has_policy(cap):
        return requested
    if cap.has_range and cap.range_min is not None:
        return _round_up_range(requested, cap, fractional)
    if cap.valid_values:
        for v in cap.valid_values:
            if requested.value <= v.value:
                return v
    return requested


def _violates(consumed: Quantity, cap: CapacityInfo, fractional: bool) -> bool:
    if not _has_policy(cap):
        return False
    if cap.default is not None and consumed.value == cap.default.value:
        return False
    if cap.has_range:
        if cap.range_max is not None and consumed.value > cap.range_max.value:
            return True
        if cap.range_step is not None:
            base = cap.range_min if cap.range_min is not None else Quantity(Fraction(0))
            if _use_milli(cap, fractional):
                value = _milli(consumed)
                step, low = _milli(cap.range_step), _milli(base)
                if value is None:
                    return True
            else:
                value, step, low = consumed.ceil_int(), cap.range_step.ceil_int(), base.ceil_int()
            assert step is not None and low is not None
            if step <= 0:
                return True
            return (value - low) % step != 0
        return False
    if cap.valid_values:
        return all(consumed.value != v.value for v in cap.valid_values)
    return False


def _resolve(
    requests: Mapping[str, Quantity], device: PreparedDevice, fractional: bool
) -> dict[str, Quantity]:
    """Consumed value per capacity of the device; raises :class:`CapacityValueError` (all capacities
    are resolved before any soft check, so the outcome never depends on the order)."""
    out: dict[str, Quantity] = {}
    for name, cap in device.capacity.items():
        try:
            consumed = _calculate(requests.get(name), cap, fractional)
        except _NotRepresentable as exc:
            raise CapacityValueError(
                name, f"capacity request cannot be represented in the device's range arithmetic: {exc}"
            ) from None
        if consumed.value < 0:
            raise CapacityValueError(name, "capacity value is negative")
        out[name] = consumed
    return out


def consumed_capacity(
    requests: Mapping[str, Quantity], device: PreparedDevice, fractional: bool = True
) -> dict[str, Quantity]:
    """What one allocation of ``device`` consumes, for every capacity of the device."""
    return _resolve(requests, device, fractional)


Needs = tuple[tuple[str, int, int], ...]  # (capacity, consumed, the device's) in nano units


def capacity_needs(
    requests: Mapping[str, Quantity], device: PreparedDevice, fractional: bool = True
) -> Needs | Literal[False] | None:
    """The part of :func:`fits_capacity` that does not depend on what is in use: None if the request
    names a capacity the device does not have; False if one allocation breaks a capacity's policy;
    else ``(name, consumed, capacity)`` for every capacity of the device in nano units (for
    :func:`fits_in_use`).
    Raises :class:`CapacityValueError` on a negative or unrepresentable value."""
    for name in requests:
        if name not in device.capacity:
            return None
    consumed = _resolve(requests, device, fractional)
    needs = []
    for name, cap in device.capacity.items():
        value = consumed[name]
        if _violates(value, cap, fractional):
            return False
        needs.append((name, nano_units(value.value), nano_units(cap.value.value)))
    return tuple(needs)


def fits_in_use(
    needs: Needs, allocated: Mapping[str, int] | None, allocating: Mapping[str, int] | None
) -> bool:
    """One more allocation of ``needs`` (:func:`capacity_needs`) fits next to what is in use (nano
    units, as :attr:`~.types.AllocatedState.capacity`)."""
    for name, value, cap in needs:
        total = value
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > cap:
            return False
    return True


def fits_capacity(
    requests: Mapping[str, Quantity],
    device: PreparedDevice,
    allocated: Mapping[str, int] | None,
    allocating: Mapping[str, int] | None,
    fractional: bool = True,
) -> bool | None:
    """True if one more allocation fits; False if not; None if the request names a capacity the
    device does not have (skip the device). Raises :class:`CapacityValueError` on a negative or
    unrepresentable value."""
    needs = capacity_needs(requests, device, fractional)
    if needs is None or needs is False:
        return needs
    return fits_in_use(needs, allocated, allocating)
