"""Per-device checks that do not depend on the search state: selectors and taints.

Selector results are memoised on the :class:`PreparedDevice` per expression, so they are computed
once per (device of a slice version, expression) for the life of that slice version — across pods,
nodes and allocators. A runtime error is memoised too and re-raised as :class:`CelSelectorError`
naming the claim, request, class and expression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from draflow_runtime.devicetaints import tolerates  # core/v1 ToleratesTaint; node tolerations match alike

from .cel_env import CelRuntimeError, CompiledSelector
from .pools import PreparedDevice
from .requests import RequestData
from .types import CelSelectorError

__all__ = ["evaluate", "selectable", "taint_blocks", "tolerates"]


class _Failed:
    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def evaluate(sel: CompiledSelector, device: PreparedDevice) -> bool | _Failed:
    """Memoised selector result for one device: bool, or the runtime failure."""
    memo: dict[str, Any] = device.matches
    cached = memo.get(sel.expression)
    if cached is None:
        try:
            cached = sel.matches(device.cel_input())
        except CelRuntimeError as exc:
            cached = _Failed(exc.message)
        except ValueError as exc:  # malformed attribute, e.g. an unparsable version
            cached = _Failed(str(exc))
        memo[sel.expression] = cached
    return cached


def _check(
    selectors: Sequence[CompiledSelector],
    device: PreparedDevice,
    rd: RequestData,
    claim: str,
    from_class: bool,
) -> bool:
    for i, sel in enumerate(selectors):
        result = evaluate(sel, device)
        if isinstance(result, _Failed):
            where = f"class {rd.class_name}" if from_class else f'claim "{claim}"'
            raise CelSelectorError(
                f'claim "{claim}" request "{rd.name}": {where} selector #{i} {sel.expression!r} on device '
                f"{device.id}: CEL runtime error: {result.message}",
                claim=claim,
                request=rd.name,
                expression=sel.expression,
                device_class=rd.class_name if from_class else "",
                device=str(device.id),
                runtime=True,
            )
        if not result:
            return False
    return True


def selectable(rd: RequestData, device: PreparedDevice, claim: str) -> bool:
    """Class selectors, then request selectors (all must be true). Raises on a CEL runtime error."""
    return _check(rd.class_selectors, device, rd, claim, True) and _check(
        rd.selectors, device, rd, claim, False
    )


def taint_blocks(device: PreparedDevice, tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """A NoSchedule/NoExecute taint without a matching toleration blocks the device; other
    effects (None, unknown) are ignored."""
    for taint in device.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            tolerates(t, taint) for t in tolerations
        ):
            return True
    return False
