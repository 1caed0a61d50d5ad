"""The web view over real informers (real kube-apiserver): ``state.json`` is built from the caches, and
rebuilt only after something it shows has changed, however often it is asked for."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from draflow_runtime.kube import RESOURCE_SLICES, KubeClient
from draflow_testenv.wait import eventually
from structured_allocator.explain_http import ExplanationStore
from structured_allocator.state import ClusterState
from structured_allocator.ui import WebView


class Quiet:
    """The state's listener: the view needs no scheduling."""

    def pod_changed(self, key: str, pod: Mapping[str, Any] | None) -> None: ...
    def claim_changed(self, key: str, freed: bool) -> None: ...
    def cluster_changed(self, what: str) -> None: ...


def slice_body(name: str, node: str, devices: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "ui.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}


def row(doc: dict[str, Any], node: str) -> list[str] | None:
    found = [r for r in doc["nodes"] if r["name"] == node]
    return [d["device"] for d in found[0]["devices"]] if found else None


async def test_the_view_is_rebuilt_only_after_a_change(kube: KubeClient) -> None:
    node = f"ui-{uuid.uuid4().hex[:6]}"
    name = f"{node}-slice"
    state = ClusterState(kube, frozenset({f"sched-{node}"}), Quiet())
    await state.start()
    web = WebView(ExplanationStore(), interval=0.0, duty=1.0, max_age=3600.0)
    web.attach(state, None)
    try:
        first = json.loads(await web.state_body())
        assert first["leader"] and first["synced"] and row(first, node) is None
        await web.state_body()
        assert web.builds == 1  # asked again, nothing changed: the same document

        await kube.create(RESOURCE_SLICES, slice_body(name, node, 3))
        await eventually(lambda: state.slice_informer.get(name) is not None, 30, "the slice in the cache")
        doc = json.loads(await web.state_body())
        assert row(doc, node) == ["gpu-0", "gpu-1", "gpu-2"]
        assert {d["state"] for r in doc["nodes"] if r["name"] == node for d in r["devices"]} == {"free"}
        assert web.builds == 2
        await web.state_body()
        assert web.builds == 2
    finally:
        web.detach()
        await state.stop()
        await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
