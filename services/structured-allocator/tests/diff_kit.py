"""Differential check of draflow's allocator core against upstream's (k8s.io/dynamic-resource-allocation
v0.37.1 ``structured``, run by hack/go-alloc-diff): run one scenario (``diff_scenarios.scenario``) through
both and say whether they agree.

Agreement: the same outcome ("allocated", "unsatisfiable" or "error": broken input) and, when both
allocate, the same ``status.allocation`` per claim (devices in order with request/driver/pool/device,
adminAccess, consumed capacity, binding conditions; config; node selector), after :func:`normalize`.
Deliberate differences are excused by a named rule (:data:`RULES`, documented in the allocator README
section "Differential check against upstream"):

* ``invalid-pool-unsatisfiable``: upstream fails the node with an error wrapping
  ``ErrFailedAllocationOnNode`` (an invalid pool: duplicate device names, a counter set defined twice...),
  draflow answers "does not fit" with the reason in its explanation (allocator.py's module docstring).
* ``stable-pool-order``: a feature set within upstream's "stable" allocator (AdminAccess,
  PrioritizedList, PartitionableDevices, DeviceTaints; the beta gates DRADeviceBindingConditions/
  DRAResourceClaimDeviceStatus and DRAConsumableCapacity off) makes upstream use that implementation,
  which visits pools in Go map order (random from run to run); draflow always follows the "incubating"
  implementation's sorted order. Only the outcome is compared, not the devices chosen.
* ``stable-ignores-newer-fields``: the same "stable" implementation does not know capacity requests
  (ignored), ``distinctAttribute`` (an error: "empty constraint") or ``allowMultipleAllocations`` (false
  in CEL); draflow, like "incubating", rejects capacity requests with DRAConsumableCapacity off and
  applies the other two. The API server drops these fields while their gates are off, so only
  scenarios that use them with such a feature set are excluded.
* ``stable-foreign-counter-slices``: the same "stable" implementation gathers every slice with
  ``sharedCounters`` into its pool whatever node the slice targets; "incubating" (and draflow) only those
  relevant for the node (the pool still gets them when a device of the node needs them: the pool is then
  incomplete for the node and all its slices are gathered). So a pool of other nodes can count for this
  one under "stable": an ``All`` request fails on it while it is incomplete (seed 107272). Excluded when
  the outcomes differ and the scenario has such a slice.
* ``timeout``: with ``timeoutSeconds`` in the scenario (``hack/alloc-diff.py --timeout``) each side's search
  stops at that deadline (upstream: a context deadline, as DRASchedulerFilterTimeout; draflow: a
  :class:`SearchBudget` deadline); a search either side did not finish is counted, not compared. Both
  searches are exponential in the worst case: without a deadline one such scenario stops the run.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from structured_allocator.core import (
    AllocatedState,
    AllocationError,
    Allocator,
    Features,
    SearchBudget,
    SearchBudgetExhausted,
    parse_quantity,
)
from structured_allocator.core.pools import node_matches

RULES = {
    "invalid-pool-unsatisfiable": "upstream: error wrapping ErrFailedAllocationOnNode; draflow: does not fit",
    "stable-pool-order": "upstream's stable allocator visits pools in map order: outcome compared only",
    "stable-ignores-newer-fields": "upstream's stable allocator ignores capacity requests etc.: excluded",
    "stable-foreign-counter-slices": "upstream's stable allocator gathers counter slices of other nodes too",
    "timeout": "a search that ran out of time (scenario timeoutSeconds) on either side is not compared",
}
# What upstream's "stable" implementation supports: a feature set within it selects that implementation.
STABLE = {"AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints"}
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Upstream:
    """One go-alloc-diff process for many scenarios (a line out, a line back)."""

    def __init__(self, binary: Path) -> None:
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1 << 16)

    def run(self, scenario: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(scenario) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"go-alloc-diff exited ({self.proc.poll()}) on scenario {scenario['id']}")
        answer: dict[str, Any] = json.loads(line)
        assert answer.get("id") == scenario["id"], answer
        return answer

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def features_of(scenario: dict[str, Any]) -> Features:
    on = {_snake(k) for k, v in scenario["features"].items() if v}
    none = Features.none()
    return Features(**{f: f in on for f in none.__dataclass_fields__})


def run_draflow(scenario: dict[str, Any]) -> dict[str, Any]:
    """Draflow's answer in go-alloc-diff's format: {outcome, results | error}."""
    allocator = Allocator(
        {c["metadata"]["name"]: c for c in scenario["classes"]},
        scenario["slices"],
        AllocatedState.from_claims(scenario["allocated"]),
        features_of(scenario),
        new_share_id=lambda: "share",
        clock=lambda: FIXED_NOW,
    )
    timeout = scenario.get("timeoutSeconds")
    budget = SearchBudget(deadline=time.monotonic() + timeout) if timeout else None
    try:
        outcome = allocator.allocate(scenario["node"], scenario["claims"], budget=budget)
    except AllocationError as e:
        return {"outcome": "error", "error": f"{type(e).__name__}: {e}"}
    except SearchBudgetExhausted as e:
        return {"outcome": "timeout", "error": str(e)}
    if not outcome.fits:
        summary = outcome.explanation.summary if outcome.explanation is not None else ""
        return {"outcome": "unsatisfiable", "error": summary}
    return {"outcome": "allocated", "results": outcome.results}


def _quantity(value: Any) -> Fraction | str:
    try:
        return parse_quantity(str(value)).value
    except Exception:  # left as written; the comparison shows it
        return str(value)


def _clean(value: Any) -> Any:
    """Drop empty/false-y optional fields both sides may write or omit (nil vs [] vs absent)."""
    if isinstance(value, dict):
        out = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {}, False, "")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def normalize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Allocation results comparable across the two: no allocationTimestamp, share IDs as "*",
    quantities as exact numbers, empty optional fields dropped."""
    out = []
    for allocation in results:
        a = _clean(json.loads(json.dumps(allocation)))
        a.pop("allocationTimestamp", None)
        for r in (a.get("devices") or {}).get("results") or []:
            if "shareID" in r:
                r["shareID"] = "*"
            if "consumedCapacity" in r:
                r["consumedCapacity"] = {k: _quantity(v) for k, v in r["consumedCapacity"].items()}
        out.append(a)
    return out


def uses_newer_fields(scenario: dict[str, Any]) -> bool:
    """Capacity requests, distinctAttribute or allowMultipleAllocations anywhere in the scenario."""
    text = json.dumps([scenario["claims"], scenario["slices"]])
    fields = ('"capacity": {"requests"', '"distinctAttribute"', '"allowMultipleAllocations"')
    return any(k in text for k in fields)


def foreign_counter_slices(scenario: dict[str, Any]) -> bool:
    """A slice with ``sharedCounters`` whose node selection does not take in the scenario's node."""
    node = scenario["node"]
    for s in scenario["slices"]:
        spec = s["spec"]
        name, everywhere = spec.get("nodeName"), bool(spec.get("allNodes"))
        selector = spec.get("nodeSelector")
        targets = name or everywhere or selector is not None
        if spec.get("sharedCounters") and targets and not node_matches(node, name, everywhere, selector):
            return True
    return False


def compare(scenario: dict[str, Any], upstream: dict[str, Any], ours: dict[str, Any]) -> tuple[bool, str]:
    """(agree, why): why names the rule that excused a difference, or describes the disagreement."""
    up, dr = upstream["outcome"], ours["outcome"]
    if "timeout" in (up, dr):
        return True, "timeout"
    stable = {k for k, v in scenario["features"].items() if v} <= STABLE
    if up == "failed_on_node" and dr == "unsatisfiable":
        return True, "invalid-pool-unsatisfiable"
    differ = up != dr or (up == "allocated" and normalize(upstream["results"]) != normalize(ours["results"]))
    if differ and stable and uses_newer_fields(scenario):
        return True, "stable-ignores-newer-fields"
    if differ and stable and foreign_counter_slices(scenario):
        return True, "stable-foreign-counter-slices"
    if up != dr:
        return False, f"upstream {up} ({upstream.get('error', '')}) vs draflow {dr} ({ours.get('error', '')})"
    if up != "allocated":
        return True, up
    a, b = normalize(upstream["results"]), normalize(ours["results"])
    if a != b:
        if stable:
            return True, "stable-pool-order"
        return False, f"different allocations:\n upstream {a}\n draflow  {b}"
    return True, up
