"""Fleet node lists and per-node paths."""

from __future__ import annotations

from reference_driver.fleet import node_paths
from reference_driver.settings import DriverSettings


def test_node_count_and_fleet_layout():
    settings = DriverSettings(node_count=3, node_name_prefix="sim-", fleet_root="/r", http_port=0)
    assert settings.node_names() == ["sim-0", "sim-1", "sim-2"]
    paths = node_paths(settings, "sim-1")
    assert str(paths.registration_socket) == "/r/sim-1/plugins_registry/gpu.draflow.example-reg.sock"
    assert str(paths.dra_socket) == "/r/sim-1/plugins/gpu.draflow.example/dra.sock"
    assert (str(paths.cdi_root), str(paths.state_dir)) == ("/r/sim-1/cdi", "/r/sim-1/state")


def test_single_node_uses_the_kubelet_layout():
    settings = DriverSettings(node_name="n1", registry_dir="/kl/reg", plugins_dir="/kl/plugins", http_port=0)
    assert settings.node_names() == ["n1"]
    paths = node_paths(settings, "n1")
    assert str(paths.registration_socket) == "/kl/reg/gpu.draflow.example-reg.sock"
    assert str(paths.dra_socket) == "/kl/plugins/gpu.draflow.example/dra.sock"
