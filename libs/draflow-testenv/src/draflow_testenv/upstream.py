"""Upstream's control plane next to draflow: kube-scheduler and kube-controller-manager v1.37.1 as services of
an ``Environment``.

```python
plane = await start_control_plane(env, env.run_service, controllers=DRA_CONTROLLERS)
plane.scheduler.log_path                       # klog text, read with draflow_testenv.klog
dra_log_errors(plane.scheduler.log_path)       # its error lines about DRA objects
```

kube-scheduler runs its default profile (the DynamicResources plugin included) with a
``KubeSchedulerConfiguration`` of its own; kube-controller-manager runs only ``controllers``. Both get the
feature gates the environment's kube-apiserver accepted (``draflow_testenv.featuregates``), so the three
agree on the DRA API. The bench's side-by-side stacks and the tests that check draflow's node side under
upstream's control plane start them through here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from draflow_testenv import klog
from draflow_testenv.binaries import ensure_binary
from draflow_testenv.process import ManagedProcess
from draflow_testenv.servers import HOST, free_port

UPSTREAM_BINARIES = ("kube-scheduler", "kube-controller-manager")
# What an upstream cluster runs for DRA: claims from templates, deallocation and clean-up, eviction for
# NoExecute device taints, and the garbage collector that deletes a deleted pod's generated claims.
DRA_CONTROLLERS = ("resourceclaim-controller", "device-taint-eviction-controller",
                   "garbage-collector-controller")
READY_TIMEOUT = 180.0
# Source files of kube-scheduler's DRA code paths (plugin, slice tracker, allocator, CEL).
DRA_SOURCES = ("dynamicresources", "resourceslice", "tracker.go", "allocator", "structured", "cel",
               "devicetaint", "extendedresource", "deviceclass", "resourceclaim")
DRA_WORDS = ("resourceslice", "resourceclaim", "deviceclass", "devicetaint", "dra")
# Races the components retry from fresh state, not complaints about an object: a write that lost an
# optimistic-concurrency race, and kcm's resourceclaim controller updating a claim the garbage collector
# (or its own other work item) just deleted.
CONFLICT = "the object has been modified; please apply your changes to the latest version"
_GONE = re.compile(r'"Work item failed" err="resourceclaims\.resource\.k8s\.io \\"([^\\]+)\\" not found".*'
                   r'item="claim:[^/]+/\1"')


@dataclass
class ControlPlane:
    scheduler: ManagedProcess
    controller_manager: ManagedProcess

    @property
    def processes(self) -> dict[str, ManagedProcess]:
        return {"kube-scheduler": self.scheduler, "kube-controller-manager": self.controller_manager}


def scheduler_config(kubeconfig: Path, qps: int) -> str:
    return json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": qps},
        "leaderElection": {"leaderElect": False},
    })


async def ensure_upstream_binaries() -> dict[str, Path]:
    """kube-scheduler and kube-controller-manager v1.37.1 (built by hack/binaries.sh when missing)."""
    return {name: await ensure_binary(name) for name in UPSTREAM_BINARIES}


async def wait_healthy(url: str, proc: ManagedProcess, timeout: float = READY_TIMEOUT) -> None:  # noqa: ASYNC109
    """Until ``url`` (the component's own HTTPS endpoint, self-signed) answers 200; fails when it exits."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        async def ok() -> bool:
            async with http.get(url, ssl=False) as resp:
                return resp.status == 200
        await proc.wait_ready(ok, timeout, interval=0.25)


def _gates(env: Any, feature_gates: bool) -> list[str]:
    on = env.feature_gates if feature_gates else []
    return [f"--feature-gates={','.join(f'{g}=true' for g in on)}"] if on else []


async def start_controller_manager(
    env: Any, run: Callable[..., Awaitable[ManagedProcess]], *, controllers: Sequence[str] = DRA_CONTROLLERS,
    qps: int = 5000, feature_gates: bool = True, verbosity: int = 2, name: str = "kube-controller-manager",
) -> ManagedProcess:
    """kube-controller-manager running ``controllers`` only, started with ``run`` (``Environment.run_service``
    or the ``run_service`` fixture) against ``env``'s API server; returns once it is healthy. ``qps``: its
    client QPS and burst; ``feature_gates``: the gates the API server accepted (False: the binary's
    defaults); ``verbosity``: klog ``--v``."""
    binary = await ensure_binary("kube-controller-manager")
    kubeconfig, port = env.kubeconfig, free_port()
    kcm = await run([
        str(binary), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers)}", f"--kube-api-qps={qps}", f"--kube-api-burst={qps}",
        "--use-service-account-credentials=false", "--leader-elect=false",
        f"--bind-address={HOST}", f"--secure-port={port}", f"--v={verbosity}", *_gates(env, feature_gates),
    ], name=name)
    await wait_healthy(f"https://{HOST}:{port}/healthz", kcm)
    return kcm


async def start_scheduler(
    env: Any, run: Callable[..., Awaitable[ManagedProcess]], *, qps: int = 5000, feature_gates: bool = True,
    scheduler_args: Sequence[str] = (), verbosity: int = 2,
) -> ManagedProcess:
    """kube-scheduler with its default profile and a configuration of its own (client ``qps``, no leader
    election), as :func:`start_controller_manager`; ``scheduler_args``: more flags."""
    binary = await ensure_binary("kube-scheduler")
    kubeconfig, port = env.kubeconfig, free_port()
    config = env.state_dir / f"kube-scheduler-{port}.json"
    config.write_text(scheduler_config(kubeconfig, qps))
    sched = await run([
        str(binary), f"--config={config}", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}", f"--bind-address={HOST}", f"--secure-port={port}",
        f"--v={verbosity}", *_gates(env, feature_gates), *scheduler_args,
    ], name="kube-scheduler")
    await wait_healthy(f"https://{HOST}:{port}/readyz", sched)
    return sched


async def start_control_plane(
    env: Any, run: Callable[..., Awaitable[ManagedProcess]], *, controllers: Sequence[str] = DRA_CONTROLLERS,
    qps: int = 5000, feature_gates: bool = True, scheduler_args: Sequence[str] = (), verbosity: int = 2,
) -> ControlPlane:
    """:func:`start_controller_manager` then :func:`start_scheduler` (same arguments)."""
    kcm = await start_controller_manager(env, run, controllers=controllers, qps=qps,
                                         feature_gates=feature_gates, verbosity=verbosity)
    sched = await start_scheduler(env, run, qps=qps, feature_gates=feature_gates,
                                  scheduler_args=scheduler_args, verbosity=verbosity)
    return ControlPlane(scheduler=sched, controller_manager=kcm)


# The namespace of the object a klog line is about: kcm's work items (``item="podgroup:<ns>/<name>"``),
# the structured ``pod``/``podGroup``/``claim``/``resourceClaim`` keys (``pod="<ns>/<name>"``) and the object
# of an Event the recorder could not write (``InvolvedObject:ObjectReference{Kind:PodGroup,Namespace:<ns>,``)
# and a ``namespace="<ns>"`` key.
_NAMESPACED = re.compile(r'(?:\bitem="[A-Za-z-]+:|\b(?:pod|podGroup|claim|resourceClaim)=")([a-z0-9.-]+)/'
                         r'|InvolvedObject:ObjectReference\{Kind:[A-Za-z]+,Namespace:([a-z0-9.-]+),'
                         r'|\bnamespace="([a-z0-9.-]+)"')


def dra_log_errors(path: Path, namespace: str | None = None) -> list[str]:
    """The error lines (klog ``E``/``F``) of an upstream component's log written by its DRA code paths or
    naming a DRA object (ResourceSlice, ResourceClaim, DeviceClass, DeviceTaintRule), but for update
    conflicts (:data:`CONFLICT`) and kcm's work items for claims already deleted: races that are retried.
    ``namespace``: also leave out lines about objects of other namespaces only (a shared API server holds
    other tests' objects, e.g. PodGroups whose template is gone, which kcm retries and reports).
    """
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if line[:1] not in ("E", "F") or CONFLICT in line or _GONE.search(line):
            continue
        if namespace is not None:
            named = {ns for match in _NAMESPACED.findall(line) for ns in match if ns}
            if named and namespace not in named:
                continue
        rec = klog.parse(line)
        source = rec.source if rec is not None else line.split("]", 1)[0]
        lowered = line.lower()
        if any(s in source.lower() for s in DRA_SOURCES) or any(
                k in lowered for k in DRA_WORDS):
            found.append(line)
    return found
