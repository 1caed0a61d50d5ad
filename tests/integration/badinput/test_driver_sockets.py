"""Garbage and huge messages on the reference driver's unix sockets (its DRA service socket and its
plugin-registration socket), as anything with access to the kubelet's directories could send them. The
client gets a gRPC status (or a closed connection) and the driver keeps serving: the control pod is
prepared through the same socket afterwards, and the driver's /healthz answered throughout."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path

import grpc
import pytest
from badinput_kit import DRIVER, Stack

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc

pytestmark = pytest.mark.integration

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _sockets(stack: Stack) -> dict[str, Path]:
    assert stack.flow.fleet is not None
    node = stack.flow.fleet / stack.flow.nodes[0]
    return {"dra": node / "plugins" / DRIVER / "dra.sock",
            "registration": node / "plugins_registry" / f"{DRIVER}-reg.sock"}


async def _send_raw(path: Path, data: bytes) -> bytes:
    """Write ``data`` to the socket, half-close, return what came back until the server closed (or
    reset) the connection."""
    reader, writer = await asyncio.open_unix_connection(str(path))
    answer = b""
    try:
        with contextlib.suppress(ConnectionError):
            writer.write(data)
            await writer.drain()
            writer.write_eof()
            answer = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return answer


@pytest.mark.parametrize("which", ["dra", "registration"])
@pytest.mark.parametrize("data", [
    pytest.param(os.urandom(64 * 1024), id="random-bytes"),
    pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", id="http1"),
    pytest.param(H2_PREFACE + os.urandom(4096), id="h2-preface-then-garbage"),
    pytest.param(H2_PREFACE + b"\x00\xff\xff\x04\x00\x00\x00\x00\x00" + b"\x00" * 65535, id="h2-bad-frame"),
])
async def test_garbage_bytes_close_the_connection_and_the_driver_keeps_serving(
        stack: Stack, which: str, data: bytes) -> None:
    await _send_raw(_sockets(stack)[which], data)
    await stack.still_serving()


async def test_idle_and_half_open_connections_do_not_block_other_callers(stack: Stack) -> None:
    """A hundred connections that send the HTTP/2 preface and then nothing, held while the control pod is
    prepared through the same socket."""
    held = []
    try:
        for _ in range(100):
            _, writer = await asyncio.open_unix_connection(str(_sockets(stack)["dra"]))
            writer.write(H2_PREFACE)
            held.append(writer)
        await stack.still_serving()
    finally:
        for writer in held:
            writer.close()


async def test_grpc_calls_with_bad_payloads_get_a_status(stack: Stack) -> None:
    socks = _sockets(stack)
    async with grpc.aio.insecure_channel(f"unix:{socks['dra']}") as channel:
        # a method no service has
        wrong = channel.unary_unary("/v1.NoSuchService/Frobnicate")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await wrong(b"\x08\x01", timeout=30)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # a real method, bytes that are not its protobuf message
        prepare = channel.unary_unary("/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await prepare(b"\xff" * 1024, timeout=30)
        # grpcio answers a request it cannot deserialize with UNKNOWN (grpc-go: INTERNAL), naming the type
        assert err.value.code() in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), err.value
        assert "NodePrepareResourcesRequest" in (err.value.details() or ""), err.value
        # bigger than the gRPC receive limit (4 MiB): refused before it is decoded
        stub = dra_v1_grpc.DRAPluginStub(channel)
        huge = dra_v1.NodePrepareResourcesRequest(claims=[
            dra_v1.Claim(namespace="x" * 1000, name="y" * 1000, uid=str(i)) for i in range(2600)])
        assert huge.ByteSize() > 4 * 1024 * 1024
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.NodePrepareResources(huge, timeout=60)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value
        # claims that do not exist, nonsense names, duplicates: one error per claim, nothing prepared
        junk = [dra_v1.Claim(namespace=stack.ns, name=f"nosuch-{i}", uid=str(uuid.uuid4()))
                for i in range(300)]
        junk += [dra_v1.Claim(namespace="", name="", uid=""), dra_v1.Claim(namespace="../..", name="/etc",
                                                                          uid="../../x")]
        reply = await stub.NodePrepareResources(dra_v1.NodePrepareResourcesRequest(claims=junk), timeout=120)
        assert set(reply.claims) == {c.uid for c in junk}
        assert all(result.error and not result.devices for result in reply.claims.values()), reply
        unprep = await stub.NodeUnprepareResources(dra_v1.NodeUnprepareResourcesRequest(claims=junk[-2:]),
                                                   timeout=30)
        assert set(unprep.claims) == {"", "../../x"}
    async with grpc.aio.insecure_channel(f"unix:{socks['registration']}") as channel:
        reg = reg_grpc.RegistrationStub(channel)
        info = await reg.GetInfo(reg_pb.InfoRequest(), timeout=30)
        assert info.name == DRIVER
        # A registration status from nobody in particular with a 100 kB error: answered like upstream
        # (UNKNOWN "failed registration process: ..."), the echo short enough for a gRPC trailer (the
        # whole text came back as RESOURCE_EXHAUSTED "received metadata size exceeds hard limit").
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await reg.NotifyRegistrationStatus(reg_pb.RegistrationStatus(
                plugin_registered=False, error="x" * 100_000), timeout=30)
        assert err.value.code() == grpc.StatusCode.UNKNOWN, err.value
        assert (err.value.details() or "").startswith("failed registration process: xxx"), err.value
    assert not list((stack.flow.fleet or Path()).glob("**/x"))  # no path from a claim UID was used as is
    await stack.still_serving()
