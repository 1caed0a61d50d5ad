"""Command lines and config files of the four servers (pure functions: paths and ports in, argv out)."""

from __future__ import annotations

import socket
from dataclasses import dataclass, fields
from pathlib import Path

import yaml

HOST = "127.0.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Added to kube-apiserver's default set (which already has NamespaceLifecycle, ServiceAccount, ...).
ADMISSION_PLUGINS = ("NodeRestriction", "ValidatingAdmissionPolicy")
DISABLED_ADMISSION_PLUGINS = ("TaintNodesByCondition",)
# scheduling.k8s.io/v1beta1: Workloads and PodGroups (GenericWorkload, DRAWorkloadResourceClaims; beta
# APIs are off by default).
RUNTIME_CONFIG = ("resource.k8s.io/v1beta1=true", "resource.k8s.io/v1beta2=true",
                  "resource.k8s.io/v1alpha3=true", "scheduling.k8s.io/v1beta1=true")


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (for a process started next)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    nats: int
    nats_monitor: int
    otlp_grpc: int
    otlp_http: int
    jaeger_query_http: int
    jaeger_query_grpc: int
    jaeger_health: int
    jaeger_health_grpc: int

    @classmethod
    def allocate(cls) -> Ports:
        """Distinct free loopback ports (each bound until all are chosen, then released)."""
        socks = []
        try:
            for _ in fields(cls):
                s = socket.socket()
                s.bind((HOST, 0))
                socks.append(s)
            return cls(*(s.getsockname()[1] for s in socks))
        finally:
            for s in socks:
                s.close()


def etcd_argv(binary: Path, data_dir: Path, ports: Ports) -> list[str]:
    client, peer = f"http://{HOST}:{ports.etcd_client}", f"http://{HOST}:{ports.etcd_peer}"
    return [
        str(binary), "--name=default", f"--data-dir={data_dir}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}", "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",  # a throw-away test store: durability against power loss is not needed
        "--log-level=warn",
    ]


@dataclass(frozen=True)
class ApiserverFiles:
    ca_cert: Path  # signs the serving certificate
    client_ca_cert: Path  # signs client certificates (--client-ca-file)
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def apiserver_argv(
    binary: Path, files: ApiserverFiles, ports: Ports, *, feature_gates: list[str],
    compaction_interval: str, watch_cache: bool, uncached: tuple[str, ...] = (), extra: tuple[str, ...] = (),
) -> list[str]:
    argv = [
        str(binary),
        f"--etcd-servers=http://{HOST}:{ports.etcd_client}",
        f"--etcd-compaction-interval={compaction_interval}",
        f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={ports.apiserver}",
        f"--tls-cert-file={files.serving_cert}", f"--tls-private-key-file={files.serving_key}",
        f"--client-ca-file={files.client_ca_cert}",
        f"--service-account-key-file={files.sa_pub}",
        f"--service-account-signing-key-file={files.sa_key}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
        "--authorization-mode=Node,RBAC",
        f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
        # No kube-controller-manager runs here, so nothing would lift the not-ready taint this plugin puts
        # on new Nodes; the simulated kubelet's Ready condition and Lease are what mark a node usable.
        f"--disable-admission-plugins={','.join(DISABLED_ADMISSION_PLUGINS)}",
        f"--runtime-config={','.join(RUNTIME_CONFIG)}",
        "--service-cluster-ip-range=10.96.0.0/16",
        # loopback may not be advertised as the kubernetes Service endpoint; nothing here needs that Service
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--max-requests-inflight=1600", "--max-mutating-requests-inflight=800",
        "--profiling=false",
        "--v=1",
    ]
    if feature_gates:
        argv.append("--feature-gates=" + ",".join(f"{g}=true" for g in feature_gates))
    if not watch_cache:
        argv.append("--watch-cache=false")
    elif uncached:  # these resources are read from etcd directly: compaction yields a real 410 at once
        argv.append("--watch-cache-sizes=" + ",".join(f"{r}#0" for r in uncached))
    return argv + list(extra)


def nats_argv(binary: Path, store_dir: Path, ports: Ports) -> list[str]:
    return [str(binary), "-n", "draflow-testenv", "-a", HOST, "-p", str(ports.nats),
            "-m", str(ports.nats_monitor), "-js", "-sd", str(store_dir)]


def jaeger_config(ports: Ports) -> str:
    """Jaeger v2 (v1.76.0 = 2.13) config: OTLP in, memory storage, query API; nothing on a fixed port."""
    doc = {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {"traces": {"receivers": ["otlp"], "processors": ["batch"],
                                     "exporters": ["jaeger_storage_exporter"]}},
            # The collector's own Prometheus endpoint would bind :8888; level none turns it off.
            "telemetry": {"resource": {"service.name": "jaeger"}, "metrics": {"level": "none"},
                          "logs": {"level": "info"}},
        },
        "extensions": {
            "jaeger_query": {
                "storage": {"traces": "memstore"},
                "http": {"endpoint": f"{HOST}:{ports.jaeger_query_http}"},
                "grpc": {"endpoint": f"{HOST}:{ports.jaeger_query_grpc}"},
                "enable_tracing": False,
            },
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 100000}}}},
            # Both listeners explicit: an empty grpc section still binds the default :13132.
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"{HOST}:{ports.jaeger_health}"},
                              "grpc": {"endpoint": f"{HOST}:{ports.jaeger_health_grpc}"}},
        },
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"{HOST}:{ports.otlp_grpc}"},
                                             "http": {"endpoint": f"{HOST}:{ports.otlp_http}"}}}},
        "processors": {"batch": {}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def jaeger_argv(binary: Path, config: Path) -> list[str]:
    return [str(binary), f"--config={config}"]
