"""Fleet node lists and per-node paths."""

from __future__ import annotations

import pytest

from reference_driver.fleet import expand_nodes, node_names, node_paths
from reference_driver.settings import DriverSettings


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("node-0..node-2", ["node-0", "node-1", "node-2"]),
        ("a, b ,c", ["a", "b", "c"]),
        ("x,sim-8..sim-10", ["x", "sim-8", "sim-9", "sim-10"]),
    ],
)
def test_expand_nodes(spec, want):
    assert expand_nodes(spec) == want


@pytest.mark.parametrize("spec", ["a,a", "node-3..node-1", "node-0..other-3"])
def test_bad_node_lists(spec):
    with pytest.raises(ValueError):
        expand_nodes(spec)


def test_node_count_and_fleet_layout():
    settings = DriverSettings(node_count=3, node_name_prefix="sim-", fleet_root="/r", http_port=0)
    assert node_names(settings) == ["sim-0", "sim-1", "sim-2"]
    paths = node_paths(settings, "sim-1")
    assert str(paths.registration_socket) == "/r/sim-1/plugins_registry/gpu.draflow.example-reg.sock"
    assert str(paths.dra_socket) == "/r/sim-1/plugins/gpu.draflow.example/dra.sock"
    assert (str(paths.cdi_root), str(paths.state_dir)) == ("/r/sim-1/cdi", "/r/sim-1/state")


def test_single_node_uses_the_kubelet_layout():
    settings = DriverSettings(node_name="n1", registry_dir="/kl/reg", plugins_dir="/kl/plugins", http_port=0)
    assert node_names(settings) == ["n1"]
    paths = node_paths(settings, "n1")
    assert str(paths.registration_socket) == "/kl/reg/gpu.draflow.example-reg.sock"
    assert str(paths.dra_socket) == "/kl/plugins/gpu.draflow.example/dra.sock"
