"""The whole flow for ``make up``: the five services, the demo workload, live progress and a summary.

Two start-up steps, registered in ``draflow_testenv.__main__.STEPS`` unless ``up --env-only``:

``services``
    reference-driver (fleet mode, ``partitionable`` profile, ``--gpus`` per node), kubelet-dra-shim (fleet
    mode, simulated kubelet: the Node objects), slice-publisher (fleet mode), claim-controller and
    structured-allocator, each a subprocess of the environment (logs in ``<state>/logs/<name>.log``),
    pointed at its NATS and Jaeger. Waits until every node is Ready and has its ResourceSlices, then
    prints the allocator's web view, ``<allocator>/ui`` (its trace links go to the environment's Jaeger).
``demo``
    applies ``deploy/demo`` (kustomization order; its pods once the claim-controller has rooted the trace
    of each of its claims), shows live progress (pods pending / allocated / prepared / running) until
    every pod is Running, then a summary: ``draflow status``, the pods, the Jaeger link of one claim's
    trace, the web view's URL and what to try next, ``kubectl apply -k deploy/demo/extras`` among it
    (:data:`EXTRAS`: the pods whose claims' traces cannot reach four services, README *Try it*).

Everything the services do is read back the way a user would (API server, JetStream, Jaeger, the
allocator's HTTP server), through the ``draflow`` command's modules.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import nats
import yaml

from draflow_cli import status as cli_status
from draflow_cli.table import render
from draflow_cli.trace import jaeger_link, trace_id_of
from draflow_runtime.busauth import NatsSecurity
from draflow_runtime.claimtrace import has_trace
from draflow_runtime.dra import claim_names
from draflow_runtime.errors import AlreadyExists
from draflow_runtime.kube import (
    DEVICE_CLASSES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    SERVICE_ACCOUNTS,
    KubeClient,
)
from draflow_runtime.lifecycle import devices_of, recent_events
from draflow_testenv.binaries import repo_root
from draflow_testenv.environment import Environment
from draflow_testenv.featuregates import gates_flag
from draflow_testenv.natssecure import USERS, env_prefix, nats_env_security
from draflow_testenv.process import ManagedProcess
from draflow_testenv.servers import free_port
from draflow_testenv.wait import eventually

DEMO_NAMESPACE = "draflow-demo"
DEMO = Path("deploy") / "demo"  # relative to the repository
EXTRAS = DEMO / "extras"  # README *Try it*: `kubectl apply -k deploy/demo/extras`, after the demo
UNFIT_CLAIM = "too-big"  # in EXTRAS: the claim (and pod) that fits on no node
EXTENDED_POD = "legacy-gpus"  # in EXTRAS: the pod asking for GPUs through resources.limits
ROOTED_WAIT = 60.0  # seconds the demo waits for its claims' trace roots before creating its pods anyway
NODE_PREFIX = "sim-"
DRIVER = "gpu.draflow.example"
RESOURCES = {r.kind: r for r in (NAMESPACES, SERVICE_ACCOUNTS, DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES,
                                 RESOURCE_CLAIMS, PODS)}


def _print(msg: str) -> None:
    print(msg, flush=True)


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


# --- services ---------------------------------------------------------------------------------------------


def fleet_root(state_dir: Path) -> str:
    """``<state>/fleet``, or a short directory under the temp dir when the drivers' unix sockets
    (``<root>/<node>/plugins/<driver>/dra.sock``) would pass the 107-byte limit of a socket path."""
    root = str(state_dir / "fleet")
    longest = f"{root}/{NODE_PREFIX}99999/plugins_registry/{DRIVER}-reg.sock"
    return root if len(longest.encode()) <= 107 else tempfile.mkdtemp(prefix="draflow-fleet-")


def service_commands(
    env: Environment, nodes: int, gpus: int, allocator_port: int, fleet: str | None = None
) -> list[tuple[str, list[str]]]:
    """(name, argv) of the five services, node agents in fleet mode over ``fleet`` (default
    :func:`fleet_root`)."""
    fleet = fleet or fleet_root(env.state_dir)
    common = ["--nats-url", env.nats_url, "--log-format", "json"]
    fleet_nodes = ["--node-count", str(nodes), "--node-name-prefix", NODE_PREFIX, "--fleet-root", fleet]
    gates = ["--feature-gates", gates_flag(env.feature_gates, env.rejected_feature_gates)]
    return [(name, [*argv, *env.secure_nats.service_args(name)])
            if env.secure_nats is not None and name in USERS else (name, argv) for name, argv in [
        ("reference-driver", [_bin("reference-driver"), *common, *fleet_nodes,
                              "--profile", "partitionable", "--gpu-count", str(gpus), "--http-port", "0"]),
        ("kubelet-dra-shim", [_bin("kubelet-dra-shim"), *common, *fleet_nodes, "--http-port", "0", *gates]),
        ("slice-publisher", [_bin("slice-publisher"), *common, "--fleet-root", fleet, "--wipe-foreign-slices",
                             "--http-port", "0"]),
        ("claim-controller", [_bin("claim-controller"), *common, "--http-port", "0", *gates]),
        ("structured-allocator", [_bin("structured-allocator"), *common, "--http-host", "127.0.0.1",
                                  "--http-port", str(allocator_port), "--ui-jaeger-url", env.jaeger_query_url,
                                  *gates]),
    ]]


async def _nodes_ready(kube: KubeClient, nodes: int) -> tuple[int, int]:
    """(Ready simulated nodes, simulated nodes with published slices)."""
    node_list = (await kube.list(NODES)).get("items") or []
    ready = sum(
        1 for n in node_list
        if n["metadata"]["name"].startswith(NODE_PREFIX)
        and any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or ())
    )
    slices = (await kube.list(RESOURCE_SLICES)).get("items") or []
    published = {s["spec"].get("nodeName") for s in slices if s["spec"].get("driver") == DRIVER}
    return ready, len({n for n in published if n and n.startswith(NODE_PREFIX)})


@contextlib.asynccontextmanager
async def services_step(env: Environment, args: argparse.Namespace) -> AsyncIterator[object]:
    nodes, gpus = int(args.nodes), int(getattr(args, "gpus", 8))
    port = free_port()
    args.allocator_url = f"http://127.0.0.1:{port}"
    args.fleet_root = fleet_root(env.state_dir)  # the nodes' directories (health.json of the driver...)
    commands = service_commands(env, nodes, gpus, port, args.fleet_root)
    secure = env.secure_nats
    procs = [await env.run_service(argv, name=name, env=secure.service_env(env_prefix(name), name)
                                   if secure is not None and name in USERS else None)
             for name, argv in commands]
    args.service_processes = procs
    with env.env_file.open("a") as f:
        f.write(f"export DRAFLOW_ALLOCATOR_URL={args.allocator_url}\n")
    kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
    try:
        t0, last = time.monotonic(), (-1, -1)
        while True:
            ready, published = await _nodes_ready(kube, nodes)
            if (ready, published) != last:
                _print(f"  nodes Ready {ready}/{nodes}, with ResourceSlices {published}/{nodes}")
                last = (ready, published)
            if ready >= nodes and published >= nodes:
                break
            _check_alive(procs)
            if time.monotonic() - t0 > 300:
                raise RuntimeError(f"nodes not ready after 300s; logs in {env.logs_dir}")
            await asyncio.sleep(1)
        _print(f"  {nodes} nodes x {gpus} GPUs ready in {time.monotonic() - t0:.1f}s "
               f"(allocator explain at {args.allocator_url})")
        _print(f"  web view (devices, claims, timelines): {args.allocator_url}/ui")
    finally:
        await kube.close()
    yield None  # the environment stops its services on shutdown


def _check_alive(procs: list[ManagedProcess]) -> None:
    for svc in procs:
        if not svc.running:
            raise RuntimeError(f"{svc.name} exited with {svc.returncode}; log {svc.log_path}")


# --- demo -------------------------------------------------------------------------------------------------


def manifest_objects(directory: Path) -> list[dict[str, Any]]:
    """The objects of a kustomization directory's ``resources`` files, in its order."""
    order = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]
    return [doc for f in order for doc in yaml.safe_load_all((directory / f).read_text()) if doc]


def demo_objects(root: Path | None = None) -> list[dict[str, Any]]:
    """``deploy/demo``: what ``make up`` applies."""
    return manifest_objects((root or repo_root()) / DEMO)


def demo_extras(root: Path | None = None) -> list[dict[str, Any]]:
    """``deploy/demo/extras`` (README *Try it*): applied by a user after the demo, never by ``make up``."""
    return manifest_objects((root or repo_root()) / EXTRAS)


async def apply_demo(kube: KubeClient, objects: list[dict[str, Any]], *, rooted_first: bool = False) -> int:
    """Create ``objects`` in order (those that exist are left alone). With ``rooted_first``, before the
    first pod: wait (at most :data:`ROOTED_WAIT`) until every ResourceClaim created so far carries its trace
    root, as a claim the claim-controller sees before any pod uses it does (``claim.seen``); otherwise the
    allocator may root it first, and the claim-controller then has no work for it until its clean-up."""
    created = 0
    claims: list[tuple[str, str]] = []
    for obj in objects:
        if rooted_first and claims and obj["kind"] == "Pod":
            await _traces_rooted(kube, claims)
            claims = []
        res = RESOURCES[obj["kind"]]
        try:
            namespace = obj["metadata"].get("namespace") if res.namespaced else None
            await kube.create(res, obj, namespace=namespace, field_manager="draflow-testenv")
            created += 1
        except AlreadyExists:
            pass
        if obj["kind"] == "ResourceClaim":
            claims.append((obj["metadata"]["namespace"], obj["metadata"]["name"]))
    return created


async def _traces_rooted(kube: KubeClient, claims: list[tuple[str, str]]) -> None:
    async def rooted() -> bool:
        return all([has_trace(await kube.get(RESOURCE_CLAIMS, name, namespace=ns)) for ns, name in claims])

    try:
        await eventually(rooted, ROOTED_WAIT, "the demo's claims have their trace roots", interval=0.2)
    except AssertionError:
        _print(f"  the claim-controller did not root the traces of {[n for _, n in claims]} within "
               f"{ROOTED_WAIT:.0f}s; creating the pods anyway")


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


async def _prepared_claims(nats_url: str, security: NatsSecurity | None = None) -> set[str]:
    """Claims of the demo with a ``prepared`` event in JetStream."""
    try:
        nc = await nats.connect(nats_url, connect_timeout=2, allow_reconnect=False,
                                **(security or NatsSecurity()).connect_options())
    except Exception:
        return set()
    try:
        subject = f"draflow.events.claim.{DEMO_NAMESPACE}.*.prepared"
        records = await recent_events(nc.jetstream(), subject, last=10_000)
        return {f"{r.event.namespace}/{r.event.name}" for r in records}  # type: ignore[union-attr]
    except Exception:
        return set()
    finally:
        await nc.close()


async def progress(kube: KubeClient, nats_url: str, security: NatsSecurity | None = None,
                   ) -> tuple[int, int, int, int, int]:
    """(pods, pending, allocated, prepared, running) of the demo namespace."""
    pods = (await kube.list(PODS, namespace=DEMO_NAMESPACE)).get("items") or []
    claims = {c["metadata"]["name"]: c for c in
              (await kube.list(RESOURCE_CLAIMS, namespace=DEMO_NAMESPACE)).get("items") or []}
    prepared_claims = await _prepared_claims(nats_url, security)
    pending = allocated = prepared = running = 0
    for pod in pods:
        names, bound = claim_names(pod, extended=True), bool(pod["spec"].get("nodeName"))
        if _running(pod):
            running += 1
        elif bound and names and all(f"{DEMO_NAMESPACE}/{n}" in prepared_claims for n in names):
            prepared += 1
        elif bound and all((claims.get(n, {}).get("status") or {}).get("allocation") for n in names):
            allocated += 1
        else:
            pending += 1
    return len(pods), pending, allocated, prepared, running


async def run_demo(
    kube: KubeClient, nats_url: str, timeout: float = 300.0,  # noqa: ASYNC109 - the whole wait
    check: Callable[[], None] | None = None, security: NatsSecurity | None = None,
) -> tuple[int, int]:
    """Apply deploy/demo (its pods once its claims have their trace roots) and wait, printing progress,
    until every pod is Running or ``timeout``; ``check`` runs each second (raise to give up).
    -> (running, expected)."""
    objects = demo_objects()
    expected = sum(1 for o in objects if o["kind"] == "Pod")  # every pod of the demo fits
    t0 = time.monotonic()
    await apply_demo(kube, objects, rooted_first=True)
    _print(f"  applied deploy/demo ({len(objects)} objects) in namespace {DEMO_NAMESPACE}")
    last: tuple[int, ...] = ()
    while True:
        counts = await progress(kube, nats_url, security)
        if counts != last:
            total, pending, allocated, prepared, running = counts
            _print(f"  [{time.monotonic() - t0:5.1f}s] pods {total}: pending {pending}, allocated "
                   f"{allocated}, prepared {prepared}, running {running}")
            last = counts
        if counts[4] >= expected:
            break
        if time.monotonic() - t0 > timeout:
            _print(f"  not every pod is Running after {timeout:.0f}s")
            break
        if check is not None:
            check()
        await asyncio.sleep(1)
    _print(f"  {counts[4]}/{expected} runnable pods Running in {time.monotonic() - t0:.1f}s")
    return counts[4], expected


@contextlib.asynccontextmanager
async def demo_step(env: Environment, args: argparse.Namespace) -> AsyncIterator[object]:
    kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
    try:
        procs = getattr(args, "service_processes", [])
        running, expected = await run_demo(kube, env.nats_url, float(getattr(args, "demo_timeout", 300.0)),
                                           check=lambda: _check_alive(procs),
                                           security=nats_env_security(env.service_env()))
        if running < expected:
            _print(f"  see the logs in {env.logs_dir}")
        _print("")
        _print(await summary(env, kube, getattr(args, "allocator_url", "")))
    finally:
        await kube.close()
    yield None


async def summary(env: Environment, kube: KubeClient, allocator_url: str) -> str:
    out = ["== draflow status", await cli_status.run(kube), ""]
    pods = (await kube.list(PODS, namespace=DEMO_NAMESPACE)).get("items") or []
    claims = {c["metadata"]["name"]: c for c in
              (await kube.list(RESOURCE_CLAIMS, namespace=DEMO_NAMESPACE)).get("items") or []}
    rows = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        devices: list[str] = []
        for name in claim_names(pod, extended=True):
            devices.extend(f"{d.pool}/{d.device}" for d in devices_of(claims.get(name) or {}))
        rows.append([pod["metadata"]["name"], (pod.get("status") or {}).get("phase", ""),
                     pod["spec"].get("nodeName") or "-", ", ".join(claim_names(pod, extended=True)) or "-",
                     ", ".join(devices) or "-"])
    out += [f"== pods in {DEMO_NAMESPACE}", render(["POD", "PHASE", "NODE", "CLAIMS", "DEVICES"], rows), ""]
    traced = next(
        (c for c in claims.values() if trace_id_of(c) and (c.get("status") or {}).get("allocation")), None
    )
    if traced is not None:
        name = traced["metadata"]["name"]
        out += [f"== trace of claim {DEMO_NAMESPACE}/{name} (draflow trace {DEMO_NAMESPACE}/{name})",
                jaeger_link(env.jaeger_query_url, trace_id_of(traced)), ""]
    out += ["== web view: nodes x devices, live (open in a browser)", f"{allocator_url}/ui", "",
            *try_it(env.env_file)]
    return "\n".join(out)


def try_it(env_file: Path) -> list[str]:
    """What ``make up`` suggests next (README, *Quick start* and *Try it*), from the repository's root."""
    ns = DEMO_NAMESPACE
    return [f"== try (README): source {env_file}, then from {repo_root()}",
            f"  draflow status | describe node {NODE_PREFIX}0 | events --last 20 | trace {ns}/shared-gpu",
            f"  kubectl apply -k {EXTRAS}    # a claim that fits on no node, a pod asking for GPUs "
            "through resources.limits",
            f"  draflow explain {ns}/{UNFIT_CLAIM}; draflow explain pod/{EXTENDED_POD} -n {ns}",
            f"  draflow trace pod/{UNFIT_CLAIM} -n {ns}; draflow trace pod/{EXTENDED_POD} -n {ns}",
            f"  kubectl delete -k {EXTRAS}"]


STEPS = [("start the five services", services_step), ("apply the demo workload", demo_step)]
