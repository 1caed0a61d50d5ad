"""deploy/: the kustomize bases and overlays, the image, and every service's RBAC on the real kube-apiserver.

What runs here, in order of cost:
- ``kustomize build`` of every base and overlay: expected kinds, nothing declared twice, the settings each
  workload must carry (endpoints ConfigMap, node name from the downward API, leader election, fleet mode,
  production hardening).
- ``deploy/images/Dockerfile``: its COPY sources exist, its ``--package`` list is the set of services, every
  workload's ``command`` is one of their console scripts, and its two ``uv sync`` steps, run outside Docker
  on a copy of what the build context would hold, install exactly the five entry points.
- A server-side dry-run apply (``?dryRun=All``, apply patch) of every overlay's objects: schemas, RBAC
  objects, admission policies and the DeviceClass's CEL as the pinned API server validates them.
- Each service's RBAC applied for real (renamed into a test namespace), then SubjectAccessReviews: what its
  README and code use is allowed, unrelated verbs are denied. (Each service's own integration tests also
  run under its identity: the ``service_identity`` fixture, ``draflow_testenv.identity``.)
- ``tilt ci -- --local``: the Tiltfile's local mode brings up its own draflow-testenv and all five services
  as processes, every readiness probe passes, and its ``demo`` resource gets every demo pod that fits to
  Running. Cluster mode is evaluated (``tilt alpha tiltfile-result``, no cluster contacted): image builds,
  live update, the dev overlay's workloads, port forwards.
- The five services as processes, each with the token of its own ServiceAccount and exactly the RBAC of
  the sim overlay (applied for real into a test namespace): a pod with a ResourceClaimTemplate is given
  a claim, a device and a node, is prepared (CDI spec written) and reaches Running on a simulated node.

One file because the sections share the ``built`` fixture and helpers (tests/integration has no conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import shlex
import shutil
import socket
import sys
import tempfile
import tomllib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from draflow_runtime.errors import ApiError, NotFound
from draflow_runtime.kube import (
    NODES,
    PODS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
)
from draflow_testenv.binaries import ensure_binary
from draflow_testenv.identity import RBAC_KINDS, Discovery, apply, apply_order, delete_outside, relocate

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KUSTOMIZE_DIR = REPO / "deploy" / "kustomize"
DOCKERFILE = REPO / "deploy" / "images" / "Dockerfile"
NAMESPACE = "draflow-system"
SERVICES = [
    "claim-controller", "structured-allocator", "slice-publisher", "kubelet-dra-shim", "reference-driver",
]
CONTROLLERS = ["claim-controller", "structured-allocator"]
NODE_AGENTS = ["slice-publisher", "kubelet-dra-shim", "reference-driver"]
BASES = ["common", *SERVICES]
OVERLAYS = ["dev", "sim", "production"]
FIELD_MANAGER = "draflow-deploy-test"

VAP_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
EXPECTED_KINDS: dict[str, set[str]] = {
    "common": {"Namespace", "ConfigMap"},
    "claim-controller": RBAC_KINDS | {"Deployment"},
    "structured-allocator": RBAC_KINDS | {"Deployment"},
    "slice-publisher": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"} | VAP_KINDS,
    "kubelet-dra-shim": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"},
    "reference-driver": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "DeviceClass"},
    "dev": RBAC_KINDS | VAP_KINDS | {"Namespace", "ConfigMap", "Deployment", "DaemonSet", "Service",
                                     "DeviceClass"},
    "sim": RBAC_KINDS | VAP_KINDS | {"Namespace", "ConfigMap", "Deployment", "Service", "DeviceClass"},
    "production": RBAC_KINDS | VAP_KINDS | {"Namespace", "ConfigMap", "Deployment", "DaemonSet",
                                            "DeviceClass", "PodDisruptionBudget"},
}


def env_prefix(service: str) -> str:
    return "DRAFLOW_" + service.upper().replace("-", "_") + "_"


def target_dir(target: str) -> Path:
    return KUSTOMIZE_DIR / ("overlays" if target in OVERLAYS else "base") / target


# --------------------------------------------------------------------------------------------- building


@pytest.fixture(scope="session")
async def built() -> dict[str, list[dict[str, Any]]]:
    """``kustomize build`` of every base and overlay: target -> its objects."""
    kustomize = await ensure_binary("kustomize")
    out: dict[str, list[dict[str, Any]]] = {}
    for target in BASES + OVERLAYS:
        proc = await asyncio.create_subprocess_exec(
            str(kustomize), "build", str(target_dir(target)),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await proc.communicate()
        assert proc.returncode == 0, f"kustomize build {target} failed:\n{stderr.decode()}"
        out[target] = [doc for doc in yaml.safe_load_all(stdout) if doc]
    return out


def identity(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    group = obj["apiVersion"].rpartition("/")[0]
    return group, obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def workloads(objs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from (o for o in objs if o["kind"] in ("Deployment", "DaemonSet"))


def find(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def draflow_containers(objs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container that runs a draflow service."""
    for w in workloads(objs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            if c.get("command", [""])[0] in SERVICES:
                yield w, c


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("target", BASES + OVERLAYS)
async def test_every_base_and_overlay_builds_with_the_expected_kinds(
    built: dict[str, list[dict[str, Any]]], target: str
) -> None:
    kinds = {o["kind"] for o in built[target]}
    assert kinds == EXPECTED_KINDS[target]


@pytest.mark.parametrize("target", BASES + OVERLAYS)
async def test_no_object_is_declared_twice(built: dict[str, list[dict[str, Any]]], target: str) -> None:
    counts = Counter(identity(o) for o in built[target])
    assert [k for k, n in counts.items() if n > 1] == []


@pytest.mark.parametrize("target", BASES + OVERLAYS)
async def test_namespaced_objects_live_in_draflow_system(
    built: dict[str, list[dict[str, Any]]], target: str
) -> None:
    # kube-node-lease: the simulated kubelet's node Leases (sim only).
    allowed = {"", NAMESPACE, "kube-node-lease"}
    assert {o["metadata"].get("namespace", "") for o in built[target]} <= allowed


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_every_overlay_runs_all_five_services(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    commands = Counter(c["command"][0] for _, c in draflow_containers(built[overlay]))
    assert commands == Counter(SERVICES)


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_every_service_reads_nats_and_otlp_from_the_endpoints_configmap(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    find(built[overlay], "ConfigMap", "draflow-endpoints")
    for _, c in draflow_containers(built[overlay]):
        env = env_of(c)
        service = c["command"][0]
        nats = env[env_prefix(service) + "NATS_URL"]
        otlp = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert "value" not in nats, service
        assert nats["valueFrom"]["configMapKeyRef"] == {"name": "draflow-endpoints", "key": "NATS_URL"}
        assert otlp["valueFrom"]["configMapKeyRef"]["name"] == "draflow-endpoints"


@pytest.mark.parametrize("overlay", ["dev", "production"])
async def test_node_agents_are_daemonsets_bound_to_their_node_and_the_kubelet_directories(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    for name in NODE_AGENTS:
        ds = find(built[overlay], "DaemonSet", name)
        pod = ds["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == name
        # uid 0 for the root-owned host directories and sockets; nothing more.
        assert pod["securityContext"]["runAsUser"] == 0, name
        (c,) = pod["containers"]
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
        assert not c["securityContext"].get("privileged"), name
        assert env_of(c)["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
        host_paths = {v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
        assert {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins"} <= host_paths, name
        mounts = {m["mountPath"] for m in c["volumeMounts"]}
        assert {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins"} <= mounts, name
    driver = find(built[overlay], "DaemonSet", "reference-driver")["spec"]["template"]["spec"]
    assert "/var/run/cdi" in {v["hostPath"]["path"] for v in driver["volumes"]}
    shim = find(built[overlay], "DaemonSet", "kubelet-dra-shim")["spec"]["template"]["spec"]["containers"][0]
    assert env_of(shim)["DRAFLOW_KUBELET_DRA_SHIM_SIMULATE_KUBELET"]["value"] == "false"


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_controllers_are_deployments_with_leader_election(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    for name in CONTROLLERS:
        pod = find(built[overlay], "Deployment", name)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        (c,) = pod["containers"]
        env = env_of(c)
        assert env[env_prefix(name) + "LEADER_ELECT"]["value"] == "true"
        assert env[env_prefix(name) + "IDENTITY"]["value"] == "$(POD_NAME)"
        assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


async def test_reference_driver_device_class_selects_its_devices(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    dc = find(built["reference-driver"], "DeviceClass", "gpu.draflow.example")
    assert dc["apiVersion"] == "resource.k8s.io/v1"
    assert dc["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "gpu.draflow.example"'}}]


async def test_dev_overlay_adds_nats_with_jetstream_jaeger_and_debug_logs(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    objs = built["dev"]
    (nats,) = find(objs, "Deployment", "nats")["spec"]["template"]["spec"]["containers"]
    assert "--jetstream" in nats["args"]
    find(objs, "Service", "nats")
    find(objs, "Deployment", "jaeger")
    ports = {p["port"] for p in find(objs, "Service", "jaeger")["spec"]["ports"]}
    assert {4317, 16686} <= ports
    for _, c in draflow_containers(objs):
        assert env_of(c)[env_prefix(c["command"][0]) + "LOG_LEVEL"]["value"] == "debug"


async def test_sim_overlay_runs_the_node_agents_as_one_fleet_with_the_simulated_kubelet(
    built: dict[str, list[dict[str, Any]]],
) -> None:
    objs = built["sim"]
    assert [o for o in objs if o["kind"] == "DaemonSet"] == []
    fleet = find(objs, "Deployment", "sim-fleet")
    assert fleet["spec"]["replicas"] == 1
    pod = fleet["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "sim-fleet"
    containers = {c["name"]: c for c in pod["containers"]}
    assert set(containers) == set(NODE_AGENTS)
    fleet_volume = next(v["name"] for v in pod["volumes"] if "emptyDir" in v)
    for name, c in containers.items():
        env = env_of(c)
        assert env[env_prefix(name) + "FLEET_ROOT"]["value"] == "/var/lib/draflow/fleet"
        assert {"name": fleet_volume, "mountPath": "/var/lib/draflow/fleet"} in c["volumeMounts"]
    shim = env_of(containers["kubelet-dra-shim"])
    assert shim["DRAFLOW_KUBELET_DRA_SHIM_SIMULATE_KUBELET"]["value"] == "true"
    # Only simulated nodes wipe slices slice-publisher did not write (a real node's late driver keeps them).
    wipe = "DRAFLOW_SLICE_PUBLISHER_WIPE_FOREIGN_SLICES"
    assert env_of(containers["slice-publisher"])[wipe]["value"] == "true"
    real = [o for name in OVERLAYS if name != "sim" for o in built[name]]
    assert not [c for _, c in draflow_containers(real) if wipe in env_of(c)]
    driver = env_of(containers["reference-driver"])
    assert shim["DRAFLOW_KUBELET_DRA_SHIM_NODE_COUNT"]["valueFrom"] == \
        driver["DRAFLOW_REFERENCE_DRIVER_NODE_COUNT"]["valueFrom"]
    ports = [p["containerPort"] for c in pod["containers"] for p in c["ports"]]
    assert len(ports) == len(set(ports)), "containers of one pod share the network namespace"
    find(objs, "Deployment", "nats")


async def test_production_overlay_is_hardened(built: dict[str, list[dict[str, Any]]]) -> None:
    objs = built["production"]
    for name in CONTROLLERS:
        assert find(objs, "Deployment", name)["spec"]["replicas"] == 2
        pdb = find(objs, "PodDisruptionBudget", name)
        assert pdb["spec"]["minAvailable"] == 1
        assert pdb["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": name}
    for w, c in draflow_containers(objs):
        name = w["metadata"]["name"]
        assert {"cpu", "memory"} <= set(c["resources"]["requests"]), name
        assert "memory" in c["resources"]["limits"], name
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", name
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", name
        assert c["startupProbe"]["httpGet"]["path"] == "/healthz", name
        annotations = w["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        http = next(p["containerPort"] for p in c["ports"] if p["name"] == "http")
        assert annotations["prometheus.io/port"] == str(http), name
        assert not c["image"].startswith("draflow:"), name
    nats = find(objs, "ConfigMap", "draflow-endpoints")["data"]["NATS_URL"]
    assert f".{NAMESPACE}." not in nats, "production uses a NATS cluster, not the dev server"


# ------------------------------------------------------------------------------------------------ image


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def service_scripts() -> dict[str, str]:
    """Console script -> service, from services/*/pyproject.toml."""
    scripts = {}
    for service in SERVICES:
        project = tomllib.loads((REPO / "services" / service / "pyproject.toml").read_text())["project"]
        for script in project.get("scripts", {}):
            scripts[script] = service
    return scripts


def uv_sync_steps() -> list[list[str]]:
    steps = []
    for word, rest in dockerfile_instructions():
        if word == "RUN" and "uv sync" in rest:
            argv = shlex.split(rest)
            steps.append([a for a in argv if not a.startswith("--mount=")])
    return steps


def test_dockerfile_copies_only_paths_that_exist_and_installs_every_service() -> None:
    for word, rest in dockerfile_instructions():
        if word == "COPY" and "--from=" not in rest:
            *sources, _dest = rest.split()
            for src in sources:
                assert (REPO / src).exists(), f"COPY {src}: no such path"
    steps = uv_sync_steps()
    assert len(steps) == 2
    for argv in steps:
        assert {"--frozen", "--no-dev"} <= set(argv)
        packages = {argv[i + 1] for i, a in enumerate(argv) if a == "--package"}
        assert packages == set(SERVICES)


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_every_workload_command_is_a_service_entry_point(
    built: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    scripts = service_scripts()
    for w, c in draflow_containers(built[overlay]):
        assert c["command"][0] in scripts, (w["metadata"]["name"], c["command"])
        # One image (draflow) for every service; dev names it draflow-<service> per workload for Tilt.
        repo = c["image"].rsplit("/", 1)[-1].split(":")[0]
        assert repo in ("draflow", f"draflow-{c['command'][0]}"), c["image"]


async def test_dockerfile_uv_steps_install_exactly_the_five_entry_points(tmp_path: Path) -> None:
    """The two `uv sync` RUN steps, outside Docker, on what the build context holds at each step."""
    uv = (await run_ok([str(REPO / "hack" / "ensure-uv.sh")])).strip()
    src = tmp_path / "src"
    src.mkdir()
    for word, rest in dockerfile_instructions():
        if word == "COPY" and "--from=" not in rest:
            *sources, dest = rest.split()
            for s in sources:
                target = src / (dest if dest not in ("./", ".") else "")
                if (REPO / s).is_dir():
                    shutil.copytree(REPO / s, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("__pycache__", "tests", "bench"))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(REPO / s, target / Path(s).name)
        elif word == "RUN" and "uv sync" in rest:
            argv = [a for a in shlex.split(rest) if not a.startswith("--mount=")]
            env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(tmp_path / "venv"),
                   "UV_PYTHON_DOWNLOADS": "never", "UV_LINK_MODE": "copy"}
            await run_ok([uv, *argv[1:]], cwd=src, env=env)
    bin_dir = tmp_path / "venv" / "bin"
    for script in service_scripts():
        assert (bin_dir / script).exists(), script
    assert not (bin_dir / "pytest").exists(), "no dev dependencies in the image"
    # The Tiltfile's live update copies sources into the image's site-packages: the layout must match.
    tiltfile = (REPO / "Tiltfile").read_text()
    site = re.search(r'^SITE_PACKAGES = "(.*)"$', tiltfile, flags=re.M)
    assert site and "UV_PROJECT_ENVIRONMENT=/app/.venv" in DOCKERFILE.read_text()
    local_site = tmp_path / "venv" / Path(site.group(1)).relative_to("/app/.venv")
    packages = [p.replace("-", "_") for p in SERVICES] + ["draflow_runtime", "draflow_protos"]
    assert [p for p in packages if not (local_site / p / "__init__.py").exists()] == []
    assert not (bin_dir / "draflow-testenv").exists(), "the test environment is not in the image"


async def run_ok(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0, f"{shlex.join(argv)} failed:\n{out.decode()[-3000:]}"
    return out.decode()


# ------------------------------------------------------------------------------------- API server


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_overlay_passes_a_server_side_dry_run_apply(
    built: dict[str, list[dict[str, Any]]], testenv: Any, kube: KubeClient, overlay: str
) -> None:
    # Namespaced objects need their namespace to exist even in a dry run: create it for real (idempotent).
    await testenv.admin.ensure_namespace(NAMESPACE)
    discovery = Discovery(kube)
    failures = []
    for obj in sorted(built[overlay], key=apply_order):
        try:
            await apply(kube, discovery, obj, dry_run=True, field_manager=FIELD_MANAGER)
        except ApiError as exc:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.status} {exc.message}")
    assert failures == []


# ------------------------------------------------------------------------------------------------ RBAC

# What each service's code and README need, (verb, group, resource/subresource, where): "cluster" for
# cluster-scoped resources and ClusterRole grants on namespaced ones (checked in namespace `default`),
# "lease:<name>" for its leader-election Lease in its own namespace, "node-leases" for kube-node-lease.
# resourceclaims/binding is the synthetic check of DRAResourceClaimGranularStatusAuthorization (on since
# 1.36): a status write changing allocation or reservedFor also needs `<verb> resourceclaims/binding`.
Grant = tuple[str, str, str, str]
GRANTS: dict[str, list[Grant]] = {
    "claim-controller": [
        *[(v, "", "pods", "cluster") for v in ("get", "list", "watch", "delete")],
        ("patch", "", "pods/status", "cluster"),
        ("update", "", "pods/finalizers", "cluster"),
        *[(v, "resource.k8s.io", "resourceclaims", "cluster")
          for v in ("get", "list", "watch", "create", "patch", "delete")],
        ("patch", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        *[(v, "resource.k8s.io", "resourceclaimtemplates", "cluster") for v in ("get", "list", "watch")],
        *[(v, "resource.k8s.io", r, "cluster") for v in ("get", "list", "watch")
          for r in ("resourceslices", "devicetaintrules")],
        ("patch", "resource.k8s.io", "devicetaintrules/status", "cluster"),
        ("get", "", "nodes", "cluster"),
        ("create", "", "events", "cluster"), ("patch", "", "events", "cluster"),
        ("create", "coordination.k8s.io", "leases", "lease:"),
        ("get", "coordination.k8s.io", "leases", "lease:claim-controller"),
        ("update", "coordination.k8s.io", "leases", "lease:claim-controller"),
    ],
    "structured-allocator": [
        *[(v, "", "pods", "cluster") for v in ("get", "list", "watch")],
        ("create", "", "pods/binding", "cluster"),
        ("patch", "", "pods/status", "cluster"),
        *[(v, "resource.k8s.io", "resourceclaims", "cluster")
          for v in ("get", "list", "watch", "patch", "create", "delete")],
        ("update", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("update", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        *[(v, "resource.k8s.io", r, "cluster") for v in ("get", "list", "watch")
          for r in ("resourceslices", "deviceclasses", "devicetaintrules")],
        *[(v, "", "nodes", "cluster") for v in ("get", "list", "watch")],
        ("create", "", "events", "cluster"),
        ("create", "coordination.k8s.io", "leases", "lease:"),
        ("update", "coordination.k8s.io", "leases", "lease:structured-allocator"),
    ],
    "slice-publisher": [
        *[(v, "resource.k8s.io", "resourceslices", "cluster")
          for v in ("get", "list", "watch", "create", "update", "delete")],
        *[(v, "", "nodes", "cluster") for v in ("get", "list", "watch")],
    ],
    "kubelet-dra-shim": [
        *[(v, "", "pods", "cluster") for v in ("get", "list", "watch")],
        *[(v, "resource.k8s.io", "resourceclaims", "cluster") for v in ("get", "list", "watch")],
        ("create", "", "events", "cluster"), ("patch", "", "events", "cluster"),
    ],
    "reference-driver": [
        ("get", "resource.k8s.io", "resourceclaims", "cluster"),
    ],
}
# Verbs a service must not have: each is a plausible mistake (a wider wildcard, a neighbour's job).
DENIED: dict[str, list[Grant]] = {
    "claim-controller": [  # pods delete is granted since device-taint eviction
        ("update", "resource.k8s.io", "devicetaintrules", "cluster"), ("update", "", "nodes", "cluster"),
        ("create", "", "pods/binding", "cluster"), ("create", "resource.k8s.io", "resourceslices", "cluster"),
        ("get", "", "secrets", "cluster"), ("update", "coordination.k8s.io", "leases", "lease:other"),
    ],
    "structured-allocator": [
        ("delete", "", "pods", "cluster"), ("update", "", "pods", "cluster"),
        ("create", "resource.k8s.io", "resourceslices", "cluster"), ("get", "", "secrets", "cluster"),
        ("update", "coordination.k8s.io", "leases", "lease:claim-controller"),
        ("update", "resource.k8s.io", "resourceclaims", "cluster"),  # only patched; status is PUT
    ],
    "slice-publisher": [
        ("get", "", "pods", "cluster"), ("update", "resource.k8s.io", "resourceclaims", "cluster"),
        ("create", "", "nodes", "cluster"), ("get", "", "secrets", "cluster"),
        ("patch", "resource.k8s.io", "resourceslices", "cluster"),  # PUT only
        ("deletecollection", "resource.k8s.io", "resourceslices", "cluster"),  # one DELETE at a time
    ],
    "kubelet-dra-shim": [
        ("create", "", "nodes", "cluster"), ("delete", "", "pods", "cluster"),
        ("patch", "", "pods", "cluster"), ("patch", "", "pods/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("patch", "resource.k8s.io", "resourceclaims/binding", "cluster"),
        ("create", "resource.k8s.io", "resourceslices", "cluster"), ("get", "", "secrets", "cluster"),
        ("create", "coordination.k8s.io", "leases", "node-leases"),
    ],
    "reference-driver": [
        ("watch", "resource.k8s.io", "resourceclaims", "cluster"),
        ("update", "resource.k8s.io", "resourceclaims/status", "cluster"),
        ("create", "resource.k8s.io", "resourceslices", "cluster"), ("get", "", "pods", "cluster"),
        ("get", "", "secrets", "cluster"), ("list", "resource.k8s.io", "resourceclaims", "cluster"),
    ],
}
# sim-fleet: the union of the node agents plus the simulated kubelet (Node, node Lease, pod lifecycle).
GRANTS["sim-fleet"] = [
    *GRANTS["slice-publisher"], *GRANTS["kubelet-dra-shim"], *GRANTS["reference-driver"],
    ("get", "", "nodes", "cluster"), ("create", "", "nodes", "cluster"),
    ("patch", "", "nodes/status", "cluster"),
    ("patch", "", "pods", "cluster"), ("delete", "", "pods", "cluster"),
    ("patch", "", "pods/status", "cluster"),
    *[(v, "coordination.k8s.io", "leases", "node-leases") for v in ("create", "patch")],
]
DENIED["sim-fleet"] = [
    ("delete", "", "nodes", "cluster"), ("get", "", "secrets", "cluster"),
    ("create", "resource.k8s.io", "resourceclaims", "cluster"), ("create", "", "pods/binding", "cluster"),
]


VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
API_GROUPS = {
    "pods": "", "nodes": "", "events": "", "leases": "coordination.k8s.io",
    **{r: "resource.k8s.io" for r in ("resourceclaims", "resourceclaimtemplates", "resourceslices",
                                       "deviceclasses", "devicetaintrules")},
}
SIMULATED_KUBELET_ONLY = "simulated kubelet only"


def rbac_section(service: str) -> str:
    """The body of the README's "## RBAC..." section ("" without README or section)."""
    readme = REPO / "services" / service / "README.md"
    text = readme.read_text() if readme.exists() else ""
    section = re.search(r"^## RBAC.*?$(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    return section.group(1) if section else ""


def readme_grants(service: str) -> dict[str, list[Grant]]:
    """What the service's README says it needs, by identity: the service's own, and "sim-fleet" for rows
    marked "simulated kubelet only". Read from the RBAC section's table (| `resource` | verbs | why |) and
    from ClusterRole/Role YAML blocks; prose is not parsed (the GRANTS table covers it)."""
    readme = REPO / "services" / service / "README.md"
    out: dict[str, list[Grant]] = {service: [], "sim-fleet": []}
    if not readme.exists():
        return out
    text = readme.read_text()
    for line in rbac_section(service).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        who = "sim-fleet" if SIMULATED_KUBELET_ONLY in " ".join(cells[2:]) else service
        verbs = [v for v in re.findall(r"[a-z]+", cells[1]) if v in VERBS]
        for resource in re.findall(r"`([a-z/]+)`", cells[0]):
            group = API_GROUPS[resource.split("/")[0]]
            for verb in verbs:
                if resource == "leases":
                    where = "node-leases" if "kube-node-lease" in cells[0] else (
                        "lease:" if verb == "create" else f"lease:{service}")
                else:
                    where = "cluster"
                out[who].append((verb, group, resource, where))
    for block in re.findall(r"```ya?ml\n(.*?)```", text, flags=re.S):
        for doc in yaml.safe_load_all(block):
            if not isinstance(doc, dict) or doc.get("kind") not in ("ClusterRole", "Role"):
                continue
            where = "cluster" if doc["kind"] == "ClusterRole" else "lease:"
            for rule in doc.get("rules", []):
                if rule.get("resourceNames"):
                    continue
                for group in rule.get("apiGroups", [""]):
                    for resource in rule.get("resources", []):
                        out[service].extend((verb, group, resource, where) for verb in rule.get("verbs", []))
    return out


async def can(kube: KubeClient, ns: str, sa: str, grant: Grant) -> bool:
    verb, group, resource, where = grant
    resource, _, subresource = resource.partition("/")
    attrs: dict[str, Any] = {"verb": verb, "group": group, "resource": resource, "subresource": subresource}
    if where.startswith("lease:"):
        attrs["namespace"] = ns
        if where != "lease:":
            attrs["name"] = where.removeprefix("lease:")
    elif where == "node-leases":
        attrs["namespace"] = "kube-node-lease"
    elif resource not in ("nodes", "resourceslices", "deviceclasses", "devicetaintrules") and \
            (resource, subresource) != ("resourceclaims", "binding"):  # the API server checks it cluster-wide
        attrs["namespace"] = "default"
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{ns}:{sa}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
            "resourceAttributes": attrs,
        },
    }
    result = await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(result["status"].get("allowed"))


@pytest.mark.parametrize(("target", "sa"), [*((s, s) for s in SERVICES), ("sim", "sim-fleet")])
async def test_service_account_gets_exactly_what_the_service_needs(
    built: dict[str, list[dict[str, Any]]], kube: KubeClient,
    make_namespace: Callable[..., Awaitable[str]], target: str, sa: str,
) -> None:
    ns = await make_namespace("rbac")
    suffix = ns.rpartition("-")[2]
    objs = relocate(built[target], ns, suffix)
    discovery = Discovery(kube)
    try:
        for obj in sorted(objs, key=apply_order):
            await apply(kube, discovery, obj, field_manager=FIELD_MANAGER)
        if sa in SERVICES:
            wanted = GRANTS[sa] + readme_grants(sa)[sa]
        else:  # the fleet pod: the three node agents' READMEs, simulated-kubelet rows included
            wanted = GRANTS[sa] + [
                g for svc in NODE_AGENTS for rows in readme_grants(svc).values() for g in rows
            ]
        missing = [g for g in wanted if not await can(kube, ns, sa, g)]
        deadline = asyncio.get_running_loop().time() + 10
        while missing and asyncio.get_running_loop().time() < deadline:
            # The RBAC authorizer reads roles from an informer: a fresh grant may take a moment to count.
            await asyncio.sleep(0.2)
            missing = [g for g in missing if not await can(kube, ns, sa, g)]
        excess = [g for g in DENIED[sa] if await can(kube, ns, sa, g)]
        assert (missing, excess) == ([], [])
    finally:
        await delete_outside(kube, discovery, objs, ns)


# ------------------------------------------------------------------------------------------------ Tilt


@pytest.mark.timeout(900)
async def test_tilt_ci_local_brings_every_service_up(tmp_path: Path) -> None:
    """The Tiltfile's local mode end to end: its own draflow-testenv, the five services, all ready, and the
    demo workload Running (all its pods but the one that cannot fit)."""
    tilt = await ensure_binary("tilt")  # `make test` builds it up front (hack/binaries.sh); this only checks
    fleet = Path(tempfile.mkdtemp(prefix="dtf-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    ports = [free_port() for _ in range(2)]
    try:
        out = await run_ok(
            [str(tilt), "ci", "--port", str(ports[0]), "--timeout", "10m", "--",
             "--local", "--nodes", "4", "--state-dir", str(tmp_path / "testenv"),
             "--fleet-root", str(fleet), "--port-base", str(ports[1])],
            cwd=REPO, env={**os.environ, "TILT_DISABLE_ANALYTICS": "1"},
        )
    finally:
        shutil.rmtree(fleet, ignore_errors=True)
    assert "SUCCESS. All workloads are healthy." in out
    running = re.search(r"(\d+)/(\d+) runnable pods Running", out)
    assert running and running[1] == running[2] != "0", out[-3000:]


def pruned(value: Any) -> Any:
    """``value`` without empty maps, lists and nulls, at any depth."""
    if isinstance(value, dict):
        out = {k: pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


async def test_tilt_cluster_mode_builds_deploys_forwards_and_live_updates_every_service(
    built: dict[str, list[dict[str, Any]]], tmp_path: Path,
) -> None:
    """Cluster mode as Tilt evaluates it (``tilt alpha tiltfile-result``: the Tiltfile run, nothing built or
    applied; the kube context is named like a local kind cluster and never contacted). Needs no network:
    the live update restarts a service by SIGHUP (draflow_runtime.service), not by a Tilt extension."""
    tilt = await ensure_binary("tilt")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "kind-draflow",
        "clusters": [{"name": "kind-draflow", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "kind-draflow", "context": {"cluster": "kind-draflow", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "unused"}}],
    }))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "TILT_DISABLE_ANALYTICS": "1",
           "DRAFLOW_BIN_KUSTOMIZE": str(await ensure_binary("kustomize"))}
    result = yaml.safe_load(await run_ok([str(tilt), "alpha", "tiltfile-result"], cwd=REPO, env=env))
    assert not result.get("Error"), result["Error"]
    manifests = {m["Name"]: m for m in result["Manifests"]}
    assert set(SERVICES) | {"nats", "jaeger"} <= set(manifests)
    python = re.search(r"ARG PYTHON_VERSION=(\S+)", DOCKERFILE.read_text())
    assert python is not None
    site_packages = f"/app/.venv/lib/python{python[1]}/site-packages"
    dev = {(o["kind"], o["metadata"]["name"]): o for o in built["dev"]}
    for service in SERVICES:
        (image,) = manifests[service]["ImageTargets"]
        assert image["selector"] == f"draflow-{service}"
        assert image["BuildDetails"]["dockerfileContents"] == DOCKERFILE.read_text()
        live = image["LiveUpdateSpec"]
        package = service.replace("-", "_")
        synced = {(s["localPath"], s["containerPath"]) for s in live["syncs"]}
        assert synced == {
            (f"services/{service}/src/{package}", f"{site_packages}/{package}"),
            ("libs/draflow-runtime/src/draflow_runtime", f"{site_packages}/draflow_runtime"),
            ("libs/draflow-protos/src/draflow_protos", f"{site_packages}/draflow_protos"),
        }
        assert [e["args"] for e in live["execs"]] == [["sh", "-c", "kill -HUP 1"]]
        assert {"uv.lock", "pyproject.toml", f"services/{service}/pyproject.toml"} <= set(live["stopPaths"])
        # What Tilt deploys for it is the dev overlay's workload, with the image Tilt builds.
        deploy = manifests[service]["DeployTarget"]
        (workload,) = [o for o in yaml.safe_load_all(deploy["yaml"])
                       if o["kind"] in ("Deployment", "DaemonSet")]
        assert pruned(workload) == pruned(dev[(workload["kind"], service)])  # Tilt adds empty fields
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"draflow-{service}" and container["command"][0] == service
        (forward,) = deploy["portForwardTemplateSpec"]["forwards"]
        assert forward["containerPort"] == next(p["containerPort"] for p in container["ports"]
                                                if p["name"] == "http")
    forwards = {m: [f["localPort"] for f in manifests[m]["DeployTarget"]["portForwardTemplateSpec"][
        "forwards"]] for m in ("nats", "jaeger")}
    assert forwards == {"nats": [4222, 8222], "jaeger": [16686]}


def free_port() -> int:
    """A base port with the next four free as well (the five local services use PORT_BASE..+4)."""
    for _ in range(50):
        base = random.randint(20000, 60000)
        try:
            for p in range(base, base + 5):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base
    raise RuntimeError("no five consecutive free ports")


@pytest.mark.parametrize("service", SERVICES)
def test_readme_rbac_tables_parse(service: str) -> None:
    """Guards the parser above: a README that has an RBAC table yields rows (else its check is vacuous)."""
    has_table = re.search(r"^\| `", rbac_section(service), flags=re.M)
    grants = readme_grants(service)
    assert bool(has_table) <= bool(grants[service]), grants


# ------------------------------------------------------------------ the services under their own RBAC


@pytest.mark.timeout(600)
async def test_every_service_under_its_own_service_account_runs_a_pod_with_a_claim(
    built: dict[str, list[dict[str, Any]]], testenv: Any, kube: KubeClient,
    make_namespace: Callable[..., Awaitable[str]], run_service: Callable[..., Awaitable[Any]],
) -> None:
    """The happy path with no admin credentials anywhere: each process authenticates with a token of its
    own ServiceAccount, bound only by this repository's RBAC (sim overlay: the node agents share the fleet
    identity). Scoped so that it cannot touch other tests: claim-controller watches one namespace, the
    allocator one scheduler name, the fleet serves one node with a unique name."""
    ns = await make_namespace("e2e")
    suffix = ns.rpartition("-")[2]
    node = f"e2e-{suffix}-0"
    scheduler = f"draflow-e2e-{suffix}"
    device_class = f"e2e-{suffix}.gpu.draflow.example"
    objs = relocate(built["sim"], ns, suffix)
    objs.append({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.draflow.example"'}}]},
    })
    discovery = Discovery(kube)
    fleet = Path(tempfile.mkdtemp(prefix="dtf-", dir="/tmp"))  # short: unix socket paths are <= 107 bytes
    procs = []
    try:
        for obj in sorted(objs, key=apply_order):
            await apply(kube, discovery, obj, field_manager=FIELD_MANAGER)
        bin_dir = Path(sys.executable).parent
        runs = [
            ("sim-fleet", ["reference-driver", "--node-count", "1", "--node-name-prefix", f"e2e-{suffix}-"]),
            ("sim-fleet", ["kubelet-dra-shim", "--node-count", "1", "--node-name-prefix", f"e2e-{suffix}-"]),
            ("sim-fleet", ["slice-publisher"]),
            ("claim-controller", ["claim-controller", "--namespace", ns]),
            ("structured-allocator", ["structured-allocator", "--scheduler-names", scheduler]),
        ]
        for sa, (service, *args) in runs:
            argv = [str(bin_dir / service), *args, "--http-port", "0"]
            if service in NODE_AGENTS:
                argv += ["--fleet-root", str(fleet)]
            if service in CONTROLLERS:
                argv += ["--leader-elect", "--leader-election-namespace", ns]
            procs.append(await run_service(
                argv, env={env_prefix(service) + "NATS_URL": testenv.nats_url},
                kubeconfig=await testenv.serviceaccount_kubeconfig(ns, sa), name=f"{service}-{suffix}",
            ))
        # The simulated kubelet registers the Node and reports it Ready (the test API server runs without the
        # TaintNodesByCondition admission, as no node lifecycle controller would lift its not-ready taint).
        for _ in range(120):
            with contextlib.suppress(NotFound):
                if (await kube.get(NODES, node)).get("status", {}).get("conditions"):
                    break
            await asyncio.sleep(0.5)
        await kube.create(RESOURCE_CLAIM_TEMPLATES, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}},
        }, namespace=ns)
        await kube.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-job"},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {"kubernetes.io/hostname": node},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"claims": [{"name": "gpu"}]}}],
            },
        }, namespace=ns)
        pod: dict[str, Any] = {}
        for _ in range(240):
            pod = await kube.get(PODS, "gpu-job", namespace=ns)
            if pod.get("status", {}).get("phase") == "Running":
                break
            dead = [p.name for p in procs if not p.running]
            assert not dead, f"exited: {dead}; logs in {testenv.logs_dir}"
            await asyncio.sleep(0.5)
        else:
            pytest.fail(f"pod not Running: {pod.get('spec', {}).get('nodeName')} {pod.get('status')}; "
                        f"logs in {testenv.logs_dir}")
        assert pod["spec"]["nodeName"] == node
        (claim_status,) = pod["status"]["resourceClaimStatuses"]
        claim = await kube.get(RESOURCE_CLAIMS, claim_status["resourceClaimName"], namespace=ns)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert (result["driver"], result["pool"]) == ("gpu.draflow.example", node)
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
        # Prepared by the driver through the shim: the claim's CDI spec is on the (simulated) node.
        assert [p.name for p in (fleet / node / "cdi").glob("*.json")] != []
    finally:
        for proc in reversed(procs):
            await proc.stop()
        shutil.rmtree(fleet, ignore_errors=True)
        with contextlib.suppress(NotFound):
            await kube.delete(NODES, node)
        await kube.delete_collection(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
        await delete_outside(kube, discovery, objs, ns)
