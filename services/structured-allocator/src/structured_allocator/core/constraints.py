"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (upstream ``constraint.go``).

Both apply to the requests they name (empty = all requests; a parent request name covers all of its
subrequests). A device that lacks the attribute never satisfies the constraint. Attribute names are
fully qualified; ``<driver domain>/<id>`` also finds a short ``<id>`` attribute of that driver's
devices. Values compare by type and value (versions as strings).

With DRAListTypeAttributes (``list_type=True``, upstream's experimental allocator) every value is a set
(a scalar is a one-element set; ``strings``/``ints``/``bools``/``versions`` lists): ``matchAttribute``
needs a non-empty intersection over all devices, ``distinctAttribute`` pairwise disjoint sets (sets of
different types never intersect). Without it a list attribute matches nothing, as upstream.

A request's derived attributes (DRADerivedAttributes, :mod:`.derived`) reach a constraint through the
``lookup`` argument of :meth:`Constraint.add`, which replaces the device's attribute for that request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .pools import PreparedDevice

__all__ = [
    "Constraint",
    "DistinctAttribute",
    "MatchAttribute",
    "attribute_set",
    "attribute_value",
    "build_constraint",
]


_LISTS = {"strings": "string", "ints": "int", "bools": "bool", "versions": "version"}


def _raw_attribute(device: PreparedDevice, name: str) -> Any:
    attr = device.attributes.get(name)
    if attr is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != device.id.driver:
            return None
        attr = device.attributes.get(ident)
    return attr


Lookup = Callable[[str], Mapping[str, Any] | None]
"""An attribute source that overrides the device's (derived attributes): name -> attribute dict."""


def _lookup(device: PreparedDevice, name: str, lookup: Lookup | None) -> Mapping[str, Any] | None:
    return lookup(name) if lookup is not None else _raw_attribute(device, name)


def attribute_value(
    device: PreparedDevice, name: str, lookup: Lookup | None = None
) -> tuple[str, Any] | None:
    """(kind, value) of a scalar attribute; ("unknown", None) for anything else (lists included)."""
    attr = _lookup(device, name, lookup)
    if attr is None:
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            return (kind, attr[kind])
    return ("unknown", None)


def attribute_set(
    device: PreparedDevice, name: str, lookup: Lookup | None = None
) -> tuple[str, frozenset[Any]] | None:
    """(element kind, values) of a scalar or list attribute (DRAListTypeAttributes); None if the device
    lacks it or it is empty or of an unknown type."""
    attr = _lookup(device, name, lookup)
    if attr is None:
        return None
    for kind, element in _LISTS.items():
        values = attr.get(kind)
        if values:
            return (element, frozenset(values))
    for kind in ("int", "bool", "string", "version"):
        if kind in attr:
            return (kind, frozenset([attr[kind]]))
    return None


class Constraint:
    attribute: str

    def __init__(self, requests: Sequence[str], attribute: str, list_type: bool = False) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.list_type = list_type

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        return request in self.requests or (bool(subrequest) and f"{request}/{subrequest}" in self.requests)

    def add(
        self, request: str, subrequest: str, device: PreparedDevice, lookup: Lookup | None = None
    ) -> bool:
        """Try to add ``device`` (of ``request``/``subrequest``); ``lookup`` replaces the device's own
        attributes for this request (derived attributes). Adds and removes are last-in first-out."""
        raise NotImplementedError

    def remove(self, request: str, subrequest: str, device: PreparedDevice) -> None:
        raise NotImplementedError


class MatchAttribute(Constraint):
    """All devices of the covered requests have the same value for the attribute."""

    def __init__(self, requests: Sequence[str], attribute: str, list_type: bool = False) -> None:
        super().__init__(requests, attribute, list_type)
        self.value: tuple[str, Any] | None = None
        self.count = 0
        self.intersections: list[tuple[str, frozenset[Any]]] = []  # list_type: one per device added

    def add(
        self, request: str, subrequest: str, device: PreparedDevice, lookup: Lookup | None = None
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        if self.list_type:
            values = attribute_set(device, self.attribute, lookup)
            if values is None:
                return False
            if self.intersections:
                kind, current = self.intersections[-1]
                narrowed = current & values[1] if kind == values[0] else frozenset()
                if not narrowed:
                    return False
                values = (kind, narrowed)
            self.intersections.append(values)
            self.count += 1
            return True
        value = attribute_value(device, self.attribute, lookup)
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
            if self.list_type:
                self.intersections.pop()


class DistinctAttribute(Constraint):
    """All devices of the covered requests have pairwise different values for the attribute."""

    def __init__(self, requests: Sequence[str], attribute: str, list_type: bool = False) -> None:
        super().__init__(requests, attribute, list_type)
        self.values: list[tuple[str, Any]] = []  # one per device added
        self.sets: list[tuple[str, frozenset[Any]]] = []  # list_type: one per device added

    def add(
        self, request: str, subrequest: str, device: PreparedDevice, lookup: Lookup | None = None
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        if self.list_type:
            values = attribute_set(device, self.attribute, lookup)
            if values is None or any(kind == values[0] and have & values[1] for kind, have in self.sets):
                return False
            self.sets.append(values)
            return True
        value = attribute_value(device, self.attribute, lookup)
        if value is None or value[0] == "unknown" or value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, subrequest: str, device: PreparedDevice) -> None:
        if self.applies(request, subrequest):
            (self.sets if self.list_type else self.values).pop()


def build_constraint(spec: Mapping[str, Any], list_type: bool = False) -> Constraint | None:
    requests = spec.get("requests") or []
    if spec.get("matchAttribute"):
        return MatchAttribute(requests, spec["matchAttribute"], list_type)
    if spec.get("distinctAttribute"):
        return DistinctAttribute(requests, spec["distinctAttribute"], list_type)
    return None
