"""Server command lines and configs bind only the ports they were given (pure, no servers)."""

from __future__ import annotations

from pathlib import Path

import yaml

from draflow_testenv import pki, servers


def _endpoints(node: object) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "endpoint" and isinstance(v, str)] + \
            [e for v in node.values() for e in _endpoints(v)]
    if isinstance(node, list):
        return [e for v in node for e in _endpoints(v)]
    return []


def test_jaeger_config_binds_only_allocated_loopback_ports() -> None:
    ports = servers.Ports.allocate()
    doc = yaml.safe_load(servers.jaeger_config(ports))
    bound = {int(e.rsplit(":", 1)[1]) for e in _endpoints(doc)}
    assert bound == {ports.otlp_grpc, ports.otlp_http, ports.jaeger_query_http, ports.jaeger_query_grpc,
                     ports.jaeger_health, ports.jaeger_health_grpc}
    assert all(e.startswith("127.0.0.1:") for e in _endpoints(doc))
    assert doc["service"]["telemetry"]["metrics"]["level"] == "none"  # no :8888


def test_allocated_ports_are_distinct() -> None:
    ports = servers.Ports.allocate()
    values = list(vars(ports).values())
    assert len(set(values)) == len(values)


def test_apiserver_argv_carries_gates_and_uncached_resources() -> None:
    names = ("ca", "client-ca", "crt", "key", "sak", "sap")
    files = servers.ApiserverFiles(*(Path(f"/x/{n}") for n in names))
    argv = servers.apiserver_argv(Path("/bin/kube-apiserver"), files, servers.Ports.allocate(),
                                  feature_gates=["DRAAdminAccess", "DRAListTypeAttributes"],
                                  compaction_interval="30s", watch_cache=True, uncached=("configmaps",))
    assert "--feature-gates=DRAAdminAccess=true,DRAListTypeAttributes=true" in argv
    assert "--watch-cache-sizes=configmaps#0" in argv
    assert "--authorization-mode=Node,RBAC" in argv
    assert "--client-ca-file=/x/client-ca" in argv


def test_kubeconfig_is_self_contained() -> None:
    ca = pki.make_ca()
    doc = yaml.safe_load(pki.kubeconfig("https://127.0.0.1:6443", ca.cert_pem, user="u", token="t",
                                        namespace="ns"))
    assert doc["clusters"][0]["cluster"]["certificate-authority-data"]
    assert doc["users"][0]["user"] == {"token": "t"}
    assert doc["contexts"][0]["context"] == {"cluster": "draflow", "user": "u", "namespace": "ns"}
