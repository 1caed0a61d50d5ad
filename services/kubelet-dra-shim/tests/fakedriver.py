"""A tiny, test-only DRA driver: registration + DRA v1/v1beta1 + health over real unix sockets.

It reads each claim from the API server (like a real driver), validates an opaque config of the shape
``{"kind": "GpuConfig", "sharing": {...}}`` strictly (unknown fields are errors naming the field),
writes one CDI spec per claim into its CDI root and removes it on unprepare. Tests assert on what it
leaves behind (files, pod status), not on the calls it received; ``registrations`` exists only to see
the NotifyRegistrationStatus answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import grpc

from draflow_protos.dra.v1 import api_pb2 as v1
from draflow_protos.dra.v1 import api_pb2_grpc as v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2 as v1beta1
from draflow_protos.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_pb2
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from draflow_runtime import tracing
from draflow_runtime.kube import RESOURCE_CLAIMS

HEALTH_V1 = "v1.DRAResourceHealth"
HEALTH_V1ALPHA1 = "v1alpha1.DRAResourceHealth"
HEALTH_BOTH = (HEALTH_V1, HEALTH_V1ALPHA1)
_HEALTH_MODULES = {
    HEALTH_V1: (health_v1, health_v1_grpc),
    HEALTH_V1ALPHA1: (health_v1alpha1, health_v1alpha1_grpc),
}

CONFIG_FIELDS = {"apiVersion", "kind", "sharing"}
SHARING_FIELDS = {"strategy", "timeSlicing"}


def check_config(params: dict[str, Any]) -> str:
    """'' if valid, else a message naming the first unknown field."""
    for key in params:
        if key not in CONFIG_FIELDS:
            return f"invalid opaque config: unknown field {key!r}"
    for key in params.get("sharing") or {}:
        if key not in SHARING_FIELDS:
            return f"invalid opaque config: unknown field 'sharing.{key}'"
    return ""


class FakeDriver:
    def __init__(
        self,
        name: str,
        registry_dir: Path,
        plugins_dir: Path,
        cdi_root: Path,
        kube: Any,
        *,
        versions: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin"),
        health: tuple[str, ...] = (),
        socket_suffix: str = "",
        tracer_provider: Any = None,
        one_socket: bool = False,
    ) -> None:
        self.name = name
        self.kube = kube
        self.cdi_root = cdi_root
        self.reg_socket = registry_dir / f"{name}{socket_suffix}-reg.sock"
        self.dra_socket = plugins_dir / name / f"dra{socket_suffix}.sock"
        self.versions = versions
        self.one_socket = one_socket  # every service on the registration socket, GetInfo endpoint ""
        self.health = health  # DRAResourceHealth services advertised and served (e.g. HEALTH_BOTH)
        self.health_streams: list[str] = []  # the service of every NodeWatchResources call received
        self.registrations: list[tuple[bool, str]] = []
        self.prepare_calls = 0
        self.unprepared: list[str] = []  # claim UIDs of every NodeUnprepareResources received
        self.fail_unprepare: dict[str, str] = {}  # claim name -> the error its unprepare answers
        self.prepared: list[str] = []  # claim UIDs of every NodePrepareResources received
        self.fail_prepare: dict[str, str] = {}  # claim name -> the error its prepare answers
        self.answer_nothing: set[str] = set()  # claim names left out of both calls' answers
        self.abort: str = ""  # when set, both calls fail with gRPC INTERNAL and this message
        self.held_unprepare: dict[str, asyncio.Event] = {}  # claim name -> its unprepare waits for the event
        self.device_health: dict[tuple[str, str], int] = {}
        self.held: dict[str, asyncio.Event] = {}  # claim name -> prepare of it waits until the event is set
        self.blocked: set[str] = set()  # claim names whose prepare is waiting on ``held`` right now
        self._health_changed = asyncio.Event()
        self._servers: list[grpc.aio.Server] = []
        self._interceptors = tracing.grpc_server_interceptors(tracer_provider) if tracer_provider else None

    @property
    def cdi_kind(self) -> str:
        return f"{self.name}/gpu"

    def spec_path(self, claim_uid: str) -> Path:
        return self.cdi_root / f"{self.name}-gpu_{claim_uid}.json"

    async def start(self) -> None:
        for path in (self.reg_socket, self.dra_socket):
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.cdi_root.mkdir(parents=True, exist_ok=True)
        dra = grpc.aio.server(interceptors=self._interceptors)
        v1_grpc.add_DRAPluginServicer_to_server(_Dra(self, v1), dra)
        v1beta1_grpc.add_DRAPluginServicer_to_server(_Dra(self, v1beta1), dra)
        for service in self.health:
            messages, grpc_module = _HEALTH_MODULES[service]
            grpc_module.add_DRAResourceHealthServicer_to_server(_Health(self, service, messages), dra)
        if self.one_socket:
            reg_grpc.add_RegistrationServicer_to_server(_Registration(self), dra)
            dra.add_insecure_port(f"unix:{self.reg_socket}")
            await dra.start()
            self._servers = [dra]
            return
        dra.add_insecure_port(f"unix:{self.dra_socket}")
        await dra.start()
        reg = grpc.aio.server()
        reg_grpc.add_RegistrationServicer_to_server(_Registration(self), reg)
        reg.add_insecure_port(f"unix:{self.reg_socket}")
        await reg.start()
        self._servers = [dra, reg]

    async def stop(self) -> None:
        for server in self._servers:
            await server.stop(None)
        self._servers = []
        for path in (self.reg_socket, self.dra_socket):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def set_health(self, pool: str, device: str, state: int) -> None:
        self.device_health[(pool, device)] = state
        self._health_changed.set()

    def hold(self, claim_name: str) -> asyncio.Event:
        """Make NodePrepareResources hang on ``claim_name`` until the returned event is set."""
        self.held[claim_name] = asyncio.Event()
        return self.held[claim_name]

    async def prepare_claim(self, ns: str, name: str, uid: str) -> tuple[list[dict[str, Any]], str]:
        release = self.held.get(name)
        if release is not None:
            self.blocked.add(name)
            try:
                await release.wait()
            finally:
                self.blocked.discard(name)
        claim = await self.kube.get(RESOURCE_CLAIMS, name, namespace=ns)
        if claim["metadata"]["uid"] != uid:
            return [], f"claim {ns}/{name} has UID {claim['metadata']['uid']}, not {uid}"
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            return [], "claim is not allocated"
        for cfg in allocation["devices"].get("config") or []:
            opaque = cfg.get("opaque") or {}
            if opaque.get("driver") == self.name:
                msg = check_config(opaque.get("parameters") or {})
                if msg:
                    return [], msg
        devices = []
        spec_devices = []
        for r in allocation["devices"]["results"]:
            if r["driver"] != self.name:
                continue
            dev_name = f"{uid}-{r['device']}"
            spec_devices.append(
                {
                    "name": dev_name,
                    "containerEdits": {
                        "env": [f"DRAFLOW_{r['device'].upper().replace('-', '_')}={r['pool']}/{r['device']}"]
                    },
                }
            )
            devices.append(
                {
                    "request": r["request"].split("/")[0],
                    "pool": r["pool"],
                    "device": r["device"],
                    "cdi": f"{self.cdi_kind}={dev_name}",
                }
            )
        spec = {"cdiVersion": "0.6.0", "kind": self.cdi_kind, "devices": spec_devices}
        tmp = self.spec_path(uid).with_suffix(".tmp")
        tmp.write_text(json.dumps(spec))
        os.replace(tmp, self.spec_path(uid))
        return devices, ""


class _Registration(reg_grpc.RegistrationServicer):
    def __init__(self, driver: FakeDriver) -> None:
        self.d = driver

    async def GetInfo(self, request: Any, context: Any) -> Any:
        versions = list(self.d.versions) + list(self.d.health)
        return reg_pb2.PluginInfo(
            type="DRAPlugin",
            name=self.d.name,
            endpoint="" if self.d.one_socket else str(self.d.dra_socket),
            supported_versions=versions,
        )

    async def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        self.d.registrations.append((request.plugin_registered, request.error))
        return reg_pb2.RegistrationStatusResponse()


class _Dra:
    def __init__(self, driver: FakeDriver, module: Any) -> None:
        self.d = driver
        self.m = module

    async def NodePrepareResources(self, request: Any, context: Any) -> Any:
        self.d.prepare_calls += 1
        self.d.prepared.extend(c.uid for c in request.claims)
        if self.d.abort:
            await context.abort(grpc.StatusCode.INTERNAL, self.d.abort)
        resp = self.m.NodePrepareResourcesResponse()
        for c in request.claims:
            if c.name in self.d.answer_nothing:
                continue
            if c.name in self.d.fail_prepare:
                resp.claims[c.uid].error = self.d.fail_prepare[c.name]
                continue
            devices, error = await self.d.prepare_claim(c.namespace, c.name, c.uid)
            out = resp.claims[c.uid]
            if error:
                out.error = error
                continue
            for dev in devices:
                out.devices.append(
                    self.m.Device(
                        request_names=[dev["request"]],
                        pool_name=dev["pool"],
                        device_name=dev["device"],
                        cdi_device_ids=[dev["cdi"]],
                    )
                )
        return resp

    async def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        if self.d.abort:
            await context.abort(grpc.StatusCode.INTERNAL, self.d.abort)
        resp = self.m.NodeUnprepareResourcesResponse()
        for c in request.claims:
            self.d.unprepared.append(c.uid)
            if c.name in self.d.held_unprepare:
                await self.d.held_unprepare[c.name].wait()
            if c.name in self.d.answer_nothing:
                continue
            if c.name in self.d.fail_unprepare:
                resp.claims[c.uid].error = self.d.fail_unprepare[c.name]
                continue
            with contextlib.suppress(FileNotFoundError):
                self.d.spec_path(c.uid).unlink()
            resp.claims[c.uid].error = ""
        return resp


class _Health:
    def __init__(self, driver: FakeDriver, service: str, messages: Any) -> None:
        self.d = driver
        self.service = service
        self.m = messages

    async def NodeWatchResources(self, request: Any, context: Any) -> Any:
        self.d.health_streams.append(self.service)
        while True:
            self.d._health_changed.clear()
            yield self.m.NodeWatchResourcesResponse(
                devices=[
                    self.m.DeviceHealth(
                        device=self.m.DeviceIdentifier(pool_name=p, device_name=d),
                        health=state,
                        health_check_timeout_seconds=60,
                    )
                    for (p, d), state in self.d.device_health.items()
                ]
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.d._health_changed.wait(), 5)
