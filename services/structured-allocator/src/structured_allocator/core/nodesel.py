"""Node selection as kube-scheduler does it: ``v1.NodeSelector`` (terms ORed, requirements ANDed,
``Gt``/``Lt`` on label values parsed like Go's ``strconv.ParseInt``) and the node selection of
ResourceSlices and devices (``nodeName``, ``allNodes``, ``nodeSelector``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .types import InvalidRequestError

__all__ = ["node_matches", "node_selector_matches"]


_INT64 = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: ASCII digits with an optional sign, in int64 range.

    Python's ``int()`` also takes spaces, ``_`` separators and non-ASCII digits; a label value like
    ``"1_0"`` must not match ``Gt 5`` here when kube-scheduler says it does not."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = req.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        have, want = _parse_int64(value), _parse_int64(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    raise ValueError(f"unsupported node selector operator {op!r}")


def node_selector_matches(node: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    """``v1.NodeSelector`` semantics: terms are ORed, requirements within a term ANDed,
    a term without requirements matches nothing."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    for term in selector.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        fields_ = term.get("matchFields") or []
        if not exprs and not fields_:
            continue
        ok = all(_requirement_matches(r, labels.get(r.get("key", ""))) for r in exprs)
        if ok:
            for r in fields_:
                if r.get("key") != "metadata.name":
                    raise ValueError(f"unsupported node selector field {r.get('key')!r}")
                if not _requirement_matches(r, meta.get("name")):
                    ok = False
                    break
        if ok:
            return True
    return False


def node_matches(
    node: Mapping[str, Any], node_name: str | None, all_nodes: bool, node_selector: Mapping[str, Any] | None
) -> bool:
    if node_name:
        return (node.get("metadata") or {}).get("name") == node_name
    if all_nodes:
        return True
    if node_selector is not None:
        try:
            return node_selector_matches(node, node_selector)
        except ValueError as exc:
            raise InvalidRequestError(f"failed to perform node selection: {exc}") from exc
    return False
