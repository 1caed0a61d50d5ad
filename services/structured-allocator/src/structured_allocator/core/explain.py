"""Why claims do not fit on a node: per request (and subrequest), a funnel of device counts.

For every request the funnel counts devices on the node (usable pools only) that are

    of the class  →  match the request's selectors  →  free  →  not blocked by taints
                  →  not blocked by counters (or compatibility groups)  →  not blocked by capacity
                  →  have the constrained attributes

and a one-line summary names the first stage that leaves fewer devices than needed, e.g.
``claim "gpu-big" request "gpu": 8 devices of class gpu.example.com, 0 match selector
device.capacity["gpu.example.com"].memory.compareTo(quantity("200Gi")) >= 0``. When every request
could be served on its own, the claims fail together (constraints, or requests competing for the
same devices) and the summary says so. Everything is plain data: :meth:`Explanation.to_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .constraints import attribute_value
from .pools import node_matches
from .selection import _check, evaluate, taint_blocks
from .types import CelSelectorError, InvalidCapacityError

if TYPE_CHECKING:
    from .allocator import _Run
    from .requests import RequestData

__all__ = ["Explanation", "RequestExplanation", "explain"]


@dataclass
class RequestExplanation:
    claim: str
    request: str
    device_class: str
    needed: int | str  # a count, or "all"
    class_devices: int = 0
    matching: int = 0
    free: int = 0
    blocked_by_taints: int = 0
    blocked_by_counters: int = 0
    blocked_by_capacity: int = 0
    blocked_by_constraints: int = 0
    usable: int = 0
    summary: str = ""

    @property
    def satisfiable_alone(self) -> bool:
        return self.usable >= 1 if self.needed == "all" else self.usable >= int(self.needed)


@dataclass
class Explanation:
    node: str
    summary: str
    requests: list[RequestExplanation] = field(default_factory=list)
    incomplete_pools: list[str] = field(default_factory=list)
    invalid_pools: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _worst_selector(run: _Run, rd: RequestData, devices: list[Any]) -> str:
    if len(rd.selectors) == 1:
        return rd.selectors[0].expression
    best = None
    for sel in rd.selectors:
        n = sum(1 for d in devices if evaluate(sel, d) is True)
        if best is None or n < best[0]:
            best = (n, sel.expression)
    return best[1] if best else ""


def _passes(selectors: Any, d: Any, rd: RequestData, claim: str, from_class: bool) -> bool:
    """The device passes the selectors. A selector failing at run time on it counts as not matching:
    the search may never have reached this request or device (upstream then answers "unsatisfiable",
    not an error), and when it did it raised already."""
    try:
        return _check(selectors, d, rd, claim, from_class)
    except CelSelectorError:
        return False


def _capacity_blocks(run: _Run, rd: RequestData, d: Any) -> bool:
    """The device's capacity does not take this request. A value the search would have refused as broken
    input (it may not have reached this request) counts as blocking: the explanation never raises."""
    try:
        return run.capacity_ok(rd, d) is not True
    except InvalidCapacityError:
        return True


def _groups_block(run: _Run, pool: Any, d: Any) -> bool:
    """Compatibility groups of already allocated devices on the device's counter sets exclude it."""
    if not (d.consumes and run.features.compatibility_groups):
        return False
    undo = run.groups_ok(pool, d)
    if undo is None:
        return True
    undo()
    return False


def _explain_request(run: _Run, rd: RequestData, claim_name: str) -> RequestExplanation:
    claim = run.claim_name(rd.claim_index)
    ex = RequestExplanation(
        claim=claim_name,
        request=rd.name,
        device_class=rd.class_name,
        needed="all" if rd.all_mode else rd.count,
    )
    of_class = []
    constrained = [c for c in run.constraints[rd.claim_index] if c.applies(rd.base_name, rd.sub_name)]
    for pool, s, d in run.candidates:
        if s.per_device and not node_matches(run.node, d.node_name, d.all_nodes, d.node_selector):
            continue
        if d.binding_conditions and not run.features.device_binding_and_status:
            continue
        if s.skip_node_operations and not run.node_operations_optional:
            continue  # DRAOptionalNodeOperations: not usable from this node at all
        if not _passes(rd.class_selectors, d, rd, claim, True):
            continue
        of_class.append(d)
        if not _passes(rd.selectors, d, rd, claim, False):
            continue
        ex.matching += 1
        if not rd.admin_access and run.in_use(d.id):
            continue
        ex.free += 1
        if run.features.device_taints and taint_blocks(d, rd.tolerations):
            ex.blocked_by_taints += 1
        elif (
            d.consumes and run.features.partitionable_devices and not run.counters_ok(pool, d, commit=False)
        ) or (d.consumes and not run.features.partitionable_devices) or _groups_block(run, pool, d):
            ex.blocked_by_counters += 1
        elif _capacity_blocks(run, rd, d):
            ex.blocked_by_capacity += 1
        elif any(
            c.attribute not in rd.derived and attribute_value(d, c.attribute) is None for c in constrained
        ):
            ex.blocked_by_constraints += 1
        else:
            ex.usable += 1
    ex.class_devices = len(of_class)
    parts = [f"{ex.class_devices} devices of class {rd.class_name}"]
    if rd.selectors:
        parts.append(f"{ex.matching} match selector {_worst_selector(run, rd, of_class)}")
    if ex.free != ex.matching:
        parts.append(f"{ex.free} free ({ex.matching - ex.free} in use)")
    for label, n in (
        ("taints", ex.blocked_by_taints),
        ("counters", ex.blocked_by_counters),
        ("capacity", ex.blocked_by_capacity),
        ("constraints", ex.blocked_by_constraints),
    ):
        if n:
            parts.append(f"{n} blocked by {label}")
    parts.append(f"{ex.usable} usable, {ex.needed} needed")
    ex.summary = f'claim "{claim_name}" request "{rd.name}": ' + ", ".join(parts)
    return ex


def explain(run: _Run) -> Explanation:
    """Build the explanation after a failed search (the search state is fully rolled back)."""
    requests: list[RequestExplanation] = []
    first_blocker: RequestExplanation | None = None
    for ci, per_claim in enumerate(run.requests):
        claim_name = (run.claims[ci].get("metadata") or {}).get("name", "")
        for datas in per_claim:
            explained = [_explain_request(run, rd, claim_name) for rd in datas]
            requests.extend(explained)
            if first_blocker is None and not any(e.satisfiable_alone for e in explained):
                first_blocker = explained[0]
    incomplete = [p.id for p in run.pools if p.incomplete]
    invalid = {p.id: p.invalid_reason for p in run.pools if p.invalid}
    if first_blocker is not None:
        summary = first_blocker.summary
    else:
        names = ", ".join(f'"{(c.get("metadata") or {}).get("name", "")}"' for c in run.claims)
        summary = (
            f"claims {names}: every request has usable devices on its own, but not all together "
            "(constraints, or requests competing for the same devices)"
        )
    if invalid:
        summary += "; invalid pools: " + ", ".join(f"{k} ({v})" for k, v in invalid.items())
    if incomplete:
        summary += "; incomplete pools skipped: " + ", ".join(incomplete)
    return Explanation(
        node=run.node_name,
        summary=summary,
        requests=requests,
        incomplete_pools=incomplete,
        invalid_pools=invalid,
    )
