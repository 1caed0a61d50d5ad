"""Socket handling without an API server: stale sockets, path limits, GetInfo over both sockets."""

from __future__ import annotations

import socket

import grpc
import pytest

from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from reference_driver.fleet import Fleet
from reference_driver.settings import DriverSettings


def settings(root, **kw) -> DriverSettings:
    return DriverSettings(
        node_name="n1", registry_dir=str(root / "reg"), plugins_dir=str(root / "pl"),
        cdi_root=str(root / "cdi"), state_dir=str(root / "st"), http_port=0, **kw,
    )


async def test_stale_sockets_are_replaced_and_removed_at_stop(short_tmp):
    stale = short_tmp / "reg" / "gpu.draflow.example-reg.sock"
    stale.parent.mkdir(parents=True)
    with socket.socket(socket.AF_UNIX) as s:  # a socket file nobody listens on, as after a crash
        s.bind(str(stale))
    fleet = Fleet(settings(short_tmp), None)
    await fleet.start()
    try:
        async with grpc.aio.insecure_channel(f"unix://{stale}") as ch:
            info = await reg_grpc.RegistrationStub(ch).GetInfo(reg_pb.InfoRequest(), timeout=5)
        assert info.endpoint == str(short_tmp / "pl" / "gpu.draflow.example" / "dra.sock")
    finally:
        await fleet.stop(grace=0)
    assert not stale.exists()
    assert not (short_tmp / "pl" / "gpu.draflow.example" / "dra.sock").exists()


async def test_a_regular_file_in_the_way_is_not_deleted(short_tmp):
    blocker = short_tmp / "pl" / "gpu.draflow.example" / "dra.sock"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a socket")
    fleet = Fleet(settings(short_tmp), None)
    with pytest.raises(FileExistsError):
        await fleet.start()
    await fleet.stop(grace=0)
    assert blocker.read_text() == "not a socket"


def test_socket_paths_longer_than_the_kernel_limit_are_refused(short_tmp):
    deep = short_tmp / ("x" * 100)
    with pytest.raises(ValueError, match="longer than 107 bytes"):
        Fleet(settings(deep), None)
