"""The reference-driver integration harness: an in-process driver with channels to its real unix sockets, and
claims allocated the way the allocator would (the fixtures that build them are in ``conftest.py``)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import grpc

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from draflow_runtime.kube import RESOURCE_CLAIMS
from reference_driver import cdi
from reference_driver.fleet import Fleet

DRIVER = "gpu.draflow.example"
# The console script `reference-driver` of this environment (PATH may not include the venv's bin).
ENTRY_POINT = str(Path(sys.executable).parent / "reference-driver")


class Driver:
    """An in-process driver (single node or fleet) and channels to its sockets."""

    def __init__(self, fleet: Fleet, root: Path) -> None:
        self.fleet = fleet
        self.root = root
        self.node_name = next(iter(fleet.nodes))
        self.node = fleet.nodes[self.node_name]
        self._channels: list[grpc.aio.Channel] = []

    def channel(self, path: Path | None = None) -> grpc.aio.Channel:
        ch = grpc.aio.insecure_channel(f"unix://{path or self.node.paths.dra_socket}")
        self._channels.append(ch)
        return ch

    def v1(self) -> dra_v1_grpc.DRAPluginStub:
        return dra_v1_grpc.DRAPluginStub(self.channel())

    def v1beta1(self) -> dra_v1beta1_grpc.DRAPluginStub:
        return dra_v1beta1_grpc.DRAPluginStub(self.channel())

    async def close(self) -> None:
        for ch in self._channels:
            await ch.close()
        await self.fleet.stop(grace=0)



async def allocated_claim(
    kube, namespace: str, device_class: str, node: str, device: str = "gpu-1",
    config: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Create a ResourceClaim and allocate ``device`` of ``node`` to it, as the allocator would."""
    claim = await kube.create(RESOURCE_CLAIMS, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"generateName": "gpu-"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }, namespace=namespace)
    allocation = {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}],
            "config": config or [],
        },
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
    }
    reserved = [{"resource": "pods", "name": "pod-0", "uid": str(uuid.uuid4())}]
    return await kube.patch(
        RESOURCE_CLAIMS, claim["metadata"]["name"],
        {"status": {"allocation": allocation, "reservedFor": reserved}},
        namespace=namespace, subresource="status",
    )


def claim_ref(obj: dict[str, Any], pb: Any = dra_v1) -> Any:
    meta = obj["metadata"]
    return pb.Claim(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


def sharing(interval: str) -> list[dict[str, Any]]:
    return [{"source": "FromClaim", "requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": f"{DRIVER}/v1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": interval}}}}}]


def cdi_file(drv: Driver, uid: str) -> Path:
    return drv.node.paths.cdi_root / cdi.spec_file_name(DRIVER, "gpu", uid)
