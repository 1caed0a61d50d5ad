"""Consumable capacity (DRAConsumableCapacity): how much of each capacity an allocation consumes,
request-policy rounding and validation, and the "fits in what is left" check — as upstream
``consumable_capacity.go``.

* consumed = the request, else ``requestPolicy.default``, else the full capacity value;
* rounding: below ``validRange.min`` → min; else up to ``min + n*step`` (BinarySI result); else up to
  the next ``validValues`` entry;
* a consumed value violating ``max``, the step or the valid values makes the device ineligible
  (a value equal to ``default`` never violates);
* allocated + allocating + consumed must stay ≤ the capacity value, for every capacity of the device.

The step arithmetic is exact (upstream rounds quantities to integers first; identical for integer
capacities, which is what the v1 API allows without DRAFractionalCapacityRange).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from .pools import CapacityInfo, PreparedDevice
from .quantity import BINARY_SI, Quantity

__all__ = ["consumed_capacity", "fits_capacity"]


def _round_up(requested: Quantity, cap: CapacityInfo) -> Quantity:
    if cap.has_range and cap.range_min is not None:
        if requested.value < cap.range_min.value:
            return cap.range_min
        if cap.range_step is None:
            return requested
        step = cap.range_step.value
        n = math.ceil((requested.value - cap.range_min.value) / step)
        return Quantity(cap.range_min.value + step * n, BINARY_SI)
    if cap.valid_values:
        for v in cap.valid_values:
            if requested.value <= v.value:
                return v
    return requested


def _calculate(requested: Quantity | None, cap: CapacityInfo) -> Quantity:
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if not (cap.default or cap.valid_values or cap.has_range):
        return requested
    return _round_up(requested, cap)


def _violates(consumed: Quantity, cap: CapacityInfo) -> bool:
    if not (cap.default or cap.valid_values or cap.has_range):
        return False
    if cap.default is not None and consumed.value == cap.default.value:
        return False
    if cap.has_range:
        if cap.range_max is not None and consumed.value > cap.range_max.value:
            return True
        if cap.range_step is not None:
            base = cap.range_min.value if cap.range_min is not None else Fraction(0)
            if (consumed.value - base) % cap.range_step.value != 0:
                return True
        return False
    if cap.valid_values:
        return all(consumed.value != v.value for v in cap.valid_values)
    return False


def consumed_capacity(requests: Mapping[str, Quantity], device: PreparedDevice) -> dict[str, Quantity]:
    """What one allocation of ``device`` consumes, for every capacity of the device."""
    return {name: _calculate(requests.get(name), cap) for name, cap in device.capacity.items()}


def fits_capacity(
    requests: Mapping[str, Quantity],
    device: PreparedDevice,
    allocated: Mapping[str, Fraction] | None,
    allocating: Mapping[str, Fraction] | None,
) -> bool | None:
    """True if one more allocation fits; False if not; None if the request names a capacity the
    device does not have (upstream: an error that skips the device)."""
    for name in requests:
        if name not in device.capacity:
            return None
    for name, cap in device.capacity.items():
        consumed = _calculate(requests.get(name), cap)
        if _violates(consumed, cap):
            return False
        total = consumed.value
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > cap.value.value:
            return False
    return True
