"""The e2e overlay as the environment layers it (``kustomize build``, no cluster; tests/e2e applies it)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from draflow_testenv import deploy_e2e
from draflow_testenv.binaries import ensure_binary
from draflow_testenv.images import run
from draflow_testenv.node import NodeLayout

pytestmark = pytest.mark.integration  # runs the pinned kustomize binary


def _env(state_dir: Path) -> Any:
    return types.SimpleNamespace(state_dir=state_dir, node=NodeLayout.create(state_dir, "n1"),
                                 ports=types.SimpleNamespace(apiserver=1234),
                                 nats_url="nats://127.0.0.1:4", otlp_grpc_endpoint="127.0.0.1:5")


def _host_ports(objs: list[dict[str, Any]]) -> set[int]:
    return {p["containerPort"] for o in objs if o["kind"] in ("Deployment", "DaemonSet")
            for c in o["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}


async def test_two_clusters_on_one_machine_use_different_host_ports(tmp_path: Path) -> None:
    first = await deploy_e2e.build(_env(tmp_path / "a"))
    second = await deploy_e2e.build(_env(tmp_path / "b"))
    assert len(_host_ports(first)) == 4
    assert _host_ports(first) & _host_ports(second) == set()


async def test_the_layered_overlay_mounts_host_paths_and_gives_each_workload_its_own_port(
        tmp_path: Path) -> None:
    env = _env(tmp_path)
    node = env.node
    objs = await deploy_e2e.build(env)
    workloads = {o["metadata"]["name"]: o for o in objs if o["kind"] in ("Deployment", "DaemonSet")}
    assert set(workloads) == {"claim-controller", "structured-allocator", "slice-publisher",
                              "reference-driver"}
    ports = set()
    for name, w in workloads.items():
        pod = w["spec"]["template"]["spec"]
        c = pod["containers"][0]
        assert pod["hostNetwork"] is True
        assert (c["image"], c["imagePullPolicy"]) == ("draflow.local/draflow:e2e", "Never"), name
        [port] = c["ports"]
        http = [e["value"] for e in c["env"] if e["name"].endswith("_HTTP_PORT")]
        assert http == [str(port["containerPort"])], name
        ports.add(port["containerPort"])
        for m in c.get("volumeMounts", []):  # mounted where the host has them: sockets are advertised by path
            [vol] = [v for v in pod["volumes"] if v["name"] == m["name"]]
            assert vol["hostPath"]["path"] == m["mountPath"] == str(node.root)
    assert len(ports) == 4
    for name in ("reference-driver", "slice-publisher"):
        container = workloads[name]["spec"]["template"]["spec"]["containers"][0]
        assert [m["mountPath"] for m in container["volumeMounts"]] == [str(node.root)]
        [host] = [e for e in container["env"] if e["name"].endswith("_HTTP_HOST")]
        assert host["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}  # the node's address
    driver = workloads["reference-driver"]["spec"]["template"]["spec"]["containers"][0]["env"]
    names = [e["name"] for e in driver]
    driver_env = {e["name"]: e.get("value") for e in driver}
    # $(NODE_NAME) is expanded by the kubelet only from variables defined before it.
    assert names.index("NODE_NAME") < names.index("DRAFLOW_REFERENCE_DRIVER_REGISTRY_DIR")

    def on(node_name: str, key: str) -> Path:
        return Path(str(driver_env[key]).replace("$(NODE_NAME)", node_name))

    assert on(node.name, "DRAFLOW_REFERENCE_DRIVER_REGISTRY_DIR") == node.plugins_registry
    assert on(node.name, "DRAFLOW_REFERENCE_DRIVER_CDI_ROOT") == node.cdi_dir
    assert on(node.name, "DRAFLOW_REFERENCE_DRIVER_STATE_DIR") == node.driver_state_dir
    clusters = {o["metadata"]["namespace"]: o for o in objs
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "draflow-cluster"}
    assert set(clusters) == {"draflow-system", "draflow-node"}  # controllers', node agents'
    assert {c["data"]["KUBERNETES_SERVICE_PORT"] for c in clusters.values()} == {"1234"}
    endpoints = [o["data"] for o in objs
                 if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "draflow-endpoints"]
    assert len(endpoints) == 2 and endpoints[0] == endpoints[1]  # the environment's NATS/OTLP in both
    assert {w["metadata"]["namespace"] for w in workloads.values() if w["kind"] == "DaemonSet"} == {
        "draflow-node"}


async def test_deployments_roll_out_without_a_surge_pod(tmp_path: Path) -> None:
    """Host network: a surge pod would need the port its predecessor holds, and on one node it could never
    be scheduled (a rollout, e.g. Tilt's new image, hung with "didn't have free ports")."""
    objs = await deploy_e2e.build(_env(tmp_path))
    deployments = [o for o in objs if o["kind"] == "Deployment"]
    assert len(deployments) == 2
    for d in deployments:
        assert d["spec"]["template"]["spec"]["hostNetwork"] is True
        assert d["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0, d["metadata"]["name"]


async def test_the_tilt_kustomization_makes_every_service_live_updatable(tmp_path: Path) -> None:
    env = _env(tmp_path)
    deploy_e2e.write_kustomization(env)
    out = deploy_e2e.write_tilt_kustomization(env)
    text = await run([await ensure_binary("kustomize"), "build", out])
    objs = [d for d in yaml.safe_load_all(text) if d]
    workloads = {o["metadata"]["name"]: o for o in objs if o["kind"] in ("Deployment", "DaemonSet")}
    assert set(workloads) == set(deploy_e2e.WORKLOADS)
    for name, w in workloads.items():
        sc = w["spec"]["template"]["spec"]["containers"][0]["securityContext"]
        assert sc["readOnlyRootFilesystem"] is False, name
    driver = workloads["reference-driver"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert driver["capabilities"] == {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]}
