"""Names and labels of the publisher's ResourceSlices (pure).

Slice names are deterministic (a deliberate difference from upstream's ``generateName``):
``<owner node>-<driver>-<hash>-<index hex>`` where ``hash`` is 10 hex digits of sha256 over (driver, pool,
owner node) and ``index`` the slice's position in :func:`~slice_publisher.splitter.split_pool`. A create
that raced with a stale cache then fails with AlreadyExists instead of leaving a duplicate slice behind,
and a human can tell from the name which node, driver and slice it is. The owner part is shortened so the
name stays within 253 characters.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from slice_publisher.splitter import DesiredPool

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "draflow-slice-publisher"
PUBLISHER_NODE_LABEL = "draflow.dev/publisher-node"
POOL_HASH_LABEL = "draflow.dev/pool-hash"
NAME_MAX = 253
HASH_LEN = 10
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _sha(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def pool_hash(driver: str, pool: str, owner_node: str) -> str:
    """Short stable id of (driver, pool, owner node); also a label value on every slice of the pool."""
    return _sha(driver, pool, owner_node)[:HASH_LEN]


def node_label_value(node: str) -> str:
    """The node name when it is a valid label value (≤63 characters), else ``h-`` + a hash of it."""
    if len(node) <= 63 and _LABEL_VALUE_RE.match(node):
        return node
    return "h-" + _sha(node)[:40]


def slice_name(driver: str, pool: str, owner_node: str, index: int) -> str:
    """Deterministic DNS-subdomain name of slice ``index`` of a pool (see the module docstring)."""
    tail = f"-{driver}-{pool_hash(driver, pool, owner_node)}-{index:x}"
    owner = owner_node[: NAME_MAX - len(tail)].rstrip("-.") or "x"
    return owner + tail


def parse_slice_index(name: str, driver: str, pool: str, owner_node: str) -> int | None:
    """The index of a slice named by :func:`slice_name` for this pool, None for any other name."""
    prefix = slice_name(driver, pool, owner_node, 0)[:-1]
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix) :]
    if not re.fullmatch(r"[0-9a-f]+", rest) or (len(rest) > 1 and rest.startswith("0")):
        return None
    return int(rest, 16)


_NAME_TAIL_RE = re.compile(rf"-([0-9a-f]{{{HASH_LEN}}})-(?:0|[1-9a-f][0-9a-f]*)$")


def pool_hash_of(obj: Mapping[str, Any]) -> str:
    """The pool hash of a published slice: the one in its name (:func:`slice_name`; a name cannot
    change), else its ``draflow.dev/pool-hash`` label. A label is anyone's to edit: a ``kubectl label``
    that removed or changed it must not make the pool's slice look like nobody's (every sync would try
    to create it again under its name). Raises ``KeyError`` for a slice with neither."""
    meta = obj["metadata"]
    m = _NAME_TAIL_RE.search(str(meta.get("name", "")))
    return m.group(1) if m else str((meta.get("labels") or {})[POOL_HASH_LABEL])


def publisher_labels(pool: DesiredPool) -> dict[str, str]:
    return {
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
        PUBLISHER_NODE_LABEL: node_label_value(pool.owner_node),
        POOL_HASH_LABEL: pool_hash(pool.driver, pool.name, pool.owner_node),
    }


def node_owner_reference(node: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Owner reference to a Node object (garbage collection removes the slices with the node)."""
    if not node:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "name": node["metadata"]["name"],
        "uid": node["metadata"]["uid"],
        "controller": True,
    }
