"""deploy/demo and its README *Try it* extras (deploy/demo/extras) are valid for the pinned kube-apiserver
(server-side dry run of every object) and show what they promise: template claims, a shared claim, CEL on
memory, firstAvailable, partitions, every pod on the draflow scheduler; in the extras, one claim that cannot
fit and a pod asking for GPUs through resources.limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NAMESPACES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    SERVICE_ACCOUNTS,
    KubeClient,
)

DEMO = Path(__file__).resolve().parents[3] / "deploy" / "demo"
EXTRAS = DEMO / "extras"
RESOURCES = {r.kind: r for r in (NAMESPACES, SERVICE_ACCOUNTS, DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES,
                                 RESOURCE_CLAIMS, PODS)}


def objects_of(directory: Path) -> list[dict[str, Any]]:
    order = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]
    return [doc for f in order for doc in yaml.safe_load_all((directory / f).read_text()) if doc]


def demo_objects() -> list[dict[str, Any]]:
    """The demo, then its extras (applied after it: they use its namespace and DeviceClasses)."""
    return [*objects_of(DEMO), *objects_of(EXTRAS)]


def test_the_demo_covers_every_feature_it_promises() -> None:
    objs = demo_objects()
    pods = [o for o in objs if o["kind"] == "Pod"]
    assert pods and all(p["spec"]["schedulerName"] == "draflow" for p in pods)
    claim_refs = [c for p in pods for c in p["spec"].get("resourceClaims", [])]
    assert any("resourceClaimTemplateName" in c for c in claim_refs)
    shared = [c["resourceClaimName"] for c in claim_refs if c.get("resourceClaimName") == "shared-gpu"]
    assert len(shared) >= 2
    text = "\n".join((DEMO / f).read_text() for f in ("10-deviceclasses.yaml", "20-claims.yaml"))
    assert 'memory.compareTo(quantity("' in text and "firstAvailable" in text
    assert {o["metadata"]["name"] for o in objs if o["kind"] == "DeviceClass"} >= {
        "gpu.draflow.example", "gpu-large.draflow.example", "gpu-partition.draflow.example"
    }
    legacy = [p for p in pods if "gpu.draflow.example/gpu" in p["spec"]["containers"][0]["resources"].get(
        "limits", {})]
    assert legacy and not legacy[0]["spec"].get("resourceClaims")  # extended resources backed by DRA
    (gpu_class,) = [o for o in objs
                    if o["kind"] == "DeviceClass" and o["metadata"]["name"] == "gpu.draflow.example"]
    assert gpu_class["spec"]["extendedResourceName"] == "gpu.draflow.example/gpu"
    (too_big,) = [o for o in objs if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == "too-big"]
    assert too_big["spec"]["devices"]["requests"][0]["exactly"]["count"] > 8  # nodes have 8 GPUs
    # make up's demo holds only pods that run; the one that cannot and the extended-resource one are extras
    extras = {(o["kind"], o["metadata"]["name"]) for o in objects_of(EXTRAS)}
    assert extras == {("ResourceClaim", "too-big"), ("Pod", "too-big"), ("Pod", "legacy-gpus")}
    assert not extras & {(o["kind"], o["metadata"]["name"]) for o in objects_of(DEMO)}


@pytest.mark.integration
async def test_every_demo_object_passes_server_side_validation(kube: KubeClient, make_namespace: Any) -> None:
    ns = await make_namespace("demo-dry-run")
    for obj in demo_objects():
        res = RESOURCES[obj["kind"]]
        body = dict(obj, metadata=dict(obj["metadata"]))
        if res.namespaced:
            body["metadata"]["namespace"] = ns
        elif obj["kind"] == "Namespace":
            body["metadata"]["name"] = f"{ns}-x"
        if obj["kind"] == "ServiceAccount":
            body["metadata"]["name"] = "demo-default"  # make_namespace made `default` already
        path = res.path(namespace=ns if res.namespaced else None)
        created = await kube.request("POST", path, body, query={"dryRun": "All"})
        assert created["metadata"]["name"] == body["metadata"]["name"]
