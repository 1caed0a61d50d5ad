"""Which invariants a chaos run checks when: ``CONTINUOUS`` at every snapshot (a violation counts when two
consecutive snapshots show it), ``SETTLED`` once the churn stopped and the stack caught up; the
:class:`~draflow_testenv.chaos.claimkinds.History` checks run on every snapshot besides."""

from __future__ import annotations

from collections.abc import Callable

from .claimkinds import extended_claims, orphan_claims, pod_group_claims, stuck_deleting, trace_roots
from .invariants import (
    Snapshot,
    allocated_without_consumer,
    bound_pods_claims,
    counters_over_capacity,
    double_allocation,
    node_files,
    pods_not_running,
)
from .podclaims import duplicate_claims, pods_without_claims

Check = Callable[[Snapshot], list[str]]
CONTINUOUS: list[Check] = [double_allocation, counters_over_capacity, bound_pods_claims, pod_group_claims,
                           extended_claims, duplicate_claims]
SETTLED: list[Check] = [*CONTINUOUS, allocated_without_consumer, pods_without_claims, pods_not_running,
                        node_files, orphan_claims, stuck_deleting, trace_roots]


def run_checks(snap: Snapshot, checks: list[Check]) -> list[str]:
    """Every violation, prefixed with the check's name. A check that raises (an object shaped as it did
    not expect) is a violation of its own: it must never silently stop checking."""
    out = []
    for check in checks:
        try:
            out += [f"{check.__name__}: {msg}" for msg in check(snap)]
        except Exception as exc:
            out.append(f"{check.__name__}: raised {type(exc).__name__}: {exc}")
    return out
