"""Node lists of the node agents: single-node and fleet mode."""

from __future__ import annotations

import pytest

from draflow_runtime.nodeagent import FleetSettings, expand_nodes


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("node-0..node-2", ["node-0", "node-1", "node-2"]),
        ("a, b ,c", ["a", "b", "c"]),
        ("x,sim-8..sim-10", ["x", "sim-8", "sim-9", "sim-10"]),
        ("a, node-0..node-1,", ["a", "node-0", "node-1"]),
    ],
)
def test_expand_nodes(spec: str, want: list[str]) -> None:
    assert expand_nodes(spec) == want


@pytest.mark.parametrize("spec", ["a,a", "node-3..node-1", "node-0..other-3", "x..y"])
def test_bad_node_lists_are_errors(spec: str) -> None:
    with pytest.raises(ValueError):
        expand_nodes(spec)


def test_single_node_mode_serves_node_name() -> None:
    settings = FleetSettings(node_name="n1")
    assert not settings.fleet_mode
    assert settings.node_names() == ["n1"]


def test_node_count_names_nodes_by_prefix() -> None:
    settings = FleetSettings(node_count=3, node_name_prefix="sim-")
    assert settings.fleet_mode
    assert settings.node_names() == ["sim-0", "sim-1", "sim-2"]


def test_nodes_and_node_count_together_are_rejected() -> None:
    with pytest.raises(ValueError, match="either nodes or node_count"):
        FleetSettings(nodes="a,b", node_count=2)


def test_node_name_defaults_to_the_downward_api_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "from-downward-api")
    assert FleetSettings().node_name == "from-downward-api"
