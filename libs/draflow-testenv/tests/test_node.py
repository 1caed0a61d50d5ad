"""The real node's configuration files (pure functions; the real node itself runs in tests/e2e)."""

from __future__ import annotations

import ipaddress
import json
import tomllib
from pathlib import Path

import yaml

from draflow_testenv.node import NodeLayout, cni_config, containerd_config, kubelet_config


def test_containerd_config_is_version_3_with_cdi_cgroupfs_and_everything_under_the_node_dir(
        tmp_path: Path) -> None:
    layout = NodeLayout.create(tmp_path, "n1")
    doc = tomllib.loads(containerd_config(layout, cni_bin_dir=Path("/cni"), runc=Path("/usr/sbin/runc"),
                                          sandbox_image="draflow.local/pause:1"))
    assert doc["version"] == 3
    assert doc["root"].startswith(str(layout.dir)) and doc["state"].startswith(str(layout.dir))
    assert doc["grpc"]["address"] == str(layout.containerd_socket)
    cri = doc["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["cdi_spec_dirs"] == [str(layout.cdi_dir)]
    assert cri["netns_mounts_under_state_dir"] is True and cri["restrict_oom_score_adj"] is True
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"] == {"SystemdCgroup": False, "BinaryName": "/usr/sbin/runc"}
    assert cri["cni"]["conf_dir"] == str(layout.cni_conf_dir)
    pinned = doc["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]
    assert pinned["sandbox"] == "draflow.local/pause:1"


def test_pod_addresses_never_include_the_node_address(tmp_path: Path) -> None:
    layout = NodeLayout.create(tmp_path, "n1")
    rng = json.loads(cni_config(layout))["plugins"][0]["ipam"]["ranges"][0][0]
    start, end = ipaddress.ip_address(rng["rangeStart"]), ipaddress.ip_address(rng["rangeEnd"])
    node_ip = ipaddress.ip_address(layout.node_ip)
    assert node_ip in ipaddress.ip_network(layout.subnet)
    assert not start <= node_ip <= end
    assert ipaddress.ip_address(rng["gateway"]) != node_ip


def test_kubelet_config_accepts_cgroup_v1_and_serves_on_the_node_address(tmp_path: Path) -> None:
    layout = NodeLayout.create(tmp_path, "n1")
    doc = yaml.safe_load(kubelet_config(layout))
    assert doc["failCgroupV1"] is False and doc["cgroupDriver"] == "cgroupfs"
    assert doc["cgroupRoot"] == layout.cgroup_root
    assert doc["address"] == layout.node_ip and doc["readOnlyPort"] == 0
    assert doc["containerRuntimeEndpoint"] == f"unix://{layout.containerd_socket}"


def test_a_deep_state_dir_gets_a_short_linked_node_dir(tmp_path: Path) -> None:
    shallow = NodeLayout.create(Path("/s"), "n1")
    assert shallow.dir == Path("/s/nodes/n1") and shallow.link is None
    deep = NodeLayout.create(tmp_path / ("x" * 60), "n1")
    assert deep.link == (tmp_path / ("x" * 60) / "nodes").resolve()  # the nodes' root, linked
    assert deep.dir == deep.root / "n1"
    assert len(str(deep.plugins_dir / "gpu.draflow.example" / "dra.sock")) < 100


def test_nodes_of_one_cluster_share_a_root_and_nothing_else_of_their_own(tmp_path: Path) -> None:
    a, b = NodeLayout.create_all(tmp_path / ("x" * 60), ["draflow-node-1", "draflow-node-2"])
    assert a.root == b.root and (a.dir, b.dir) == (a.root / a.name, a.root / b.name)
    assert len({a.node_id, b.node_id}) == 2 and a.cgroup_root != b.cgroup_root and a.bridge != b.bridge
    assert not ipaddress.ip_network(a.subnet).overlaps(ipaddress.ip_network(b.subnet))
    assert len({a.kubelet_port, a.kubelet_healthz_port, b.kubelet_port, b.kubelet_healthz_port}) == 4
    # A DaemonSet pod names its own node's directories through $(NODE_NAME), which the kubelet expands.
    for prop in ("plugins_registry", "plugins_dir", "cdi_dir", "driver_state_dir"):
        template = a.on_any_node(getattr(a, prop))
        assert b.on_any_node(getattr(b, prop)) == template  # one DaemonSet template for both nodes
        for layout in (a, b):
            assert Path(template.replace("$(NODE_NAME)", layout.name)) == getattr(layout, prop)
