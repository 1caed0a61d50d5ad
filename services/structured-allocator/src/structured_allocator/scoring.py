"""Scoring feasible nodes: which node gets the pod, once its claims fit on several.

A scorer is anything with ``name`` and ``score(candidate) -> float`` (higher wins; ties go to the node
found first, and the search starts at a rotating offset so ties spread). A scorer whose score reads only
the candidate's device counts (``free_devices``, ``total_devices``, ``devices_taken``) says so with
``counts_only = True``: the search may then rank nodes by score before searching their devices
(:mod:`.nodesearch`). Two are built in, both counts only:

* ``pack`` (default): prefer the node where the claims fit most tightly, i.e. the fewest free devices
  left on the node after this allocation. Whole nodes stay free for large claims later, like
  bin-packing with kube-scheduler's ``MostAllocated`` strategy.
* ``spread``: the opposite (most free devices left), for failure-domain spreading.

"Free devices" counts the devices of the node's own slices (``spec.nodeName``) that no claim uses,
from the assume cache; devices in network-attached pools do not count for any node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["SCORERS", "Candidate", "PackScorer", "Scorer", "SpreadScorer", "make_scorer"]


@dataclass(frozen=True)
class Candidate:
    """A feasible node for a pod: the allocations its unallocated claims would get there."""

    node: Mapping[str, Any]
    allocations: Sequence[dict[str, Any]]
    free_devices: int  # free devices of the node's own slices before this allocation
    total_devices: int  # devices of the node's own slices
    node_allocatable: Sequence[dict[str, Any]] = ()  # the pod's claim statuses there (nodealloc_plan)
    taken: int | None = None  # devices the claims take, known before the search (a ranking probe)

    @property
    def devices_taken(self) -> int:
        if self.taken is not None:
            return self.taken
        # scored for every feasible node of a decision: count the results without copying them
        return sum(len((a.get("devices") or {}).get("results") or ()) for a in self.allocations)

    @property
    def free_after(self) -> int:
        return max(0, self.free_devices - self.devices_taken)


class Scorer(Protocol):
    name: str

    def score(self, candidate: Candidate) -> float: ...


class PackScorer:
    """Fewest free devices left after the allocation wins."""

    name = "pack"
    counts_only = True

    def score(self, candidate: Candidate) -> float:
        return -float(candidate.free_after)


class SpreadScorer:
    """Most free devices left after the allocation wins."""

    name = "spread"
    counts_only = True

    def score(self, candidate: Candidate) -> float:
        return float(candidate.free_after)


SCORERS: dict[str, type[PackScorer] | type[SpreadScorer]] = {"pack": PackScorer, "spread": SpreadScorer}


def make_scorer(name: str) -> Scorer:
    try:
        return SCORERS[name]()
    except KeyError:
        raise ValueError(f"unknown scorer {name!r}; known: {', '.join(sorted(SCORERS))}") from None
