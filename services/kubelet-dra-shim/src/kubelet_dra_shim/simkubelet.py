"""The simulated kubelet: what a kubelet does for a node, minus containers.

- Registers each served Node (capacity/allocatable, Ready condition) and its Lease in
  ``kube-node-lease``; renews the Lease every ``lease_renew_interval`` and the Ready condition every
  ``node_status_interval``.
- Moves a pod whose claims are all prepared to Running (status subresource: phase, conditions,
  containerStatuses with a running state) and publishes each container's CDI device IDs in the
  ``draflow.dev/cdi-devices`` annotation (JSON ``{container: [cdi ids]}``).
- Finishes pods carrying ``draflow.dev/run-duration`` (e.g. ``"5s"``) as Succeeded once that long has
  passed since they started.
- Completes the deletion of terminating pods (grace period 0, UID precondition) after their claims are
  unprepared.
- Writes device health to ``containerStatuses[].allocatedResourcesStatus``.

Status builders are pure functions; :class:`SimKubelet` does the writes (strategic merge patches, field
manager ``kubelet-dra-shim``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from draflow_runtime.errors import AlreadyExists, Conflict, NotFound
from draflow_runtime.kube import LEASES, NODES, PODS, KubeClient
from draflow_runtime.log import get_logger

log = get_logger(__name__)

FIELD_MANAGER = "kubelet-dra-shim"
CDI_ANNOTATION = "draflow.dev/cdi-devices"
RUN_DURATION_ANNOTATION = "draflow.dev/run-duration"
SIMULATED_LABEL = "draflow.dev/simulated"
NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def parse_duration(text: str) -> float | None:
    """Go-style duration ("5s", "1m30s", "250ms", "2h") in seconds; None when malformed or empty."""
    m = _DURATION.match(text.strip())
    if not text.strip() or not m or not any(m.groups()):
        return None
    h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s + ms / 1000


def _condition(ctype: str, status: bool, now: str, reason: str = "") -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": ctype,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    if reason:
        cond["reason"] = reason
    return cond


def running_status(
    pod: Mapping[str, Any], now: str, health: Mapping[str, list[dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The status a kubelet reports for a pod whose containers all started at ``now``."""
    spec = pod.get("spec") or {}
    current = pod.get("status") or {}
    started = current.get("startTime") or now
    status: dict[str, Any] = {
        "phase": "Running",
        "startTime": started,
        "conditions": [
            _condition("PodReadyToStartContainers", True, now),
            _condition("Initialized", True, now),
            _condition("ContainersReady", True, now),
            _condition("Ready", True, now),
        ],
        "containerStatuses": [
            _container_status(c, pod, {"running": {"startedAt": started}}, True, health)
            for c in spec.get("containers") or []
        ],
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [
            _container_status(
                c,
                pod,
                {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": started,
                    }
                },
                False,
                health,
            )
            for c in spec["initContainers"]
        ]
    return status


def succeeded_status(pod: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The status of a pod whose containers all exited 0 at ``now``."""
    spec = pod.get("spec") or {}
    started = (pod.get("status") or {}).get("startTime") or now
    terminated = {
        "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": now}
    }
    return {
        "phase": "Succeeded",
        "conditions": [
            _condition("PodReadyToStartContainers", False, now),
            _condition("ContainersReady", False, now, "PodCompleted"),
            _condition("Ready", False, now, "PodCompleted"),
        ],
        "containerStatuses": [
            _container_status(c, pod, terminated, False, None) for c in spec.get("containers") or []
        ],
    }


def _container_status(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    state: dict[str, Any],
    ready: bool,
    health: Mapping[str, list[dict[str, Any]]] | None,
) -> dict[str, Any]:
    name = container["name"]
    status: dict[str, Any] = {
        "name": name,
        "ready": ready,
        "started": "running" in state,
        "restartCount": 0,
        "image": container.get("image", ""),
        "imageID": "",
        "containerID": f"simulated://{pod['metadata']['uid']}/{name}",
        "state": state,
    }
    if health and health.get(name):
        status["allocatedResourcesStatus"] = health[name]
    return status


def node_object(
    name: str, cpu: str, memory: str, pods: str, now: str, declared: Sequence[str] = ()
) -> dict[str, Any]:
    """The Node a kubelet registers; ``declared``: ``status.declaredFeatures`` (left out when empty)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                SIMULATED_LABEL: "true",
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [ready_condition(now, now)],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": "v1.36.0-draflow",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "draflow",
                "containerRuntimeVersion": "simulated://0",
                "kubeProxyVersion": "",
            },
        },
    }
    if declared:
        node["status"]["declaredFeatures"] = list(declared)
    return node


def ready_condition(heartbeat: str, transition: str) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status (simulated by kubelet-dra-shim)",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": transition,
    }


class SimKubelet:
    """Node registration, heartbeats and pod status writes for the simulated nodes."""

    def __init__(
        self,
        kube: KubeClient,
        nodes: Sequence[str],
        *,
        cpu: str = "64",
        memory: str = "256Gi",
        pods: str = "110",
        lease_renew_interval: float = 10.0,
        node_status_interval: float = 60.0,
        concurrency: int = 16,
        declared_features: Sequence[str] = (),
    ) -> None:
        self.kube = kube
        self.declared_features = list(declared_features)
        self.nodes = list(nodes)
        self.cpu, self.memory, self.pods = cpu, memory, pods
        self.lease_renew_interval = lease_renew_interval
        self.node_status_interval = node_status_interval
        self._sem = asyncio.Semaphore(concurrency)
        self._node_uids: dict[str, str] = {}

    # --- nodes ------------------------------------------------------------------------------------------

    async def _bounded(self, coros: Sequence[Any]) -> None:
        async def one(c: Any) -> None:
            async with self._sem:
                try:
                    await c
                except Exception as exc:
                    log.warning("simulated kubelet write failed", error=repr(exc))

        await asyncio.gather(*(one(c) for c in coros))

    async def register_nodes(self) -> None:
        """Create every Node and Lease that does not exist yet; idempotent."""
        await self._bounded([self._register(n) for n in self.nodes])

    async def _register(self, name: str) -> None:
        now = now_rfc3339()
        try:
            obj = node_object(name, self.cpu, self.memory, self.pods, now, self.declared_features)
            node = await self.kube.create(NODES, obj, field_manager=FIELD_MANAGER)
            log.info("node registered", node=name)
        except AlreadyExists:
            node = await self.kube.get(NODES, name)
            await self._heartbeat_node(name)
        self._node_uids[name] = node["metadata"]["uid"]
        await self._renew_lease(name)

    async def _heartbeat_node(self, name: str) -> None:
        now = now_rfc3339()
        # Strategic merge: conditions merge by type, so only Ready is touched; declaredFeatures is an
        # atomic list, written (as the kubelet does on every status update) only when there is one.
        status: dict[str, Any] = {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now}
            ]
        }
        if self.declared_features:
            status["declaredFeatures"] = self.declared_features
        await self.kube.patch(
            NODES,
            name,
            {"status": status},
            patch_type="strategic",
            subresource="status",
            field_manager=FIELD_MANAGER,
        )

    async def _renew_lease(self, name: str) -> None:
        now = now_micro()
        try:
            await self.kube.patch(
                LEASES,
                name,
                {"spec": {"renewTime": now, "holderIdentity": name}},
                namespace=NODE_LEASE_NAMESPACE,
                field_manager=FIELD_MANAGER,
            )
        except NotFound:
            lease: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                    "renewTime": now,
                },
            }
            if name in self._node_uids:
                lease["metadata"]["ownerReferences"] = [
                    {"apiVersion": "v1", "kind": "Node", "name": name, "uid": self._node_uids[name]}
                ]
            with contextlib.suppress(AlreadyExists):
                await self.kube.create(
                    LEASES, lease, namespace=NODE_LEASE_NAMESPACE, field_manager=FIELD_MANAGER
                )

    async def heartbeat(self) -> None:
        """Renew Leases and Ready conditions forever (cancel to stop)."""
        last_status = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(self.lease_renew_interval)
            await self._bounded([self._renew_lease(n) for n in self.nodes])
            if asyncio.get_running_loop().time() - last_status >= self.node_status_interval:
                last_status = asyncio.get_running_loop().time()
                await self._bounded([self._heartbeat_node(n) for n in self.nodes])

    # --- pods -------------------------------------------------------------------------------------------

    async def publish_cdi_devices(self, pod: Mapping[str, Any], devices: Mapping[str, list[str]]) -> None:
        """Write the per-container CDI device IDs into the pod's annotation, if they changed."""
        value = orjson.dumps(dict(sorted(devices.items()))).decode() if devices else None
        current = (pod["metadata"].get("annotations") or {}).get(CDI_ANNOTATION)
        if current == value:
            return
        await self.kube.patch(
            PODS,
            pod["metadata"]["name"],
            {"metadata": {"annotations": {CDI_ANNOTATION: value}}},
            namespace=pod["metadata"]["namespace"],
            field_manager=FIELD_MANAGER,
        )

    async def mark_running(
        self, pod: Mapping[str, Any], health: Mapping[str, list[dict[str, Any]]] | None = None
    ) -> None:
        status = running_status(pod, now_rfc3339(), health)
        await self._patch_status(pod, status)
        log.info("pod running", pod=_key(pod), node=pod["spec"].get("nodeName"))

    async def mark_succeeded(self, pod: Mapping[str, Any]) -> None:
        await self._patch_status(pod, succeeded_status(pod, now_rfc3339()))
        log.info("pod succeeded", pod=_key(pod), node=pod["spec"].get("nodeName"))

    async def _patch_status(self, pod: Mapping[str, Any], status: dict[str, Any]) -> None:
        meta = pod["metadata"]
        # The UID guards against writing the status of a pod that was replaced under the same name.
        await self.kube.patch(
            PODS,
            meta["name"],
            {"metadata": {"uid": meta["uid"]}, "status": status},
            namespace=meta["namespace"],
            patch_type="strategic",
            subresource="status",
            field_manager=FIELD_MANAGER,
        )

    async def finish_deletion(self, pod: Mapping[str, Any]) -> None:
        """Delete a terminating pod for good (grace 0, UID precondition); gone already is fine."""
        meta = pod["metadata"]
        with contextlib.suppress(NotFound, Conflict):
            await self.kube.delete(
                PODS,
                meta["name"],
                namespace=meta["namespace"],
                grace_period_seconds=0,
                preconditions={"uid": meta["uid"]},
            )
            log.info("pod deleted", pod=_key(pod), node=pod["spec"].get("nodeName"))


def run_deadline(pod: Mapping[str, Any]) -> float | None:
    """Seconds left until a pod with ``draflow.dev/run-duration`` should finish (≤0: now); None: never."""
    text = (pod["metadata"].get("annotations") or {}).get(RUN_DURATION_ANNOTATION)
    started = (pod.get("status") or {}).get("startTime")
    if not text or not started:
        return None
    duration = parse_duration(text)
    if duration is None:
        return None
    elapsed = (datetime.now(UTC) - parse_time(started)).total_seconds()
    return duration - elapsed


def _key(pod: Mapping[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
