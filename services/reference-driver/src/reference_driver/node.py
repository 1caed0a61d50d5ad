"""One node served by the driver: its directories, prepared claims, health, inventory and gRPC server.

A :class:`NodeDriver` is everything the gRPC services of one node need; single-node mode has one,
fleet mode (:mod:`reference_driver.fleet`) many, all sharing one :class:`InventorySource` and one
``KubeClient``. Changes (inventory file, health file) bump :attr:`NodeDriver.changes`, which wakes the
node's streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from prometheus_client import Counter, Histogram

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_runtime.errors import ApiError, NotFound, TransportError
from draflow_runtime.kube import RESOURCE_CLAIMS, KubeClient
from draflow_runtime.log import bind, get_logger
from reference_driver import health
from reference_driver.checkpoint import PreparedDevice
from reference_driver.health import HealthControl
from reference_driver.inventory import InventorySource, build_pool, with_partition_type
from reference_driver.state import ClaimError, DeviceState, DriverIdentity

log = get_logger(__name__)

# No node label: in fleet mode that would be a thousand series per metric.
CLAIM_OPERATIONS = Counter(
    "draflow_driver_claim_operations_total", "Claims prepared or unprepared, by outcome.",
    ["operation", "result"],
)
BATCH_DURATION = Histogram(
    "draflow_driver_batch_duration_seconds", "Duration of NodePrepareResources/NodeUnprepareResources.",
    ["operation"], buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

PREPARE_CONCURRENCY = 16
"""Claims of one NodePrepareResources batch read and prepared at the same time (a pod has a few)."""
MAX_UNIX_PATH = 107  # sun_path is 108 bytes including the terminating NUL


@dataclass(frozen=True)
class NodePaths:
    """Where one node's files live."""

    registration_socket: Path  # <registry dir>/<driver>-reg.sock
    dra_socket: Path  # <plugins dir>/<driver>/dra.sock
    cdi_root: Path
    state_dir: Path

    @classmethod
    def kubelet_layout(
        cls, driver: str, *, registry_dir: str, plugins_dir: str, cdi_root: str, state_dir: str
    ) -> NodePaths:
        return cls(
            registration_socket=Path(registry_dir).absolute() / f"{driver}-reg.sock",
            dra_socket=Path(plugins_dir).absolute() / driver / "dra.sock",
            cdi_root=Path(cdi_root).absolute(),
            state_dir=Path(state_dir).absolute(),
        )

    @classmethod
    def fleet_layout(cls, driver: str, root: str, node: str) -> NodePaths:
        base = Path(root).absolute() / node
        return cls.kubelet_layout(
            driver,
            registry_dir=str(base / "plugins_registry"),
            plugins_dir=str(base / "plugins"),
            cdi_root=str(base / "cdi"),
            state_dir=str(base / "state"),
        )

    def check(self) -> None:
        for sock in (self.registration_socket, self.dra_socket):
            if len(str(sock).encode()) > MAX_UNIX_PATH:
                raise ValueError(f"socket path {sock} is longer than {MAX_UNIX_PATH} bytes")

    def create(self) -> None:
        for directory in (self.registration_socket.parent, self.dra_socket.parent, self.cdi_root,
                          self.state_dir):
            directory.mkdir(parents=True, exist_ok=True)


class Changes:
    """A revision counter whose waiters wake on every bump (a broadcast, no queue per waiter)."""

    def __init__(self) -> None:
        self.revision = 0
        self._event: asyncio.Event | None = None

    def bump(self) -> None:
        self.revision += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self, seen: int) -> None:
        """Return once the revision is past ``seen``."""
        while self.revision == seen:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()


def _names(claim: Mapping[str, Any] | None, namespace: str, name: str) -> bool:
    """Is ``claim`` (passed by the caller) the claim the request names? Its UID is checked later, as for a
    claim read from the API server."""
    meta = (claim or {}).get("metadata") or {}
    return claim is not None and (meta.get("namespace"), meta.get("name")) == (namespace, name)


@dataclass(frozen=True)
class PrepareOutcome:
    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class NodeDriver:
    """Everything one node's gRPC services need."""

    def __init__(
        self,
        *,
        node_name: str,
        identity: DriverIdentity,
        paths: NodePaths,
        inventory: InventorySource,
        kube: KubeClient | None,
        health_check_timeout_seconds: int = 30,
        taint_unhealthy_devices: bool = True,
        use_passed_claims: bool = True,
    ) -> None:
        self.node_name = node_name
        self.identity = identity
        self.paths = paths
        self.inventory = inventory
        self.kube = kube
        self.health_check_timeout_seconds = health_check_timeout_seconds
        self.taint_unhealthy_devices = taint_unhealthy_devices
        self.use_passed_claims = use_passed_claims
        paths.check()
        paths.create()
        self.state = DeviceState(
            identity=identity, node_name=node_name, cdi_root=paths.cdi_root, state_dir=paths.state_dir
        )
        self.health = HealthControl(paths.state_dir / health.FILE_NAME)
        self.health.poll()
        self.changes = Changes()
        self.registered: bool | None = None  # last NotifyRegistrationStatus verdict
        self._pool: tuple[int, inv.Pool, dict[tuple[str, str], inv.Device]] | None = None

    # -- inventory and health ------------------------------------------------------------------------

    def poll(self, inventory_changed: bool) -> None:
        """Called by the fleet's poller: re-read this node's health file, wake streams on change."""
        if self.health.poll() or inventory_changed:
            self.changes.bump()

    def pool(self) -> inv.Pool:
        return self._current()[1]

    def devices(self) -> dict[tuple[str, str], inv.Device]:
        return self._current()[2]

    def _current(self) -> tuple[int, inv.Pool, dict[tuple[str, str], inv.Device]]:
        if self._pool is None or self._pool[0] != self.inventory.revision:
            pool = with_partition_type(build_pool(self.node_name, self.inventory.config),
                                       self.identity.driver_name)
            self._pool = (self.inventory.revision, pool, {(pool.name, d.name): d for d in pool.devices})
        return self._pool

    def inventory_response(self) -> inv.ListAndWatchResourcesResponse:
        pool = self.pool()
        if self.taint_unhealthy_devices:
            pool = health.apply_health_taints(pool, self.health.statuses, self.identity.driver_name)
        return inv.ListAndWatchResourcesResponse(
            driver=self.identity.driver_name,
            node_name=self.node_name,
            pools=[pool],
            revision=self.changes.revision,
        )

    def health_response(self, pb: ModuleType) -> Any:
        """The health stream's message in the ``api_pb2`` module ``pb`` (dra-health v1 or v1alpha1)."""
        return health.health_response(self.pool(), self.health, self.health_check_timeout_seconds, pb)

    # -- prepare / unprepare ---------------------------------------------------------------------------

    async def _get_claim(self, namespace: str, name: str, uid: str) -> dict[str, Any]:
        if self.kube is None:
            raise ClaimError("no connection to the API server", claim_uid=uid)
        try:
            return await self.kube.get(RESOURCE_CLAIMS, name, namespace=namespace)
        except NotFound as exc:
            raise ClaimError(f"claim {namespace}/{name} not found", claim_uid=uid) from exc
        except (ApiError, TransportError) as exc:
            raise ClaimError(f"reading claim {namespace}/{name}: {exc}", claim_uid=uid) from exc

    async def _prepare_one(
        self, namespace: str, name: str, uid: str, passed: Mapping[str, Any] | None
    ) -> PrepareOutcome:
        with bind(claim=f"{namespace}/{name}", claim_uid=uid):
            try:
                if passed is not None and _names(passed, namespace, name):
                    claim: Mapping[str, Any] = passed
                else:
                    claim = await self._get_claim(namespace, name, uid)
                devices = await self.state.prepare(uid, claim, self.devices())
            except ClaimError as exc:
                log.warning("prepare failed", error=str(exc), field=exc.field or None)
                return PrepareOutcome(error=str(exc))
            except OSError as exc:
                log.error("prepare failed writing files", error=str(exc))
                return PrepareOutcome(error=f"writing CDI spec or checkpoint: {exc}")
            except Exception as exc:  # a bug or an unexpected object must not fail the other claims
                log.exception("prepare failed unexpectedly")
                return PrepareOutcome(error=f"internal error: {exc!r}")
            return PrepareOutcome(devices=devices)

    async def prepare(
        self, claims: Sequence[tuple[str, str, str]], passed: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, PrepareOutcome]:
        """NodePrepareResources for ``(namespace, name, uid)`` claims: one outcome per claim UID.

        Idempotent; each claim fails or succeeds on its own; durable once it returns (the checkpoint is
        fsynced before). ``passed``: claim UID -> the claim as the caller (kubelet-dra-shim) read it live
        (:mod:`draflow_runtime.passedclaims`); a claim found there is not read again. The others are read
        from the API server concurrently, at most :data:`PREPARE_CONCURRENCY` at a time; writes are
        serialized per node.
        """
        passed = passed or {}
        start = time.perf_counter()
        outcomes: list[PrepareOutcome] = [PrepareOutcome(error="not prepared")] * len(claims)
        todo = iter(enumerate(claims))

        async def worker() -> None:
            for i, (ns, name, uid) in todo:  # one shared iterator: each claim is taken once
                outcomes[i] = await self._prepare_one(ns, name, uid, passed.get(uid))

        with bind(node=self.node_name, driver=self.identity.driver_name):
            # At most PREPARE_CONCURRENCY claims at once: a batch of thousands (any caller can send one)
            # must not start thousands of tasks and API requests in one go and freeze the event loop.
            await asyncio.gather(*(worker() for _ in range(min(PREPARE_CONCURRENCY, len(claims)))))
        BATCH_DURATION.labels("prepare").observe(time.perf_counter() - start)
        for outcome in outcomes:
            CLAIM_OPERATIONS.labels("prepare", "error" if outcome.error else "ok").inc()
        return {uid: outcome for (_, _, uid), outcome in zip(claims, outcomes, strict=True)}

    async def unprepare(self, claims: Sequence[tuple[str, str, str]]) -> dict[str, str]:
        """NodeUnprepareResources: claim UID -> error ("" on success). Unknown claims succeed."""
        errors: dict[str, str] = {}
        start = time.perf_counter()
        with bind(node=self.node_name, driver=self.identity.driver_name):
            for namespace, name, uid in claims:
                with bind(claim=f"{namespace}/{name}", claim_uid=uid):
                    try:
                        await self.state.unprepare(uid)
                        errors[uid] = ""
                    except OSError as exc:
                        log.error("unprepare failed", error=str(exc))
                        errors[uid] = f"removing CDI spec or writing checkpoint: {exc}"
        BATCH_DURATION.labels("unprepare").observe(time.perf_counter() - start)
        for error in errors.values():
            CLAIM_OPERATIONS.labels("unprepare", "error" if error else "ok").inc()
        return errors
