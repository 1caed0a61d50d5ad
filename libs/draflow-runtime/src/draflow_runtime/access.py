"""What this process may do, asked of the API server at start-up, before it matters.

A controller whose RBAC names its Leases one by one (``resourceNames``: ``create`` cannot be limited by
name, ``get``/``update`` can) would otherwise find a missing name only when it first campaigns for that
Lease, minutes into the run and as a stream of Forbidden retries. :func:`denied_names` asks once with a
``SelfSubjectRulesReview`` of the namespace (any authenticated user may; no RBAC of its own needed) and
evaluates the rules here; where the API server says its answer is incomplete (an authorizer that cannot
list rules, e.g. a webhook), every name the rules do not grant is asked again with a
``SelfSubjectAccessReview``, which is authoritative.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .kube import KubeClient

__all__ = ["denied_names", "rules_allow"]

_API = "/apis/authorization.k8s.io/v1"


def rules_allow(rules: Iterable[Mapping[str, Any]], verb: str, group: str, resource: str, name: str) -> bool:
    """Whether one of the ``resourceRules`` of a SelfSubjectRulesReview grants ``verb`` on the object
    ``name`` of ``group``/``resource`` (``*`` matches anything; no ``resourceNames``: every name)."""
    for rule in rules:
        if not _has(rule.get("verbs"), verb) or not _has(rule.get("apiGroups"), group):
            continue
        if not _has(rule.get("resources"), resource):
            continue
        names = rule.get("resourceNames") or []
        if not names or name in names:
            return True
    return False


def _has(values: Sequence[str] | None, wanted: str) -> bool:
    return values is not None and ("*" in values or wanted in values)


async def denied_names(kube: KubeClient, namespace: str, group: str, resource: str, names: Iterable[str],
                       verbs: Sequence[str]) -> list[str]:
    """The ``names`` (in order) on which this client may not do every one of ``verbs`` in ``namespace``."""
    review = await kube.request("POST", f"{_API}/selfsubjectrulesreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace}})
    status = review.get("status") or {}
    rules = status.get("resourceRules") or []
    denied = []
    for name in names:
        for verb in verbs:
            if rules_allow(rules, verb, group, resource, name):
                continue
            if status.get("incomplete") and await _allowed(kube, namespace, group, resource, name, verb):
                continue
            denied.append(name)
            break
    return denied


async def _allowed(kube: KubeClient, namespace: str, group: str, resource: str, name: str, verb: str) -> bool:
    review = await kube.request("POST", f"{_API}/selfsubjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                        "resource": resource, "name": name}}})
    return bool((review.get("status") or {}).get("allowed"))
