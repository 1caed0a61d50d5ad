"""What one scheduling decision returns (:mod:`.decision`): a placement, a wait, or unschedulable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .explain_http import PodExplanation
from .extres import ExtendedClaim

__all__ = ["Decision", "Placement", "PlannedClaim", "Unschedulable", "Waiting"]


@dataclass
class PlannedClaim:
    claim: Mapping[str, Any]
    allocation: dict[str, Any] | None  # None: already allocated
    reserve: bool
    consumer: dict[str, str] | None = None  # the reservedFor entry: the pod's PodGroup; None: the pod
    # ``allocation`` is the pending one an earlier member of the same pod-group cycle decided (not a
    # second allocation: the same devices, written by whichever pipeline gets there first)
    shares_pending: bool = False


@dataclass
class Placement:
    node: str
    claims: list[PlannedClaim]
    extended: ExtendedClaim | None = None
    node_allocatable: Sequence[dict[str, Any]] = ()  # pod.status.nodeAllocatableResourceClaimStatuses


@dataclass
class Waiting:
    reason: str
    on_claim: str = ""  # namespace/name of an in-flight claim to wait for


@dataclass
class Unschedulable:
    explanation: PodExplanation
    claims: list[Mapping[str, Any]] = field(default_factory=list)  # claims that needed an allocation
    deallocate: Mapping[str, Any] | None = None  # PostFilter: allocated claim to give back
    budget_exhausted: bool = False  # a search ran out of its budget: retry with backoff
    stale_extended: Mapping[str, Any] | None = None  # special claim of an earlier attempt: delete it
    # allocated claims found unavailable: binding failed, or ruled out a node that passed the node
    # filters (upstream ``unavailableClaims``; PodGroupPostFilter reads them)
    unavailable: list[Mapping[str, Any]] = field(default_factory=list)


Decision = Placement | Waiting | Unschedulable
