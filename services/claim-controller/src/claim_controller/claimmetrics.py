"""The labels of kube-controller-manager's two resourceclaim metrics, and the gauge collector (pure).

- ``admin_access``: ``"true"`` when any request of the claim asks for admin access (``exactly.adminAccess``;
  the sub-requests of a ``firstAvailable`` list cannot), else ``"false"`` (upstream
  ``getAdminAccessMetricLabel``);
- ``owner_api_group`` / ``owner_api_kind``: of the claim's controller owner reference (``""`` / ``"Pod"``,
  ``"scheduling.k8s.io"`` / ``"PodGroup"``; both empty without one);
- ``source`` of the gauge: ``"extended_resource"`` for the claim of a pod's extended resources (annotation
  ``resource.kubernetes.io/extended-resource-claim: "true"``), ``"resource_claim_template"`` for a claim
  generated from a template (a non-empty ``resource.kubernetes.io/pod-claim-name``), ``""`` for a user's.

:class:`ClaimsCollector` counts the claims ``source()`` returns at scrape time (None: this replica is not
working, no samples), by ``allocated``, ``admin_access`` and ``source``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .naming import POD_CLAIM_NAME_ANNOTATION

__all__ = ["EXTENDED_RESOURCE_CLAIM_ANNOTATION", "ClaimsCollector", "admin_access", "claim_counts",
           "owner_labels", "source"]

#: Annotation of the claim the scheduler (here: the structured-allocator) makes for a pod's extended
#: resources.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

Obj = Mapping[str, Any]


def admin_access(claim: Obj | None) -> str:
    """``"true"`` when a request of ``claim`` asks for admin access, else ``"false"``."""
    for request in (((claim or {}).get("spec") or {}).get("devices") or {}).get("requests") or ():
        if ((request or {}).get("exactly") or {}).get("adminAccess") is True:
            return "true"
    return "false"


def owner_labels(claim: Obj) -> tuple[str, str]:
    """``(owner_api_group, owner_api_kind)`` of the claim's controller owner reference."""
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            group, sep, _ = str(ref.get("apiVersion", "")).partition("/")
            return (group if sep else ""), str(ref.get("kind", ""))
    return "", ""


def source(claim: Obj) -> str:
    """Where the claim comes from: ``extended_resource``, ``resource_claim_template`` or ``""``."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    if annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true":
        return "extended_resource"
    if annotations.get(POD_CLAIM_NAME_ANNOTATION):
        return "resource_claim_template"
    return ""


def claim_counts(claims: Iterable[Obj]) -> Counter[tuple[str, str, str]]:
    """Claims by ``(allocated, admin_access, source)``."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for claim in claims:
        allocated = "true" if (claim.get("status") or {}).get("allocation") is not None else "false"
        counts[(allocated, admin_access(claim), source(claim))] += 1
    return counts


class ClaimsCollector(Collector):
    """``draflow_claim_controller_resource_claims``: the claims ``source()`` returns, counted when scraped."""

    NAME = "draflow_claim_controller_resource_claims"

    def __init__(self) -> None:
        self.source: Callable[[], Iterable[Obj] | None] = lambda: None

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            self.NAME, "ResourceClaims by allocation, admin access and source (resource_claim_template, "
            "extended_resource, or empty: made by a user), as kube-controller-manager's "
            "dynamic_resource_allocation_resource_claims.", labels=["allocated", "admin_access", "source"])

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        claims = self.source()
        if claims is not None:
            for labels, count in sorted(claim_counts(claims).items()):
                family.add_metric(list(labels), count)
        yield family
