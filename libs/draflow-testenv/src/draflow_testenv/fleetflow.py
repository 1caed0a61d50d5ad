"""The five services as processes on a small simulated fleet, for end-to-end tests on the real environment.

``ServiceFlow`` starts reference-driver, kubelet-dra-shim and slice-publisher in fleet mode for a few
nodes of its own, claim-controller for one namespace and structured-allocator for one scheduler name,
so a test cannot touch another test's objects on the shared environment. Pods it creates ask for its
nodes by affinity and name its scheduler.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from draflow_runtime.dra import claim_names
from draflow_runtime.errors import NotFound
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.natssecure import USERS, SecureNats, env_prefix
from draflow_testenv.servers import free_port

from .wait import eventually, gone

DRIVER = "gpu.draflow.example"
WAIT = 120.0  # generous: a shared 2-core machine
POLL = 0.5  # seconds between two looks at the API server while waiting


class ServiceFlow:
    """The running services and what a test needs to reach them."""

    def __init__(self, testenv: Any, kube: KubeClient, ns: str, suffix: str, *, nodes: int = 2,
                 gpus: int = 4, nats: SecureNats | None = None, nats_url: str = "",
                 driver: str = DRIVER) -> None:
        """``nats``/``nats_url``: a TLS + password nats-server (:mod:`draflow_testenv.natssecure`) the
        services use, each as its own user, instead of the environment's; ``driver``: the reference
        driver's name (one of the flow's own keeps other tests' slices out of driver-wide views)."""
        self.driver = driver
        self.testenv = testenv
        self.nats = nats
        self.nats_url = nats_url or testenv.nats_url
        self.kube = kube
        self.ns = ns
        self.prefix = f"wf-{suffix}-"
        self.nodes = [f"{self.prefix}{i}" for i in range(nodes)]
        self.gpus = gpus
        self.scheduler = f"draflow-wf-{suffix}"
        self.device_class = f"wf-{suffix}.gpu.draflow.example"
        self.fleet: Path | None = None
        self.procs: list[Any] = []
        self.http_ports: dict[str, int] = {}  # service -> its /healthz port, when started with http=True

    def alive(self) -> None:
        dead = [p.name for p in self.procs if not p.running]
        assert not dead, f"exited: {dead}; logs in {self.testenv.logs_dir}"

    async def until(self, probe: Callable[[], Any], what: str, within: float = WAIT) -> Any:
        """:func:`draflow_testenv.wait.eventually` for this flow: poll ``probe`` every :data:`POLL` seconds
        until it returns something truthy (and return that); fail after ``within`` seconds, or at once when
        one of the services has exited (:meth:`alive`)."""
        return await eventually(probe, within, what, interval=POLL, abort=self.alive)

    async def wait_gone(self, resource: Any, name: str, what: str) -> None:
        """Until the object ``name`` of ``resource`` in the flow's namespace is gone from the API server."""
        await self.until(gone(self.kube, resource, name, self.ns), what)

    async def wait_claim_gone(self, name: str, what: str) -> None:
        """Until the ResourceClaim ``name`` of the flow's namespace is gone from the API server."""
        await self.wait_gone(RESOURCE_CLAIMS, name, what)

    async def start(self, run_service: Callable[..., Awaitable[Any]], fleet: Path, *,
                    http: bool = False, reference_driver: bool = True, control_plane: bool = True,
                    extra: Mapping[str, Sequence[str]] | None = None) -> None:
        """Start the five services; ``fleet`` is the nodes' root directory (keep it short: unix socket
        paths are at most 107 bytes). ``http``: each serves /healthz, /readyz and /metrics on a loopback
        port of its own (``http_ports``). ``reference_driver=False``: the test brings its own driver
        (named :data:`DRIVER`, in the fleet's layout). ``control_plane=False``: only the node side
        (reference-driver, kubelet-dra-shim, slice-publisher), for upstream's kube-scheduler and
        kube-controller-manager (``draflow_testenv.upstream``). ``extra``: more arguments per service name."""
        self.fleet = fleet
        bin_dir = Path(sys.executable).parent
        common = ["--nats-url", self.nats_url, "--log-format", "json"]
        fleet_nodes = ["--node-count", str(len(self.nodes)), "--node-name-prefix", self.prefix,
                       "--fleet-root", str(fleet)]
        runs = [
            ("reference-driver", [*fleet_nodes, "--gpu-count", str(self.gpus), "--driver-name", self.driver]),
            ("kubelet-dra-shim", fleet_nodes),
            ("slice-publisher", ["--fleet-root", str(fleet), "--wipe-foreign-slices"]),
            ("claim-controller", ["--namespace", self.ns]),
            ("structured-allocator", ["--scheduler-names", self.scheduler]),
        ]
        # Spans reach Jaeger within a fraction of a second instead of the default 5 s batches.
        env = {"OTEL_BSP_SCHEDULE_DELAY": "200"}
        for service, args in runs:
            if service == "reference-driver" and not reference_driver:
                continue
            if service in ("claim-controller", "structured-allocator") and not control_plane:
                continue
            args = [*args, *(extra or {}).get(service, ())]
            args = [*args, *(extra or {}).get(service, ())]
            port = free_port() if http else 0
            if port:
                self.http_ports[service] = port
            service_env = dict(env)
            if self.nats is not None and service in USERS:  # reference-driver does not use NATS
                args = [*args, *self.nats.service_args(service)]
                service_env.update(self.nats.service_env(env_prefix(service), service))
            self.procs.append(await run_service(
                [str(bin_dir / service), *common, "--http-port", str(port), "--http-host", "127.0.0.1",
                 *args], env=service_env, name=f"{service}-{self.prefix}"))

    def cdi_root(self, node: str) -> Path:
        """Where the reference driver writes ``node``'s CDI spec files."""
        assert self.fleet is not None, "start() first"
        return self.fleet / node / "cdi"

    async def wait_nodes_ready(self) -> None:
        async def ready() -> bool:
            ok = 0
            for node in self.nodes:
                try:
                    obj = await self.kube.get(NODES, node)
                except NotFound:
                    return False
                conditions = (obj.get("status") or {}).get("conditions") or ()
                if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                    ok += 1
                if (obj.get("spec") or {}).get("taints"):
                    # no node-lifecycle controller here: drop a not-ready taint the way it would
                    with contextlib.suppress(Exception):
                        await self.kube.patch(NODES, node, {"spec": {"taints": None}})
                    return False
            if ok < len(self.nodes):
                return False
            slices = (await self.kube.list(RESOURCE_SLICES)).get("items") or []
            published = {s["spec"].get("nodeName") for s in slices if s["spec"].get("driver") == self.driver}
            return set(self.nodes) <= published

        await self.until(ready, "every node Ready with ResourceSlices")

    async def create_objects(self, *, class_config: Sequence[dict[str, Any]] = (),
                             claim_config: Sequence[dict[str, Any]] = ()) -> None:
        """The flow's DeviceClass (every device of the driver) and the template ``one-gpu`` (request
        ``gpu``), with ``spec.config`` / ``spec.devices.config`` entries when given."""
        selector = {"cel": {"expression": f'device.driver == "{self.driver}"'}}
        class_spec: dict[str, Any] = {"selectors": [selector]}
        if class_config:
            class_spec["config"] = list(class_config)
        await self.kube.create(DEVICE_CLASSES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": self.device_class}, "spec": class_spec,
        })
        request = {"name": "gpu", "exactly": {"deviceClassName": self.device_class}}
        devices: dict[str, Any] = {"requests": [request]}
        if claim_config:
            devices["config"] = list(claim_config)
        await self.kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"}, "spec": {"spec": {"devices": devices}},
        }, namespace=self.ns)

    async def create_claim(self, name: str) -> dict[str, Any]:
        """A claim made by a user (not from a template): one device of the flow's class."""
        claim: dict[str, Any] = await self.kube.create(RESOURCE_CLAIMS, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": self.device_class}}]}},
        }, namespace=self.ns)
        return claim

    async def create_pod(self, name: str, *, claim: str = "") -> None:
        """A pod of the flow with the template claim ``one-gpu``, or the existing claim ``claim``."""
        ref = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": "one-gpu"}
        await self.kube.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {
                "schedulerName": self.scheduler,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": self.nodes}]}]}}},
                "resourceClaims": [{"name": "gpu", **ref}],
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"claims": [{"name": "gpu"}]}}],
            },
        }, namespace=self.ns)

    async def wait_running(self, name: str, within: float = WAIT) -> dict[str, Any]:
        async def running() -> dict[str, Any] | None:
            pod = await self.kube.get(PODS, name, namespace=self.ns)
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None

        pod: dict[str, Any] = await self.until(running, f"pod {name} Running", within=within)
        assert pod["spec"]["nodeName"] in self.nodes
        return pod

    async def claim_of(self, pod: dict[str, Any]) -> dict[str, Any]:
        (name,) = claim_names(pod)
        claim: dict[str, Any] = await self.kube.get(RESOURCE_CLAIMS, name, namespace=self.ns)
        return claim

    async def stop(self) -> None:
        for proc in reversed(self.procs):
            await proc.stop()

    async def clean_up(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(NotFound):
                await self.kube.delete(NODES, node)
            await self.kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
        with contextlib.suppress(NotFound):
            await self.kube.delete(DEVICE_CLASSES, self.device_class)
