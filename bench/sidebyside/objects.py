"""The API objects of upstream's scheduler_perf DRA workloads, written again in Python.

Shapes follow ``test/integration/scheduler_perf/dra/templates`` of Kubernetes v1.37.1:
``node-with-dra-test-driver.yaml``, ``resourceslice-basic-devices.yaml`` (the Intel-GPU-like attributes,
PCI roots cycling), ``deviceclass.yaml``, ``resourceclaim.yaml``, ``resourceclaimtemplate.yaml``
(``numRequests``, ``selectors``, ``constraints``), ``pod-with-claim-template.yaml`` and
``pod-with-claim-ref.yaml`` (five pods share one claim). Nodes get allocatable as well as capacity (what a
kubelet reports). Pure functions: parameters in, dicts out.
"""

from __future__ import annotations

from typing import Any

DRIVER = "test-driver.cdi.k8s.io"
CLASS = "test-class"
TEMPLATE = "test-claim-template"
NODE_PREFIX = "scheduler-perf-dra-"
POOL_PREFIX = "resourceslice-"
PAUSE = "registry.k8s.io/pause:3.10.1"
# The selector of upstream's selector_* workloads: every device matches, but CEL must run.
CEL_SELECTOR = ('device.attributes["test-driver.cdi.k8s.io"].driverVersion.major() >= 1 && '
                'device.capacity["test-driver.cdi.k8s.io"].memory.isGreaterThan(quantity("1Mi"))')
PCI_ROOT = "resource.kubernetes.io/pciRoot"


def node_name(i: int) -> str:
    return f"{NODE_PREFIX}{i}"


def pool_name(i: int) -> str:
    return f"{POOL_PREFIX}{i}"


def node(i: int) -> dict[str, Any]:
    resources = {"pods": "110", "cpu": "4", "memory": "32Gi", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node_name(i), "labels": {"node-with-dra": "true",
                                                      "kubernetes.io/hostname": node_name(i)}},
        "spec": {},
        "status": {"capacity": dict(resources), "allocatable": dict(resources),
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                   "phase": "Running"},
    }


def device(d: int, pci_roots: int) -> dict[str, Any]:
    root = d % pci_roots
    return {
        "name": f"basic-device-{d}",
        "attributes": {
            "driver": {"string": "xe"},
            "driverVersion": {"version": "1.2.3"},
            "resource.k8s.io/pciRoot": {"string": str(root)},
            "family": {"string": "Arc Pro B-Series"},
            "health": {"string": "Healthy"},
            "model": {"string": "B60"},
            "pciAddress": {"string": f"0000:0{d}:00.0"},
            "pciId": {"string": "0xe211"},
            "pciRoot": {"string": f"0{root}"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:0{d}:00.0"},
            PCI_ROOT: {"string": f"pci0000:0{root}"},
            "sriov": {"bool": True},
            "type": {"string": "gpu"},
        },
        "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}},
    }


def resource_slice(i: int, devices: int, pci_roots: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": pool_name(i)},
        "spec": {"driver": DRIVER, "nodeName": node_name(i),
                 "pool": {"name": pool_name(i), "generation": 1, "resourceSliceCount": 1},
                 "devices": [device(d, pci_roots) for d in range(devices)]},
    }


def device_class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def claim_spec(requests: int = 1, cel: str = "", match_attribute: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": CLASS}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    devices: dict[str, Any] = {"requests": [{"name": f"req-{k}", "exactly": dict(exactly)}
                                            for k in range(requests)]}
    if match_attribute:
        devices["constraints"] = [{"matchAttribute": match_attribute}]
    return {"devices": devices}


def claim_template(requests: int = 1, cel: str = "", match_attribute: str = "") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE},
            "spec": {"spec": claim_spec(requests, cel, match_attribute)}}


def claim(i: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"test-claim-{i}"}, "spec": claim_spec()}


def pod(name: str, scheduler: str, *, claim_name: str = "") -> dict[str, Any]:
    """A pause pod with one pod claim ``resource``: from the template, or ``claim_name`` (shared)."""
    source = {"resourceClaimName": claim_name} if claim_name else {"resourceClaimTemplateName": TEMPLATE}
    spec: dict[str, Any] = {
        "containers": [{"name": "pause", "image": PAUSE, "resources": {"claims": [{"name": "resource"}]}}],
        "resourceClaims": [{"name": "resource", **source}],
        # scheduler_perf runs without the ServiceAccount admission plugin: no token volume either way
        "automountServiceAccountToken": False,
    }
    if scheduler != "default-scheduler":
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def allocation(node: str, pool: str, devices: list[tuple[str, str]]) -> dict[str, Any]:
    """``status.allocation`` of a claim: ``devices`` as (request, device) in ``pool`` of ``node``."""
    return {"devices": {"results": [{"request": req, "driver": DRIVER, "pool": pool, "device": dev}
                                    for req, dev in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}
