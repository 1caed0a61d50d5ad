"""The driver's plugin registration socket over real gRPC, as the kubelet's plugin manager calls it.

Clients are the stubs generated from our protos, i.e. what a kubelet (or kubelet-dra-shim) sends. Every test
with a driver runs twice (``driver_identity``): as the admin and with only the driver's deploy/kustomize RBAC.
"""

from __future__ import annotations

import os

import grpc
import pytest
from rd_harness import DRIVER

from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc

pytestmark = pytest.mark.integration


async def test_get_info_returns_the_plugin_info_the_kubelet_expects(driver):
    stub = reg_grpc.RegistrationStub(driver.channel(driver.node.paths.registration_socket))
    info = await stub.GetInfo(reg_pb.InfoRequest())
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(driver.root / "plugins" / DRIVER / "dra.sock")
    assert os.path.isabs(info.endpoint)
    assert list(info.supported_versions) == [
        "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]
    assert driver.node.paths.registration_socket == driver.root / "registry" / f"{DRIVER}-reg.sock"

    await stub.NotifyRegistrationStatus(reg_pb.RegistrationStatus(plugin_registered=True))
    assert driver.node.registered is True
    with pytest.raises(grpc.aio.AioRpcError) as info_err:
        await stub.NotifyRegistrationStatus(
            reg_pb.RegistrationStatus(plugin_registered=False, error="version mismatch"))
    assert "version mismatch" in (info_err.value.details() or "")
    assert driver.node.registered is False
