"""Optional node operations: which driver calls a claim's allocation lets the node skip (kubelet v1.37.1
``computeDriverStates``), and what a simulated node declares in ``status.declaredFeatures``."""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_dra_shim.nodeops import PREPARE, UNPREPARE, declared_features, driver_skips, skips
from kubelet_dra_shim.simkubelet import node_object


def _claim(*results: tuple[str, list[str] | None]) -> dict[str, Any]:
    out = []
    for i, (driver, ops) in enumerate(results):
        r: dict[str, Any] = {"request": "r", "driver": driver, "pool": "p", "device": f"d{i}"}
        if ops is not None:
            r["skipNodeOperations"] = ops
        out.append(r)
    return {"status": {"allocation": {"devices": {"results": out}}}}


@pytest.mark.parametrize(("claim", "want"), [
    pytest.param(_claim(("a", None)), {}, id="no-skips"),
    pytest.param(_claim(("a", ["*"]), ("a", ["*"])), {"a": ["*"]}, id="all-results-skip-all"),
    pytest.param(_claim(("a", ["*"]), ("a", None)), {}, id="one-result-needs-the-driver"),
    pytest.param(_claim(("a", ["*"]), ("a", [UNPREPARE])), {"a": [UNPREPARE]}, id="star-counts-for-each-op"),
    pytest.param(_claim(("a", [UNPREPARE, PREPARE]), ("a", [PREPARE])), {"a": [PREPARE]}, id="common-ops"),
    pytest.param(_claim(("a", [UNPREPARE, PREPARE])), {"a": [PREPARE, UNPREPARE]}, id="sorted"),
    pytest.param(_claim(("a", ["*"]), ("b", None), ("b", [PREPARE])), {"a": ["*"]}, id="per-driver"),
    pytest.param({"status": {}}, {}, id="not-allocated"),
])
def test_a_driver_is_skipped_only_when_every_result_of_it_skips(claim: dict[str, Any],
                                                                  want: dict[str, list[str]]) -> None:
    assert driver_skips(claim) == want


def test_star_skips_every_operation_and_a_named_one_only_itself() -> None:
    assert skips(["*"], PREPARE) and skips(["*"], UNPREPARE)
    assert skips([PREPARE], PREPARE) and not skips([PREPARE], UNPREPARE)
    assert not skips([], PREPARE)


def test_the_node_declares_the_dra_features_whose_gates_are_on_in_the_kubelets_order() -> None:
    assert declared_features({"DRAOptionalNodeOperations": True}) == ["DRAOptionalNodeOperations"]
    both = {"DRAOptionalNodeOperations": True, "DRANodeAllocatableResources": True}
    assert declared_features(both) == ["DRANodeAllocatableResources", "DRAOptionalNodeOperations"]
    assert declared_features({"DRAOptionalNodeOperations": False}) == []


def test_a_node_declares_features_only_when_there_are_some() -> None:
    node = node_object("n", "1", "1Gi", "10", "2026-01-01T00:00:00Z", ["DRAOptionalNodeOperations"])
    assert node["status"]["declaredFeatures"] == ["DRAOptionalNodeOperations"]
    assert "declaredFeatures" not in node_object("n", "1", "1Gi", "10", "2026-01-01T00:00:00Z")["status"]
