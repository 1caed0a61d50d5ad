"""deploy/: the kustomize bases and overlays and the image, checked without and with the real kube-apiserver.

What runs here, in order of cost:
- ``kustomize build`` of every base and overlay: expected kinds, nothing declared twice, the settings each
  workload must carry (endpoints ConfigMap, node name from the downward API, leader election, fleet mode,
  production hardening).
- ``deploy/images/Dockerfile``: its COPY sources exist, its ``--package`` list is the set of services, every
  workload's ``command`` is one of their console scripts, and its two ``uv sync`` steps, run outside Docker
  on a copy of what the build context would hold, install exactly the five entry points.
- A server-side dry-run apply (``?dryRun=All``, apply patch) of every overlay's objects: schemas, RBAC
  objects, admission policies and the DeviceClass's CEL as the pinned API server validates them.

RBAC is checked in test_deploy_rbac.py, the Tiltfile in test_deploy_tilt.py; they share ``deploy_kit`` and
the ``built`` fixture (conftest.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deploy_kit import (
    BASES,
    CONTROLLERS,
    DOCKERFILE,
    EXPECTED_KINDS,
    FIELD_MANAGER,
    NAMESPACE,
    NODE_AGENTS,
    NODE_NAMESPACE,
    OVERLAYS,
    REPO,
    SERVICES,
    draflow_containers,
    env_of,
    env_prefix,
    find,
    identity,
    run_ok,
)

from draflow_runtime.errors import ApiError
from draflow_runtime.kube import (
    KubeClient,
)
from draflow_testenv.identity import Discovery, apply, apply_order

pytestmark = pytest.mark.integration


# --------------------------------------------------------------------------------------------- building

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
async def test_namespaced_objects_live_in_draflow_system_or_draflow_node(
    built: dict[str, list[dict[str, Any]]], target: str
) -> None:
    # kube-node-lease: the simulated kubelet's node Leases (sim only).
    allowed = {"", NAMESPACE, NODE_NAMESPACE, "kube-node-lease"}
    assert {o["metadata"].get("namespace", "") for o in built[target]} <= allowed
    # The node agents (and the sim fleet, which is all three) apart from the controllers.
    for w in (o for o in built[target] if o["kind"] in ("Deployment", "DaemonSet", "ServiceAccount")):
        name = w["metadata"]["name"]
        if name in NODE_AGENTS or name == "sim-fleet":
            assert w["metadata"]["namespace"] == NODE_NAMESPACE, (w["kind"], name)
        elif name in CONTROLLERS:
            assert w["metadata"]["namespace"] == NAMESPACE, (w["kind"], name)


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
    # One in each namespace (a pod reads ConfigMaps of its own namespace only), with the same data.
    endpoints = [find(built[overlay], "ConfigMap", "draflow-endpoints", ns)
                 for ns in (NAMESPACE, NODE_NAMESPACE)]
    assert endpoints[0]["data"] == endpoints[1]["data"]
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


async def test_dev_overlay_lets_tilt_live_update_every_service(
        built: dict[str, list[dict[str, Any]]]) -> None:
    """Tilt syncs changed files into the image's venv (owned by uid 65532, the Dockerfile's user) with tar:
    that needs a writable root filesystem and, for a uid-0 container without capabilities, DAC_OVERRIDE
    (else: "tar: ...: Cannot open: File exists", found with the e2e cluster's Tilt mode)."""
    for w, c in draflow_containers(built["dev"]):
        sc = c.get("securityContext", {})
        assert sc.get("readOnlyRootFilesystem") is False, c["name"]
        uid = sc.get("runAsUser", w["spec"]["template"]["spec"].get("securityContext", {}).get("runAsUser"))
        caps = sc.get("capabilities", {})
        if uid == 0 and "ALL" in caps.get("drop", []):
            assert "DAC_OVERRIDE" in caps.get("add", []), c["name"]


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
    for ns in (NAMESPACE, NODE_NAMESPACE):
        nats = find(objs, "ConfigMap", "draflow-endpoints", ns)["data"]["NATS_URL"]
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


# ------------------------------------------------------------------------------------- API server


@pytest.mark.parametrize("overlay", OVERLAYS)
async def test_overlay_passes_a_server_side_dry_run_apply(
    built: dict[str, list[dict[str, Any]]], testenv: Any, kube: KubeClient, overlay: str
) -> None:
    # Namespaced objects need their namespace to exist even in a dry run: create it for real (idempotent).
    await testenv.admin.ensure_namespace(NAMESPACE)
    await testenv.admin.ensure_namespace(NODE_NAMESPACE)
    discovery = Discovery(kube)
    failures = []
    for obj in sorted(built[overlay], key=apply_order):
        try:
            await apply(kube, discovery, obj, dry_run=True, field_manager=FIELD_MANAGER)
        except ApiError as exc:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.status} {exc.message}")
    assert failures == []
