"""Conformance table: optional node operations (DRAOptionalNodeOperations, alpha, off by default;
``Features(optional_node_operations=True)``). A device of a slice with ``skipNodeOperations`` goes only
to a node whose ``status.declaredFeatures`` (published by the kubelet) lists DRAOptionalNodeOperations,
and its result carries the slice's ``skipNodeOperations``; with the gate off it is never allocated.

Case format and runner: ``conformance_kit.py``; mapping to upstream's table: ``conformance_map.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_kit import Case, check_case, params
from sa_builders import NODE, alloc, claim, dev, req, res, rslice

from structured_allocator.core import Features
from structured_allocator.nodes import claim_selector_reason

OPS = Features(optional_node_operations=True)
DECLARING = {**NODE, "status": {"declaredFeatures": ["SomethingElse", "DRAOptionalNodeOperations"]}}
OTHER_FEATURES = {**NODE, "status": {"declaredFeatures": ["SomethingElse"]}}
SKIP_ALL = rslice("s", [dev("gpu-0")], skipNodeOperations=["*"])
SKIP_PREPARE = rslice("s", [dev("gpu-0")], skipNodeOperations=["NodePrepareResources"])

CASES: dict[str, Case] = {
    "skip-all-on-a-declaring-node": Case(
        [claim("c", req("gpu"))],
        [SKIP_ALL],
        [alloc(res("gpu", "gpu-0", skipNodeOperations=["*"]))],
        node=DECLARING,
        features=OPS,
        upstream=("optional-node-operations",),
    ),
    "node-without-the-declared-feature-gets-nothing": Case(
        [claim("c", req("gpu"))],
        [SKIP_ALL],
        None,
        features=OPS,
        upstream=("optional-node-operations-missing-feature",),
    ),
    "node-declaring-other-features-only-gets-nothing": Case(
        [claim("c", req("gpu"))], [SKIP_ALL], None, node=OTHER_FEATURES, features=OPS
    ),
    "gate-off-never-allocates-such-a-device": Case(
        [claim("c", req("gpu"))], [SKIP_ALL], None, node=DECLARING
    ),
    "the-slice-list-is-copied-as-is": Case(
        [claim("c", req("gpu"))],
        [SKIP_PREPARE],
        [alloc(res("gpu", "gpu-0", skipNodeOperations=["NodePrepareResources"]))],
        node=DECLARING,
        features=OPS,
    ),
    "other-slices-need-nothing-from-the-node": Case(
        [claim("c", req("gpu", count=2))],
        [SKIP_ALL, rslice("plain", [dev("gpu-1"), dev("gpu-2")], pool="other")],
        [alloc(res("gpu", "gpu-1", pool="other"), res("gpu", "gpu-2", pool="other"))],
        features=OPS,
    ),
    "mixed-results-only-skip-where-the-slice-says-so": Case(
        [claim("c", req("gpu", count=2))],
        [SKIP_ALL, rslice("plain", [dev("gpu-1")], pool="other")],
        [alloc(res("gpu", "gpu-0", skipNodeOperations=["*"]), res("gpu", "gpu-1", pool="other"))],
        node=DECLARING,
        features=OPS,
    ),
}


@pytest.mark.parametrize("case", params(CASES))
def test_optional_node_operations(case: Case) -> None:
    check_case(case)


# An allocated claim: kube-scheduler's DynamicResources Filter (v1.37.1 dynamicresources.go,
# allocationResultRequiresDRAOptionalNodeOperations) keeps its pod off nodes that do not declare
# DRAOptionalNodeOperations, whatever the scheduler's own gate says.
ALLOCATED_SKIPPING = {"devices": {"results": [
    {"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-0", "skipNodeOperations": ["*"]}]}}
ALLOCATED_PLAIN = {"devices": {"results": [
    {"request": "gpu", "driver": "d", "pool": "p", "device": "gpu-0"}]}}


@pytest.mark.parametrize(("node", "allocation", "refused"), [
    pytest.param(DECLARING, ALLOCATED_SKIPPING, False, id="declaring-node"),
    pytest.param(OTHER_FEATURES, ALLOCATED_SKIPPING, True, id="node-without-the-feature"),
    pytest.param(NODE, ALLOCATED_SKIPPING, True, id="node-declaring-nothing"),
    pytest.param(NODE, ALLOCATED_PLAIN, False, id="no-skips-any-node"),
])
def test_an_allocated_claim_that_skips_node_operations_needs_a_declaring_node(
    node: dict[str, Any], allocation: dict[str, Any], refused: bool
) -> None:
    reason = claim_selector_reason(node, [allocation])
    assert (reason is not None) == refused, reason
    if refused:
        assert "does not declare DRAOptionalNodeOperations" in str(reason)
