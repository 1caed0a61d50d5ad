"""Optional node operations (DRAOptionalNodeOperations, alpha in Kubernetes v1.37): which driver calls a
claim's allocation lets the node skip. Pure; table-tested in ``tests/test_nodeops.py``.

A ResourceSlice may say ``skipNodeOperations: ["*"]`` (or name ``NodePrepareResources`` /
``NodeUnprepareResources``); the allocator copies that into each device's allocation result. As the
kubelet v1.37.1 does (``pkg/kubelet/cm/dra`` ``computeDriverStates``), the node skips an operation for a
driver only when **every** result of that driver in the claim skips it (``*`` counts for every
operation): one device that needs preparing means the driver is called for the whole claim.
The per-driver answer is what the checkpoint records (``DriverState.skipNodeOperations``): ``["*"]``
when every result says ``*``, else the sorted operations all results skip.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from draflow_runtime.dra import claim_results

__all__ = [
    "DECLARABLE", "GATE", "PREPARE", "SKIP_ALL", "UNPREPARE", "declared_features", "driver_skips", "skips",
]

GATE = "DRAOptionalNodeOperations"  # feature gate, and the name a node declares in status.declaredFeatures
SKIP_ALL = "*"
PREPARE = "NodePrepareResources"
UNPREPARE = "NodeUnprepareResources"

# The DRA features of the kubelet v1.37.1's node declared features registry
# (k8s.io/component-helpers/nodedeclaredfeatures/features AllFeatures), in its order: a kubelet declares
# each in Node status.declaredFeatures when its feature gate of the same name is on.
DECLARABLE = ("DRANodeAllocatableResources", GATE)


def driver_skips(claim: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per driver of the claim's allocation, the operations the node skips (drivers that skip none are
    left out)."""
    results: Counter[str] = Counter()
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    for result in claim_results(claim):
        driver = result.get("driver") or ""
        results[driver] += 1
        skipped = result.get("skipNodeOperations") or []
        if SKIP_ALL in skipped:
            ops[driver][SKIP_ALL] += 1
        else:
            for op in set(skipped):
                ops[driver][op] += 1
    out: dict[str, list[str]] = {}
    for driver, counts in ops.items():
        total, every = results[driver], counts[SKIP_ALL]
        if every == total:
            out[driver] = [SKIP_ALL]
            continue
        named = sorted(op for op, n in counts.items() if op != SKIP_ALL and n + every == total)
        if named:
            out[driver] = named
    return out


def skips(operations: Sequence[str], operation: str) -> bool:
    """Whether a driver's recorded ``operations`` skip ``operation`` (``*`` skips every one)."""
    return SKIP_ALL in operations or operation in operations


def declared_features(gates: Mapping[str, bool]) -> list[str]:
    """The DRA entries of ``status.declaredFeatures`` a kubelet with these gates publishes."""
    return [name for name in DECLARABLE if gates.get(name)]
