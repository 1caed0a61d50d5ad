"""Node filters of a pod without tolerations, node selector or affinity are memoised per node object
(nodes.py ``_PLAIN``): the answer must follow every new version of the node, and pods that have any of
those still get their own answer for the same node."""

from __future__ import annotations

from typing import Any

from structured_allocator.nodes import node_filter_reason


def node(rv: str | None, *, ready: bool = True, unschedulable: bool = False,
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n1", "labels": {"zone": "a"}}
    if rv is not None:
        meta["resourceVersion"] = rv
    spec: dict[str, Any] = {"unschedulable": unschedulable}
    if taints:
        spec["taints"] = taints
    return {"metadata": meta, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


PLAIN: dict[str, Any] = {"spec": {"containers": [{"name": "c"}]}}
TOLERANT: dict[str, Any] = {"spec": {"tolerations": [{"operator": "Exists"}]}}
SELECTIVE: dict[str, Any] = {"spec": {"nodeSelector": {"zone": "b"}}}
GPU_TAINT = [{"key": "gpu", "effect": "NoSchedule"}]


def test_each_new_version_of_a_node_is_filtered_afresh() -> None:
    assert node_filter_reason(node("1"), PLAIN) is None
    assert node_filter_reason(node("2", ready=False), PLAIN) == "were not ready"
    assert node_filter_reason(node("3", unschedulable=True), PLAIN) == "were unschedulable"
    assert node_filter_reason(node("4", taints=GPU_TAINT), PLAIN) == "had untolerated taint {gpu: NoSchedule}"
    assert node_filter_reason(node("5"), PLAIN) is None


def test_the_same_node_object_answers_each_pod_for_itself() -> None:
    tainted = node("7", taints=GPU_TAINT)
    assert node_filter_reason(tainted, PLAIN) == "had untolerated taint {gpu: NoSchedule}"
    assert node_filter_reason(tainted, TOLERANT) is None
    assert node_filter_reason(node("8"), SELECTIVE) == "didn't match Pod's node selector"
    assert node_filter_reason(tainted, PLAIN) == "had untolerated taint {gpu: NoSchedule}"


def test_a_node_without_resource_version_is_not_memoised() -> None:
    n = node(None)
    assert node_filter_reason(n, PLAIN) is None
    n["spec"]["unschedulable"] = True  # a hand-built object changed in place (never an informer's)
    assert node_filter_reason(n, PLAIN) == "were unschedulable"
