"""Misbehaving plugins for the registry directory the kubelet-dra-shim and the slice-publisher watch:
gRPC registration servers that answer GetInfo wrongly or never, sockets that talk garbage or hang up,
and a "driver" whose inventory the API server cannot store. Test-only; they run in the test process."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_protos.inventory.v1 import inventory_pb2_grpc as inv_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc


class FakeRegistration(reg_grpc.RegistrationServicer):
    """GetInfo answers ``info`` (or never, ``hang``); NotifyRegistrationStatus answers are recorded."""

    def __init__(self, info: reg_pb.PluginInfo | None, hang: bool = False) -> None:
        self.info = info
        self.hang = hang
        self.statuses: list[reg_pb.RegistrationStatus] = []

    async def GetInfo(self, request: Any, context: Any) -> reg_pb.PluginInfo:
        if self.hang or self.info is None:
            await asyncio.Event().wait()
        assert self.info is not None
        return self.info

    async def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        self.statuses.append(request)
        return reg_pb.RegistrationStatusResponse()


class BadInventory(inv_grpc.InventoryServicer):
    """Streams one inventory message (``response``), then keeps the stream open."""

    def __init__(self, response: inv.ListAndWatchResourcesResponse) -> None:
        self.response = response
        self.streams = 0

    async def ListAndWatchResources(self, request: Any, context: Any) -> AsyncIterator[Any]:
        self.streams += 1
        yield self.response
        await asyncio.Event().wait()


class FakePlugins:
    """Start fakes in directories; ``close()`` stops every one and removes its socket."""

    def __init__(self) -> None:
        self._servers: list[grpc.aio.Server] = []
        self._raw: list[asyncio.AbstractServer] = []
        self.paths: list[Path] = []

    async def grpc(self, path: Path, registration: FakeRegistration,
                   inventory: BadInventory | None = None) -> Path:
        server = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(registration, server)
        if inventory is not None:
            inv_grpc.add_InventoryServicer_to_server(inventory, server)
        server.add_insecure_port(f"unix:{path}")
        await server.start()
        self._servers.append(server)
        self.paths.append(path)
        return path

    async def raw(self, path: Path, behaviour: str) -> Path:
        """A plain unix socket server: ``garbage`` (random bytes, then close), ``close`` (hang up at
        once) or ``silent`` (accept, read, never answer)."""

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                if behaviour == "garbage":
                    writer.write(os.urandom(8192))
                    with contextlib.suppress(ConnectionError):
                        await writer.drain()
                elif behaviour == "silent":
                    with contextlib.suppress(ConnectionError):
                        while await reader.read(65536):
                            pass
            finally:
                writer.close()

        server = await asyncio.start_unix_server(on_connect, path=str(path))
        self._raw.append(server)
        self.paths.append(path)
        return path

    async def close(self) -> None:
        for server in self._servers:
            await server.stop(grace=None)
        for raw in self._raw:
            raw.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(raw.wait_closed(), 5)
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
