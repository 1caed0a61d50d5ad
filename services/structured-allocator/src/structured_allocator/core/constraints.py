"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (upstream ``constraint.go``).

Both apply to the requests they name (empty = all requests; a parent request name covers all of its
subrequests). A device that lacks the attribute never satisfies the constraint. Attribute names are
fully qualified; ``<driver domain>/<id>`` also finds a short ``<id>`` attribute of that driver's
devices. Values compare by type and value (versions as strings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .pools import PreparedDevice

__all__ = ["Constraint", "DistinctAttribute", "MatchAttribute", "attribute_value", "build_constraint"]


def attribute_value(device: PreparedDevice, name: str) -> tuple[str, Any] | None:
    attr = device.attributes.get(name)
    if attr is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != device.id.driver:
            return None
        attr = device.attributes.get(ident)
        if attr is None:
            return None
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            return (kind, attr[kind])
    return ("unknown", None)


class Constraint:
    attribute: str

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(subrequest) and f"{request}/{subrequest}" in self.requests)

    def add(self, request: str, subrequest: str, device: PreparedDevice) -> bool:
        raise NotImplementedError

    def remove(self, request: str, subrequest: str, device: PreparedDevice) -> None:
        raise NotImplementedError


class MatchAttribute(Constraint):
    """All devices of the covered requests have the same value for the attribute."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.count = 0

    def add(self, request: str, subrequest: str, device: PreparedDevice) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = attribute_value(device, self.attribute)
        if value is None or value[0] == "unknown":
            return False
        if self.count == 0:
            self.value = value
        elif value != self.value:
            return False
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, device: PreparedDevice) -> None:
        if self.applies(request, subrequest):
            self.count -= 1


class DistinctAttribute(Constraint):
    """All devices of the covered requests have pairwise different values for the attribute."""

    def __init__(self, requests: Sequence[str], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: list[tuple[str, Any]] = []

    def add(self, request: str, subrequest: str, device: PreparedDevice) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = attribute_value(device, self.attribute)
        if value is None or value[0] == "unknown" or value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, subrequest: str, device: PreparedDevice) -> None:
        if self.applies(request, subrequest):
            value = attribute_value(device, self.attribute)
            if value in self.values:
                self.values.remove(value)


def build_constraint(spec: Mapping[str, Any]) -> Constraint | None:
    requests = spec.get("requests") or []
    if spec.get("matchAttribute"):
        return MatchAttribute(requests, spec["matchAttribute"])
    if spec.get("distinctAttribute"):
        return DistinctAttribute(requests, spec["distinctAttribute"])
    return None
