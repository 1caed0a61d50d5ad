"""deploy/: the Tiltfile.

- ``tilt ci -- --local``: the Tiltfile's local mode brings up its own draflow-testenv and all five services
  as processes, every readiness probe passes, and its ``demo`` resource gets every demo pod to
  Running.
- Cluster mode is evaluated (``tilt alpha tiltfile-result``, no cluster contacted): image builds, live
  update, the dev overlay's workloads, port forwards; likewise its ``--real-node`` variant (run on a real
  cluster by hand, docs/deploy.md).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_kit import (
    DOCKERFILE,
    REPO,
    SERVICES,
    run_ok,
)

from draflow_testenv import deploy_e2e
from draflow_testenv.binaries import ensure_binary
from draflow_testenv.node import NodeLayout

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------------------------------------ Tilt


@pytest.mark.timeout(900)
async def test_tilt_ci_local_brings_every_service_up(tmp_path: Path) -> None:
    """The Tiltfile's local mode end to end: its own draflow-testenv, the five services, all ready, and the
    demo workload Running (every pod of it)."""
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


def _fake_kubeconfig(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "draflow-node",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "draflow-node", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "unused"}}],
    }))
    return path


async def test_tilt_real_node_mode_deploys_the_e2e_overlay_with_one_custom_built_image(
        tmp_path: Path) -> None:
    """``tilt up -- --real-node DIR`` as Tilt evaluates it, DIR holding what ``draflow-testenv up --real-node
    --env-only`` writes: the four e2e workloads (no kubelet-dra-shim), one image built and loaded by
    ``draflow-testenv import-image``, never pushed, live-updated into every container."""
    tilt = await ensure_binary("tilt")
    env_ = types.SimpleNamespace(state_dir=tmp_path, node=NodeLayout.create(tmp_path, "n1"),
                                 ports=types.SimpleNamespace(apiserver=1234), nats_url="nats://127.0.0.1:4",
                                 otlp_grpc_endpoint="127.0.0.1:5")
    deploy_e2e.write_kustomization(env_)  # type: ignore[arg-type]
    deploy_e2e.write_tilt_kustomization(env_)  # type: ignore[arg-type]
    env = {**os.environ, "KUBECONFIG": str(_fake_kubeconfig(tmp_path / "kubeconfig")),
           "TILT_DISABLE_ANALYTICS": "1", "DRAFLOW_BIN_KUSTOMIZE": str(await ensure_binary("kustomize"))}
    result = yaml.safe_load(await run_ok(
        [str(tilt), "alpha", "tiltfile-result", "--", "--real-node", str(tmp_path)], cwd=REPO, env=env))
    assert not result.get("Error"), result["Error"]
    manifests = {m["Name"]: m for m in result["Manifests"]}
    agents = set(SERVICES) - {"kubelet-dra-shim"}
    assert agents <= set(manifests) and "kubelet-dra-shim" not in manifests
    for service in agents:
        (image,) = manifests[service]["ImageTargets"]
        assert image["selector"] == "draflow.local/draflow"
        custom = image["BuildDetails"]
        assert custom["args"][-1] == (f".venv/bin/draflow-testenv import-image --state-dir {tmp_path} "
                                      "--ref $EXPECTED_REF")
        assert custom["outputMode"] == "remote"  # skips the (absent) local Docker engine
        synced = {s["localPath"] for s in image["LiveUpdateSpec"]["syncs"]}
        assert {f"services/{s}/src/{s.replace('-', '_')}" for s in SERVICES} <= synced
        assert [e["args"] for e in image["LiveUpdateSpec"]["execs"]] == [["sh", "-c", "kill -HUP 1"]]
        (workload,) = [o for o in yaml.safe_load_all(manifests[service]["DeployTarget"]["yaml"])
                       if o["kind"] in ("Deployment", "DaemonSet")]
        container = workload["spec"]["template"]["spec"]["containers"][0]
        assert container["image"].startswith("draflow.local/draflow")
        assert container["securityContext"]["readOnlyRootFilesystem"] is False


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
