"""The `make up` flow's pure parts: the five services' command lines are valid settings for each service,
and the demo manifests (and the README's *Try it* extras) load in kustomization order; and the whole flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from draflow_runtime.settings import load_settings
from draflow_testenv.environment import Environment
from draflow_testenv.flow import demo_extras, demo_objects, fleet_root, service_commands
from draflow_testenv.wait import eventually


def settings_class(name: str) -> type:
    if name == "reference-driver":
        from reference_driver.settings import DriverSettings

        return DriverSettings
    if name == "kubelet-dra-shim":
        from kubelet_dra_shim.settings import ShimSettings

        return ShimSettings
    if name == "slice-publisher":
        from slice_publisher.settings import PublisherSettings

        return PublisherSettings
    if name == "claim-controller":
        from claim_controller.settings import Settings

        return Settings
    from structured_allocator.settings import Settings as AllocatorSettings

    return AllocatorSettings


SERVICES = [
    "reference-driver", "kubelet-dra-shim", "slice-publisher", "claim-controller", "structured-allocator"
]


@pytest.mark.parametrize("name", SERVICES)
def test_every_service_accepts_its_command_line(name: str) -> None:
    state = Path("/tmp/draflow-flow-test")  # never created: only the command lines are built
    env = Environment(state)
    commands = dict(service_commands(env, nodes=4, gpus=8, allocator_port=12345))
    settings = load_settings(settings_class(name), commands[name][1:])
    assert settings.nats_url == env.nats_url
    if name in ("reference-driver", "kubelet-dra-shim"):
        assert (settings.node_count, settings.node_name_prefix) == (4, "sim-")
    if name != "claim-controller" and name != "structured-allocator":
        assert settings.fleet_root == fleet_root(state) == str(state / "fleet")
    if name == "slice-publisher":
        assert settings.wipe_foreign_slices  # simulated nodes: leftovers of any writer go


def test_a_deep_state_dir_gets_a_short_fleet_root_for_the_socket_paths(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 80)
    root = fleet_root(deep)
    assert not root.startswith(str(deep)) and len(root) < 40
    Path(root).rmdir()


def test_the_demo_loads_in_kustomization_order() -> None:
    kinds = [o["kind"] for o in demo_objects()]
    assert kinds[:2] == ["Namespace", "ServiceAccount"]
    assert kinds.index("DeviceClass") < kinds.index("ResourceClaimTemplate") < kinds.index("Pod")
    assert kinds.count("Pod") == 14
    assert [(o["kind"], o["metadata"]["name"]) for o in demo_extras()] == [
        ("ResourceClaim", "too-big"), ("Pod", "too-big"), ("Pod", "legacy-gpus")]


def test_up_suggests_the_readme_try_it_step_from_the_repository() -> None:
    from draflow_testenv.binaries import repo_root
    from draflow_testenv.flow import EXTRAS, try_it

    lines = try_it(Path("/state/env.sh"))
    assert lines[0] == f"== try (README): source /state/env.sh, then from {repo_root()}"
    assert any(line.split()[:3] == ["kubectl", "apply", "-k"] and line.split()[3] == "deploy/demo/extras"
               for line in lines), lines
    assert lines[-1].split() == ["kubectl", "delete", "-k", "deploy/demo/extras"]
    assert (repo_root() / EXTRAS / "kustomization.yaml").is_file()


@pytest.mark.integration
@pytest.mark.timeout(600)
async def test_make_up_runs_the_whole_flow(capsys: pytest.CaptureFixture[str]) -> None:
    """`draflow-testenv up` minus the waiting for Ctrl-C, in an environment of its own (a second
    allocator on the shared test environment would schedule other tests' pods), with `up`'s default
    nats-server: TLS with client certificates and a user per service under the deploy's permissions."""
    import argparse
    from contextlib import AsyncExitStack

    import nats

    from draflow_cli import explain as cli_explain
    from draflow_runtime.kube import PODS, RESOURCE_CLAIMS, KubeClient
    from draflow_runtime.lifecycle import claim_timeline, kind_name
    from draflow_testenv.flow import DEMO_NAMESPACE, STEPS, apply_demo

    args = argparse.Namespace(nodes=2, gpus=8, demo_timeout=240.0)
    # a temporary state dir of its own: short enough for the drivers' unix socket paths
    async with Environment(nodes=2, secure_nats=True) as env, AsyncExitStack() as stack:
        for _, step in STEPS:
            await stack.enter_async_context(step(env, args))
        out = capsys.readouterr().out
        kube = await KubeClient.from_kubeconfig(str(env.kubeconfig))
        try:
            listed = (await kube.list(PODS, namespace=DEMO_NAMESPACE))["items"]
            demo_pods = {p["metadata"]["name"] for p in listed}
            assert {p["status"].get("phase") for p in listed} == {"Running"}, "every pod of the demo runs"
            # what `up` prints to try next: the README's *Try it* (the test applies it as a user would)
            await apply_demo(kube, demo_extras())

            async def explained() -> str | None:
                text = await cli_explain.run(kube, args.allocator_url, DEMO_NAMESPACE, "too-big")
                return text if "12 needed" in text else None

            explanation = await eventually(explained, 120, "the explanation of the claim that cannot fit")

            async def legacy_running() -> list[dict[str, Any]] | None:
                pods = (await kube.list(PODS, namespace=DEMO_NAMESPACE))["items"]
                legacy = [p for p in pods if p["metadata"]["name"] == "legacy-gpus"]
                return pods if legacy and legacy[0]["status"].get("phase") == "Running" else None

            pods = await eventually(legacy_running, 120, "the Try it pod legacy-gpus Running")
            assert {p["metadata"]["name"] for p in pods} == demo_pods | {"too-big", "legacy-gpus"}
            phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
            assert phases.pop("too-big") == "Pending"
            assert set(phases.values()) == {"Running"}, phases
            claims = (await kube.list(RESOURCE_CLAIMS, namespace=DEMO_NAMESPACE))["items"]
            shared = next(c for c in claims if c["metadata"]["name"] == "shared-gpu")
            assert len(shared["status"]["reservedFor"]) == 3
            legacy = next(p for p in pods if p["metadata"]["name"] == "legacy-gpus")
            extended = legacy["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
            (claim,) = [c for c in claims if c["metadata"]["name"] == extended]
            assert len(claim["status"]["allocation"]["devices"]["results"]) == 2
            names = [c["metadata"]["name"] for c in claims]
            generated = next(n for n in names if n.startswith("trainer-"))
        finally:
            await kube.close()
        assert "14/14 runnable pods Running" in out
        assert "kubectl apply -k deploy/demo/extras" in out, "up prints the README's Try it step"
        assert "12 needed" in explanation, "the explanation of the claim that cannot fit is shown"
        assert f"{env.jaeger_query_url}/trace/" in out
        assert env.secure_nats is not None
        nc = await nats.connect(env.nats_url, **env.secure_nats.security("reader").connect_options())
        try:
            async def stored() -> set[str] | None:  # each service delivers its events in the background
                timeline = await claim_timeline(nc.jetstream(), DEMO_NAMESPACE, generated)
                kinds = {kind_name(e.kind) for e in timeline}
                return kinds if {"created", "allocated", "prepared"} <= kinds else None

            await eventually(stored, 30, "created, allocated and prepared events stored")
        finally:
            await nc.close()


def test_the_allocator_gets_the_gates_the_apiserver_accepted() -> None:
    env = Environment(Path("/tmp/draflow-flow-test"))
    env.feature_gates = ["DRAListTypeAttributes", "DRADeviceCompatibilityGroups"]
    env.rejected_feature_gates = ["DRADerivedAttributes"]
    commands = dict(service_commands(env, nodes=1, gpus=1, allocator_port=12345))
    settings = load_settings(settings_class("structured-allocator"), commands["structured-allocator"][1:])
    features = settings.allocator_features
    assert features.list_type_attributes and features.compatibility_groups
    assert not features.derived_attributes


def test_the_shim_gets_the_gates_the_apiserver_accepted() -> None:
    env = Environment(Path("/tmp/draflow-flow-test"))
    env.feature_gates = ["DRAListTypeAttributes"]
    env.rejected_feature_gates = ["DRAOptionalNodeOperations"]
    commands = dict(service_commands(env, nodes=1, gpus=1, allocator_port=12345))
    settings = load_settings(settings_class("kubelet-dra-shim"), commands["kubelet-dra-shim"][1:])
    assert settings.gates["DRAListTypeAttributes"] and not settings.gates["DRAOptionalNodeOperations"]


def test_up_prints_the_web_view_url_once_the_allocator_runs() -> None:
    import argparse

    from draflow_testenv.__main__ import _summary

    env = Environment(Path("/tmp/draflow-flow-test"))
    started = _summary(env, argparse.Namespace(allocator_url="http://127.0.0.1:1234")).splitlines()
    assert started[0].split() == ["web", "view", "http://127.0.0.1:1234/ui", "(devices,", "claims,",
                                  "timelines;", "live)"]
    assert not any("web view" in line for line in _summary(env, argparse.Namespace()).splitlines())
    commands = dict(service_commands(env, nodes=1, gpus=1, allocator_port=1234))
    argv = commands["structured-allocator"]
    assert argv[argv.index("--ui-jaeger-url") + 1] == env.jaeger_query_url
