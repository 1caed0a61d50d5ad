"""The claims a kubelet already read, passed to the driver with ``NodePrepareResources`` (gRPC metadata).

The kubelet (kubelet-dra-shim) GETs every claim live before it calls ``NodePrepareResources``, and
upstream's kubeletplugin helper GETs each of them again in the driver: a second API round trip on the
critical path of every pod start (about half of the call's time, measured: docs/benchmarks.md).
kubelet-dra-shim therefore also sends what it read, and a driver that understands it uses it instead of its
own GET; a driver that does not, or a call without it (an upstream kubelet), reads the API server as before.

Wire format: one binary metadata entry ``draflow-claim-bin`` per claim, the JSON of the claim reduced to
what a driver reads (``metadata`` name, namespace, uid, resourceVersion, generation; ``spec``;
``status.allocation``), at most :data:`BUDGET` bytes in all; the claims that do not fit are not sent, the
driver reads those. A grpc (C core) server refuses a call whose metadata exceeds 8 KiB now and then and
always above 16 KiB (measured: 7,000 bytes of value pass, 9,000 fail 3 calls in 20): 4 KiB leaves room for
the trace context and the call's own headers. Pure functions.

The claim is as fresh as the driver's own GET would be: the kubelet read it, checked that the pod is in
``reservedFor`` and holds the claim's lock until the call returns. Only the caller of the driver's socket
can pass one, the same caller that already names the claims to prepare.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["BUDGET", "METADATA_KEY", "claims_from_metadata", "claims_metadata", "reduced"]

METADATA_KEY = "draflow-claim-bin"
BUDGET = 4 * 1024


def reduced(claim: Mapping[str, Any]) -> dict[str, Any]:
    """What a driver reads of ``claim``."""
    meta = claim.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "generation")
                     if k in meta},
        "spec": claim.get("spec") or {},
        "status": {"allocation": (claim.get("status") or {}).get("allocation")},
    }


def claims_metadata(claims: Iterable[Mapping[str, Any]], budget: int = BUDGET) -> list[tuple[str, bytes]]:
    """gRPC metadata entries for ``claims``, in order, as long as they fit in ``budget`` bytes."""
    entries: list[tuple[str, bytes]] = []
    used = 0
    for claim in claims:
        value = json.dumps(reduced(claim), separators=(",", ":")).encode()
        if used + len(value) > budget:
            continue
        used += len(value)
        entries.append((METADATA_KEY, value))
    return entries


def claims_from_metadata(metadata: Iterable[tuple[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Claim UID -> claim, from a call's invocation metadata; entries that do not decode are ignored
    (the driver then reads that claim itself)."""
    found: dict[str, dict[str, Any]] = {}
    for key, value in metadata or ():
        if key != METADATA_KEY:
            continue
        try:
            claim = json.loads(value)
            uid = claim["metadata"]["uid"]
        except (ValueError, TypeError, KeyError):
            continue
        if isinstance(uid, str) and uid:
            found[uid] = claim
    return found
