"""Does a ``v1.NodeSelector`` (an allocation's ``nodeSelector``) admit a node? (pure)

Semantics as in ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``: terms are ORed; inside a
term ``matchExpressions`` (on node labels) and ``matchFields`` (only ``metadata.name``) are ANDed; a
term with neither matches nothing; a missing selector admits every node. Operators: ``In``, ``NotIn``,
``Exists``, ``DoesNotExist``, ``Gt``, ``Lt`` (integers); an unknown operator matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["node_selector_admits", "selector_needs_labels"]


def selector_needs_labels(selector: Mapping[str, Any] | None) -> bool:
    """True when deciding needs the Node's labels (some term has ``matchExpressions``)."""
    return any(term.get("matchExpressions") for term in (selector or {}).get("nodeSelectorTerms") or ())


def node_selector_admits(
    selector: Mapping[str, Any] | None, node_name: str, labels: Mapping[str, str] | None = None
) -> bool:
    """True when ``selector`` admits the node ``node_name`` with ``labels``.

    With ``labels=None`` only selectors that :func:`selector_needs_labels` says are label-free can admit
    the node (label expressions are evaluated against no labels).
    """
    if selector is None:
        return True
    terms = selector.get("nodeSelectorTerms") or ()
    return any(_term_matches(term, node_name, labels or {}) for term in terms)


def _term_matches(term: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> bool:
    exprs = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not exprs and not fields:
        return False
    if not all(_requirement_matches(req, labels) for req in exprs):
        return False
    return all(_field_matches(req, node_name) for req in fields)


def _requirement_matches(req: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = req.get("key", ""), req.get("operator"), list(req.get("values") or ())
    present = key in labels
    value = labels.get(key)
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(value or ""), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_matches(req: Mapping[str, Any], node_name: str) -> bool:
    if req.get("key") != "metadata.name":
        return False
    values = list(req.get("values") or ())
    if req.get("operator") == "In":
        return node_name in values
    if req.get("operator") == "NotIn":
        return node_name not in values
    return False
