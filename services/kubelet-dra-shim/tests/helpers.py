"""Integration-test helpers: objects written the way the allocator and claim-controller will, a CDI check."""

from __future__ import annotations

import inspect
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS, KubeClient
from draflow_testenv import wait

CDI_KIND = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$")
CDI_NAME = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?$")


async def eventually(check: Callable[[], Any], within: float = 30.0, interval: float = 0.1) -> Any:
    """``draflow_testenv.wait.eventually`` that also waits through NotFound (the object is not there yet)."""

    async def found() -> Any:
        try:
            value = check()
            return await value if inspect.isawaitable(value) else value
        except NotFound as exc:
            raise AssertionError(f"not found: {exc}") from exc

    return await wait.eventually(found, within, getattr(check, "__name__", ""), interval=interval)


async def device_class(kube: KubeClient, driver: str) -> str:
    name = f"shim-{uuid.uuid4().hex[:8]}"
    await kube.create(
        DEVICE_CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        },
    )
    return name


async def claim(
    kube: KubeClient,
    ns: str,
    name: str,
    cls: str,
    *,
    config: dict[str, Any] | None = None,
    driver: str = "",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}
    if config is not None:
        devices["config"] = [{"requests": ["gpu"], "opaque": {"driver": driver, "parameters": config}}]
    return await kube.create(
        RESOURCE_CLAIMS,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"devices": devices},
        },
        namespace=ns,
    )


async def pod(
    kube: KubeClient,
    ns: str,
    name: str,
    node: str,
    claims: list[str],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return await kube.create(
        PODS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {
                "nodeName": node,
                "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": c} for c in claims]},
                    }
                ],
                "terminationGracePeriodSeconds": 30,
            },
        },
        namespace=ns,
    )


async def allocate(
    kube: KubeClient,
    ns: str,
    claim_name: str,
    the_pod: dict[str, Any],
    node: str,
    driver: str,
    devices: list[str],
) -> dict[str, Any]:
    """Write status.allocation + reservedFor as the structured allocator does."""
    current = await kube.get(RESOURCE_CLAIMS, claim_name, namespace=ns)
    spec_config = current["spec"]["devices"].get("config") or []
    status = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": driver, "pool": node, "device": d} for d in devices],
                "config": [
                    {"source": "FromClaim", "requests": c.get("requests", []), "opaque": c["opaque"]}
                    for c in spec_config
                ],
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        },
        "reservedFor": [
            {"resource": "pods", "name": the_pod["metadata"]["name"], "uid": the_pod["metadata"]["uid"]}
        ],
    }
    return await kube.patch(
        RESOURCE_CLAIMS, claim_name, {"status": status}, namespace=ns, subresource="status"
    )


def validate_cdi(cdi_root: Path, ids: list[str]) -> None:
    """Every spec in ``cdi_root`` is a well-formed CDI spec, and every ID resolves to one of its devices."""
    known: set[str] = set()
    for path in cdi_root.glob("*.json"):
        spec = json.loads(path.read_text())
        assert spec.get("cdiVersion"), f"{path}: no cdiVersion"
        assert CDI_KIND.match(spec.get("kind", "")), f"{path}: bad kind {spec.get('kind')!r}"
        assert spec.get("devices"), f"{path}: no devices"
        for dev in spec["devices"]:
            assert CDI_NAME.match(dev.get("name", "")), f"{path}: bad device name {dev.get('name')!r}"
            assert dev.get("containerEdits"), f"{path}: device {dev['name']} has no containerEdits"
            known.add(f"{spec['kind']}={dev['name']}")
    missing = [i for i in ids if i not in known]
    assert not missing, f"CDI IDs not found in any spec under {cdi_root}: {missing}"
