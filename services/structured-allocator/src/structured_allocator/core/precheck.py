"""Whether a search on one node can end in an error that depends on that node's devices.

A decision that ranks nodes before searching them (the service's ``nodesearch``) searches fewer nodes
than one that searches every node of its window. The two must fail alike: broken input found on *any*
node of the window keeps the pod pending (upstream's Filter error aborts the scheduling cycle), so a
node may be left unsearched only when no search of the pod's claims on it could raise.

:func:`device_errors_possible` answers that conservatively (True when unsure) for claims whose requests
all ask for an exact count:

* errors that do not depend on the node (unknown DeviceClass, a selector that does not compile, more than
  32 results, admin access not allowed) are raised here, as the first search would raise them;
* a request with ``derivedAttributes`` or ``capacity`` requests, or in ``All`` mode: possible;
* a usable pool with a slice that is not node-local or selects per device (node selectors are evaluated,
  and can be invalid, only for those): possible;
* otherwise every device of the node's usable pools, in use or not (a superset of what a search tries), is
  checked as the search checks a candidate: the class's and the request's selectors (a CEL runtime
  error, or a malformed attribute, is an error) and, for a device they select, its capacity on an empty
  device (an unrepresentable value is an error). Selector results are memoised per device version, so
  this costs a dictionary look-up per device and selector after the first time.

The answer depends only on the node's pools (remembered by the :class:`~.sliceindex.SliceIndex` until a
slice, the node's labels or the features change), the selectors and the features: it is remembered with
the node's pools, per set of selector expressions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .allocator import Allocator, _Run
from .types import AllocationError

__all__ = ["DeviceErrorCheck", "device_errors_possible"]


class DeviceErrorCheck:
    """:func:`device_errors_possible` for one allocator and one list of claims, node after node: the
    claims are validated once (raising what a search would raise before looking at any device)."""

    def __init__(self, allocator: Allocator, claims: Sequence[Mapping[str, Any]]) -> None:
        self.allocator = allocator
        self.claims = claims
        run = _Run(allocator, {}, claims, True, None)  # validation does not depend on the node
        for ci, claim in enumerate(claims):
            run._validate_claim(ci, claim)
        self.datas = [rd for per_claim in run.requests for per_request in per_claim for rd in per_request]
        self.unsure = any(rd.derived or rd.capacity or rd.all_mode or rd.sub_index >= 0 for rd in self.datas)
        self.key = tuple((tuple(s.expression for s in rd.class_selectors),
                          tuple(s.expression for s in rd.selectors)) for rd in self.datas)

    def possible(self, node: Mapping[str, Any]) -> bool:
        if self.unsure:
            return True
        gathered = self.allocator.index.node_pools(node, self.allocator.features)
        known = gathered.checked.get(self.key)
        if known is None:
            run = _Run(self.allocator, node, self.claims, True, None)
            run.pools, run.candidates = gathered.pools, gathered.candidates
            known = gathered.checked[self.key] = _possible(run, self.datas)
        return known


def device_errors_possible(allocator: Allocator, node: Mapping[str, Any],
                           claims: Sequence[Mapping[str, Any]]) -> bool:
    """See the module docstring. Raises the :class:`~.types.AllocationError` a search would raise
    before looking at any device."""
    return DeviceErrorCheck(allocator, claims).possible(node)


def _possible(run: _Run, datas: Sequence[Any]) -> bool:
    for pool in run.pools:
        if pool.incomplete or pool.invalid:
            continue
        if any(not s.node_name or s.per_device for s in (*pool.slices, *pool.slices_not_targeting)):
            return True
    for _, s, d in run.candidates:
        for rd in datas:
            try:
                if run.selectable(rd, s, d):
                    run.capacity_ok(rd, d, static=True)
            except AllocationError:
                return True
    return False
