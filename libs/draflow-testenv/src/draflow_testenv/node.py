"""Configuration of a real node on this machine: containerd, CNI and the kubelet (pure functions).

Everything a node writes lives under its own directory (``NodeLayout``): containerd's root, state and
sockets, the CNI configuration and IPAM store, the network namespaces, the CDI spec directory, the kubelet's
root dir and pod logs. What cannot live there is named per node: the cgroup parent (``/draflow-<id>``) and
the CNI bridge (``dfbr<id>``). Found on this VM kind (cgroup v1 hybrid, see docs/deploy.md): the kubelet
needs ``failCgroupV1: false`` and the ``cgroupfs`` driver; CDI injection needs containerd >= 1.7.
"""

from __future__ import annotations

import ipaddress
import json
import secrets
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from draflow_testenv.servers import HOST, free_port

MAX_NODE_DIR = 40  # the longest node dir: /tmp/draflow-nodes-<6 hex>/draflow-node-1


@dataclass(frozen=True)
class NodeLayout:
    """Paths, names and ports of one real node."""

    name: str
    dir: Path  # <root>/<name>
    node_id: str
    subnet: str
    node_ip: str
    kubelet_port: int
    kubelet_healthz_port: int
    link: Path | None = None  # state_dir/nodes, a symlink to ``root`` when ``root`` is elsewhere

    @property
    def root(self) -> Path:
        """The directory of every node of the cluster (``<root>/<node name>``): one host path a
        DaemonSet can mount on all nodes, each pod finding its node's part by its node name."""
        return self.dir.parent

    @classmethod
    def create(cls, state_dir: Path, name: str) -> NodeLayout:
        return cls.create_all(state_dir, [name])[0]

    @classmethod
    def create_all(cls, state_dir: Path, names: Sequence[str]) -> list[NodeLayout]:
        """The layouts of a cluster's nodes, under one root: ``<state_dir>/nodes``, or a short directory
        in the temp dir linked from there when that path is long (unix socket paths are limited to 107
        bytes, containerd's to 104, and sockets live deep in a node dir:
        ``<kubelet root>/plugins/<driver>/dra.sock``)."""
        home = (state_dir / "nodes").resolve()
        root, link = home, None
        if len(str(home)) + 1 + max(len(n) for n in names) > MAX_NODE_DIR:
            root, link = Path(tempfile.gettempdir()) / f"draflow-nodes-{secrets.token_hex(3)}", home
        layouts: list[NodeLayout] = []
        prefixes: set[str] = set()
        for name in names:
            # 10.<200..249>.<0..255>.0/24 each, distinct: unlikely to collide with another environment or
            # the VM's networks. Pods get .2-.200; the node's own address (.250) is added to lo
            # (``node_cleanup``): the kubelet refuses a loopback node IP, and the API server reaches the
            # kubelet there (logs, exec).
            prefix = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}"
            while prefix in prefixes:
                prefix = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}"
            prefixes.add(prefix)
            layouts.append(cls(name=name, dir=root / name, link=link, node_id=secrets.token_hex(3),
                               subnet=f"{prefix}.0/24", node_ip=f"{prefix}.250",
                               kubelet_port=free_port(), kubelet_healthz_port=free_port()))
        return layouts

    def on_any_node(self, path: Path) -> str:
        """``path`` (under this node's dir) as a pod of a DaemonSet writes it: the node's name as the
        ``$(NODE_NAME)`` environment variable reference, which the kubelet expands."""
        return f"{self.root}/$(NODE_NAME)/{path.relative_to(self.dir)}"

    @property
    def containerd_dir(self) -> Path:
        return self.dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.containerd_dir / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.dir / "cni" / "net.d"

    @property
    def cdi_dir(self) -> Path:
        """Where a DRA driver on this node writes its CDI specs (containerd reads them)."""
        return self.dir / "cdi"

    @property
    def kubelet_root(self) -> Path:
        return self.dir / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.dir / "kubelet-config.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.dir / "kubelet.kubeconfig"

    @property
    def plugins_registry(self) -> Path:
        """The kubelet's plugin registration directory (a DRA driver puts ``<driver>-reg.sock`` here)."""
        return self.kubelet_root / "plugins_registry"

    @property
    def plugins_dir(self) -> Path:
        """Parent of the DRA drivers' service sockets (``<driver>/dra.sock``)."""
        return self.kubelet_root / "plugins"

    @property
    def driver_state_dir(self) -> Path:
        """The reference driver's checkpoint and health files on this node."""
        return self.dir / "reference-driver"

    @property
    def cgroup_root(self) -> str:
        return f"/draflow-{self.node_id}"

    @property
    def bridge(self) -> str:
        return f"dfbr{self.node_id}"  # Linux interface names are at most 15 characters


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a TOML basic string is a JSON string for what we write


def _toml(tables: dict[str, dict[str, object]], top: dict[str, object]) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    for table, values in tables.items():
        lines += ["", f"[{table}]"] + [f"  {k} = {_toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


CRI = 'plugins."io.containerd.cri.v1.runtime"'
CRI_IMAGES = 'plugins."io.containerd.cri.v1.images"'


def containerd_config(layout: NodeLayout, *, cni_bin_dir: Path, runc: Path, sandbox_image: str) -> str:
    """containerd 2.x (config version 3): CRI with CDI specs read from the node dir, runc with cgroupfs,
    CNI and network namespaces under the node dir."""
    d = layout.containerd_dir
    tables: dict[str, dict[str, object]] = {
        "grpc": {"address": str(layout.containerd_socket)},
        "ttrpc": {"address": str(d / "containerd.sock.ttrpc")},
        "debug": {"address": ""},
        "metrics": {"address": ""},
        'plugins."io.containerd.internal.v1.opt"': {"path": str(d / "opt")},
        'plugins."io.containerd.nri.v1.nri"': {"disable": True},
        # restrict_oom_score_adj: no container's oom_score_adj below containerd's own; lowering it needs
        # CAP_SYS_RESOURCE, which root here lacks (runc then fails the sandbox: can't get final child's PID).
        CRI: {"cdi_spec_dirs": [str(layout.cdi_dir)], "netns_mounts_under_state_dir": True,
              "restrict_oom_score_adj": True},
        f"{CRI}.containerd": {"default_runtime_name": "runc"},
        f"{CRI}.containerd.runtimes.runc": {"runtime_type": "io.containerd.runc.v2"},
        f"{CRI}.containerd.runtimes.runc.options": {"SystemdCgroup": False, "BinaryName": str(runc)},
        f"{CRI}.cni": {"bin_dirs": [str(cni_bin_dir)], "conf_dir": str(layout.cni_conf_dir),
                       "max_conf_num": 1},
        f"{CRI_IMAGES}.pinned_images": {"sandbox": sandbox_image},
        'plugins."io.containerd.grpc.v1.cri"': {"stream_server_address": HOST, "stream_server_port": "0"},
    }
    return _toml(tables, {"version": 3, "root": str(d / "root"), "state": str(d / "state")})


def cni_config(layout: NodeLayout) -> str:
    """A bridge network with host-local IPAM (store under the node dir) plus loopback; no masquerading
    (pods here need no traffic beyond the node), so no iptables rules are left behind."""
    net = ipaddress.ip_network(layout.subnet)
    doc = {
        "cniVersion": "1.0.0",
        "name": f"draflow-{layout.node_id}",
        "plugins": [
            {"type": "bridge", "bridge": layout.bridge, "isGateway": True, "ipMasq": False,
             "ipam": {"type": "host-local", "dataDir": str(layout.dir / "cni" / "ipam"),
                      "ranges": [[{"subnet": str(net), "gateway": str(net.network_address + 1),
                                   "rangeStart": str(net.network_address + 2),
                                   "rangeEnd": str(net.network_address + 200)}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "loopback"},
        ],
    }
    return json.dumps(doc, indent=2)


def kubelet_config(layout: NodeLayout) -> str:
    """KubeletConfiguration: ports of its own on the node's local-only address, cgroupfs under its own
    cgroup parent, image GC and eviction thresholds that a shared CI disk does not trip, anonymous access to
    its API (reachable from this machine only; the API server fetches logs from it)."""
    doc = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": layout.cgroup_root,
        "address": layout.node_ip,
        "port": layout.kubelet_port,
        "healthzBindAddress": HOST,
        "healthzPort": layout.kubelet_healthz_port,
        "readOnlyPort": 0,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "podLogsDir": str(layout.dir / "pod-logs"),
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "failSwapOn": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "serializeImagePulls": False,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "shutdownGracePeriod": "0s",
        "resolvConf": "/etc/resolv.conf",
    }
    return yaml.safe_dump(doc, sort_keys=False)


def kubelet_argv(binary: Path, layout: NodeLayout) -> list[str]:
    return [
        str(binary), f"--config={layout.kubelet_config}", f"--kubeconfig={layout.kubelet_kubeconfig}",
        f"--root-dir={layout.kubelet_root}", f"--cert-dir={layout.dir / 'kubelet-pki'}",
        f"--hostname-override={layout.name}", f"--node-ip={layout.node_ip}", "--v=2",
        # The DRA manager's plugin registration (V3: driver, endpoint, chosen service version) and every
        # NodePrepareResources / NodeUnprepareResources call with its response (V4).
        "--vmodule=dra_plugin=4,dra_plugin_manager=4",
    ]


def containerd_argv(binary: Path, layout: NodeLayout) -> list[str]:
    return [str(binary), f"--config={layout.containerd_config}", "--log-level=info"]
