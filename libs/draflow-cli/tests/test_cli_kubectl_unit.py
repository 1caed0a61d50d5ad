"""kubectl conventions, pure parts: flags before/after the subcommand, the context's namespace, -o,
explain targets, describe node's view, the allocator pods the proxy asks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from draflow_cli.__main__ import explain_target, parser
from draflow_cli.allocatorproxy import candidates, proxy_path
from draflow_cli.describe import format_node, node_view, taint_text
from draflow_cli.kubeopts import context_namespace, dump, namespace_of
from draflow_cli.status import format_status, status_doc, summarize

DRIVER = "gpu.draflow.example"


def test_kubectl_flags_work_after_the_subcommand_and_are_not_overwritten_by_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/env/kubeconfig")
    monkeypatch.delenv("DRAFLOW_ALLOCATOR_URL", raising=False)
    args = parser().parse_args(["status", "-o", "json", "--kubeconfig", "/k", "--context", "c1"])
    assert (args.output, args.kubeconfig, args.context) == ("json", "/k", "c1")
    args = parser().parse_args(["--kubeconfig", "/k", "-o", "yaml", "describe", "node", "n1"])
    assert (args.output, args.kubeconfig, args.kind, args.name) == ("yaml", "/k", "node", "n1")
    args = parser().parse_args(["explain", "-n", "team", "-A", "c"])
    assert (args.namespace, args.all_namespaces, args.output) == ("team", True, "table")
    assert args.kubeconfig == "/env/kubeconfig"
    assert args.allocator_url == ""  # none given: through the API server's proxy
    with pytest.raises(SystemExit):
        parser().parse_args(["status", "-o", "xml"])


def kubeconfig(tmp_path: Path, name: str, current: str, contexts: dict[str, str | None]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "contexts": [
            {"name": n, "context": {"cluster": "c", "user": "u", **({"namespace": ns} if ns else {})}}
            for n, ns in contexts.items()
        ],
    }))
    return path


def test_namespace_comes_from_the_flag_then_the_context_then_default(tmp_path: Path) -> None:
    one = kubeconfig(tmp_path, "one", "dev", {"dev": "team-a", "prod": None})
    two = kubeconfig(tmp_path, "two", "other", {"dev": "ignored", "ci": "team-ci"})
    assert context_namespace(str(one), None) == "team-a"
    assert context_namespace(str(one), "prod") is None
    # a KUBECONFIG list: the first current-context and the first definition of a context win
    assert context_namespace(f"{one}:{two}", None) == "team-a"
    assert context_namespace(f"{one}:{two}", "ci") == "team-ci"
    assert context_namespace(str(tmp_path / "missing"), None) is None
    args = parser().parse_args(["--kubeconfig", str(one), "trace", "c"])
    assert namespace_of(args) == "team-a"
    args = parser().parse_args(["--kubeconfig", str(one), "--context", "prod", "trace", "c"])
    assert namespace_of(args) == "default"
    args = parser().parse_args(["--kubeconfig", str(one), "trace", "c", "-n", "x"])
    assert namespace_of(args) == "x"


def test_explain_takes_a_claim_or_a_pod() -> None:
    def target(*argv: str) -> tuple[str, str, str]:
        return explain_target(parser().parse_args(["--kubeconfig", "/nonexistent", "explain", *argv]))

    assert target("ns/c") == ("claim", "ns", "c")
    assert target("c", "-n", "team") == ("claim", "team", "c")
    assert target("c") == ("claim", "default", "c")
    assert target("pod/p", "-n", "team") == ("pod", "team", "p")
    assert target("pod/team/p") == ("pod", "team", "p")
    assert target("--pod", "p", "-n", "team") == ("pod", "team", "p")
    assert target("resourceclaim/c", "-n", "team") == ("claim", "team", "c")
    for argv in ((), ("c", "--pod", "p")):
        with pytest.raises(ValueError, match="one of"):
            target(*argv)


def slices_and_claims() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    def slice_(name: str, node: str, generation: int, devices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {
            "driver": DRIVER, "nodeName": node, "devices": devices,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1}}}

    slices = [
        slice_("n1-new", "n1", 2, [
            {"name": "gpu-0"},
            {"name": "gpu-1",
             "taints": [{"key": "draflow.dev/unhealthy", "value": "ecc", "effect": "NoSchedule"}]},
        ]),
        slice_("n1-old", "n1", 1, [{"name": "old-0"}]),
        slice_("n2", "n2", 1, [{"name": "gpu-0"}]),
    ]
    claim = {"metadata": {"namespace": "team", "name": "c1", "uid": "u1"}, "status": {
        "reservedFor": [{"resource": "pods", "name": "p1", "uid": "pod-u1"}],
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]}}}}
    other = {"metadata": {"namespace": "team", "name": "c2"}, "status": {"allocation": {"devices": {
        "results": [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]}}}}
    return slices, [claim, other, {"metadata": {"namespace": "team", "name": "pending"}}]


def test_status_as_json_yaml_and_wide() -> None:
    slices, claims = slices_and_claims()
    pools = summarize(slices, claims)
    doc = status_doc(pools, claims)
    assert doc["claims"] == {"total": 3, "allocated": 2, "pending": 1}
    n1 = doc["pools"][0]
    assert (n1["node"], n1["generation"], n1["devices"], n1["allocated"], n1["unhealthy"], n1["free"]) == (
        "n1", 2, 2, 1, 1, 0)
    assert n1["allocatedDevices"] == ["gpu-0"] and n1["unhealthyDevices"] == ["gpu-1"]
    assert json.loads(dump(doc, "json")) == doc == yaml.safe_load(dump(doc, "yaml"))
    wide = format_status(pools, claims, wide=True).splitlines()
    assert wide[0].split()[-3:] == ["GENERATION", "UNHEALTHY", "DEVICES"]
    assert wide[2].split()[-2:] == ["2", "gpu-1"]


def test_describe_node_shows_slices_pools_devices_claims_and_pods() -> None:
    slices, claims = slices_and_claims()
    pods = [{"metadata": {"namespace": "team", "name": "p1", "uid": "pod-u1"}, "spec": {}},
            {"metadata": {"namespace": "team", "name": "unrelated", "uid": "x"}, "spec": {}}]
    view = node_view("n1", None, slices, claims, pods)
    assert [(s["name"], s["current"]) for s in view["slices"]] == [("n1-old", False), ("n1-new", True)]
    assert view["pools"] == [{"driver": DRIVER, "pool": "n1", "generation": 2, "slices": 1,
                              "resourceSliceCount": 1, "devices": 2}]
    assert view["devices"] == [
        {"driver": DRIVER, "pool": "n1", "device": "gpu-0", "taints": [], "claim": "team/c1"},
        {"driver": DRIVER, "pool": "n1", "device": "gpu-1",
         "taints": ["draflow.dev/unhealthy=ecc:NoSchedule"], "claim": ""},
    ]
    assert view["claims"] == [{"claim": "team/c1", "devices": [f"{DRIVER}/n1/gpu-0"], "pods": ["team/p1"]}]
    text = format_node(view)
    assert text.startswith("Node: n1 (no Node object)")
    assert "Allocated claims (1):" in text and "team/p1" in text and "old-0" not in text
    assert taint_text({"key": "k", "effect": "NoExecute"}) == "k:NoExecute"


def test_the_proxy_asks_running_allocator_pods_on_their_http_port_newest_first() -> None:
    def pod(name: str, created: str, phase: str = "Running", ports: list[dict[str, Any]] | None = None,
            ip: str = "10.0.0.1") -> dict[str, Any]:
        return {"metadata": {"namespace": "draflow-system", "name": name, "creationTimestamp": created},
                "spec": {"containers": [{"ports": ports if ports is not None else
                                         [{"name": "metrics", "containerPort": 9090},
                                          {"name": "http", "containerPort": 8080}]}]},
                "status": {"phase": phase, "podIP": ip}}

    pods = [pod("old", "2026-01-01T00:00:00Z"), pod("new", "2026-01-02T00:00:00Z"),
            pod("pending", "2026-01-03T00:00:00Z", phase="Pending"),
            pod("noip", "2026-01-03T00:00:00Z", ip=""),
            pod("first-port", "2025-01-01T00:00:00Z", ports=[{"containerPort": 7000}]),
            pod("no-ports", "2025-01-01T00:00:00Z", ports=[])]
    assert candidates(pods) == [("draflow-system", "new", 8080), ("draflow-system", "old", 8080),
                                ("draflow-system", "first-port", 7000)]
    assert proxy_path("draflow-system", "new", 8080, "team", "c") == (
        "/api/v1/namespaces/draflow-system/pods/new:8080/proxy/explain/team/c")


REPO = Path(__file__).resolve().parents[3]


def readme_commands(path: Path) -> list[list[str]]:
    """The ``draflow ...`` and ``kubectl draflow ...`` lines of the fenced blocks, comment cut off."""
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        words = line.split("#", 1)[0].split()
        if fenced and words[:2] == ["kubectl", "draflow"]:
            words = words[1:]
        if fenced and words[:1] == ["draflow"]:
            out.append(words[1:])
    return out


@pytest.mark.parametrize("readme", ["README.md", "libs/draflow-cli/README.md"])
def test_the_readme_examples_parse_as_printed(readme: str) -> None:
    commands = readme_commands(REPO / readme)
    assert len(commands) >= 7
    for argv in commands:
        argv = [w for w in argv if not w.startswith("[") and not w.endswith("]")]  # optional parts
        args = parser().parse_args(argv)
        if args.command == "explain":
            explain_target(args)  # one target, well formed
