"""Validating claim requests into :class:`RequestData` (class lookup, selectors compiled, counts).

Mirrors upstream ``validateDeviceRequest``: one entry per request without subrequests and one per
subrequest; ``All`` mode collects every selectable device up front (failing on incomplete or invalid
pools); the minimum number of devices per claim must not exceed 32.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .cel_env import CelCache, CelCompileError, CompiledSelector
from .quantity import Quantity, QuantityError, parse_quantity
from .types import CelSelectorError, Features, InvalidRequestError, UnknownDeviceClassError

__all__ = ["RequestData", "claim_key", "validate_request"]


def claim_key(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else meta.get("name", "")


@dataclass
class RequestData:
    """One request (or one subrequest) of one claim, validated."""

    claim_index: int
    request_index: int
    sub_index: int  # -1 for a request without subrequests
    base_name: str  # the request's name
    sub_name: str  # the subrequest's name, "" if none
    class_name: str
    device_class: Mapping[str, Any]
    class_selectors: list[CompiledSelector]
    selectors: list[CompiledSelector]
    all_mode: bool
    count: int
    admin_access: bool
    tolerations: list[Mapping[str, Any]]
    capacity: dict[str, Quantity]
    all_devices: list[Any] = field(default_factory=list)  # (pool, slice, device) for All mode
    derived: dict[str, str] = field(default_factory=dict)  # derived attribute name -> CEL expression

    @property
    def name(self) -> str:
        return f"{self.base_name}/{self.sub_name}" if self.sub_name else self.base_name

    @property
    def num_devices(self) -> int:
        return len(self.all_devices) if self.all_mode else self.count


def _compile(
    cache: CelCache,
    selectors: list[Mapping[str, Any]],
    *,
    claim: str,
    request: str,
    class_name: str,
    from_class: bool,
) -> list[CompiledSelector]:
    out = []
    for i, sel in enumerate(selectors):
        cel_spec = sel.get("cel")
        where = f"class {class_name}" if from_class else f'claim "{claim}"'
        if not cel_spec or "expression" not in cel_spec:
            raise InvalidRequestError(
                f'{where}, request "{request}", selector #{i}: '
                "CEL expression empty (unsupported selector type?)",
                claim=claim,
                request=request,
            )
        expression = cel_spec["expression"]
        try:
            out.append(cache.get_or_compile(expression))
        except CelCompileError as exc:
            raise CelSelectorError(
                f'claim "{claim}" request "{request}": {where} selector #{i} {expression!r}: '
                f"CEL compile error: {exc.message}",
                claim=claim,
                request=request,
                expression=expression,
                device_class=class_name if from_class else "",
            ) from exc
    return out


def validate_request(
    *,
    claim: str,
    claim_index: int,
    request_index: int,
    sub_index: int,
    base_name: str,
    spec: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    cache: CelCache,
    features: Features,
) -> RequestData:
    """Validate one exact request (``spec`` = ``exactly``) or one subrequest (``spec`` = the entry)."""
    sub_name = spec.get("name", "") if sub_index >= 0 else ""
    full = f"{base_name}/{sub_name}" if sub_name else base_name
    derived = {a.get("name", ""): a.get("expression", "") for a in spec.get("derivedAttributes") or []}
    if derived and not features.derived_attributes:
        # Refused rather than ignored (the constraints would silently mean something else), as upstream.
        raise InvalidRequestError(
            f'claim "{claim}", request "{full}": cannot handle request with derived attributes, '
            "the feature is disabled",
            claim=claim,
            request=full,
        )
    admin = spec.get("adminAccess") if sub_index < 0 else None
    if admin is not None and not features.admin_access:
        raise InvalidRequestError(
            f'claim "{claim}", request "{full}": admin access is requested, but the feature is disabled',
            claim=claim,
            request=full,
        )
    if spec.get("capacity") and not features.consumable_capacity:
        raise InvalidRequestError(
            f'claim "{claim}", request "{full}": has capacity requests, but the DRAConsumableCapacity '
            "feature is disabled",
            claim=claim,
            request=full,
        )
    class_name = spec.get("deviceClassName", "")
    if not class_name:
        raise InvalidRequestError(
            f'claim "{claim}", request "{full}": missing device class name (unsupported request type?)',
            claim=claim,
            request=full,
        )
    device_class = classes.get(class_name)
    if device_class is None:
        raise UnknownDeviceClassError(
            f'claim "{claim}", request "{full}": device class {class_name} does not exist',
            claim=claim,
            request=full,
            device_class=class_name,
        )
    class_sel = _compile(
        cache,
        (device_class.get("spec") or {}).get("selectors") or [],
        claim=claim,
        request=full,
        class_name=class_name,
        from_class=True,
    )
    req_sel = _compile(
        cache, spec.get("selectors") or [], claim=claim, request=full, class_name=class_name, from_class=False
    )
    mode = spec.get("allocationMode") or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise InvalidRequestError(
            f'claim "{claim}", request "{full}": unsupported count mode {mode}', claim=claim, request=full
        )
    count = int(spec.get("count", 1)) if mode == "ExactCount" else 0
    capacity: dict[str, Quantity] = {}
    for name, value in ((spec.get("capacity") or {}).get("requests") or {}).items():
        try:
            capacity[name] = parse_quantity(value)
        except QuantityError as exc:
            raise InvalidRequestError(
                f'claim "{claim}", request "{full}": capacity {name}: {exc}', claim=claim, request=full
            ) from exc
    return RequestData(
        claim_index=claim_index,
        request_index=request_index,
        sub_index=sub_index,
        base_name=base_name,
        sub_name=sub_name,
        class_name=class_name,
        device_class=device_class,
        class_selectors=class_sel,
        selectors=req_sel,
        all_mode=mode == "All",
        count=count,
        admin_access=bool(admin),
        tolerations=list(spec.get("tolerations") or []),
        capacity=capacity,
        derived=derived,
    )
