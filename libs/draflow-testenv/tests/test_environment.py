"""The real local environment answers the way the services will need it to (integration)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from draflow_testenv.binaries import version_of
from draflow_testenv.environment import Environment
from draflow_testenv.process import pid_alive
from draflow_testenv.wait import eventually

pytestmark = pytest.mark.integration


class Client:
    """A tiny client from a kubeconfig (the environment's own files, independent of KubeClient)."""

    def __init__(self, kubeconfig: Path) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        self.server = cluster["server"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        ctx = ssl.create_default_context(cadata=ca)
        self.headers: dict[str, str] = {}
        if "token" in user:
            self.headers["Authorization"] = "Bearer " + user["token"]
        else:
            tmp = Path(tempfile.mkdtemp())
            (tmp / "c").write_bytes(base64.b64decode(user["client-certificate-data"]))
            (tmp / "k").write_bytes(base64.b64decode(user["client-key-data"]))
            ctx.load_cert_chain(tmp / "c", tmp / "k")
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx), headers=self.headers)

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        async with self.session.request(method, self.server + path, json=body) as resp:
            return resp.status, await resp.json(content_type=None)

    async def close(self) -> None:
        await self.session.close()


@pytest.fixture
async def admin(testenv: Environment):
    client = Client(testenv.kubeconfig)
    yield client
    await client.close()


async def test_apiserver_serves_the_pinned_version(admin: Client) -> None:
    status, body = await admin.call("GET", "/version")
    assert status == 200
    assert body["gitVersion"] == version_of("kube-apiserver")


async def test_resource_v1_is_served(admin: Client) -> None:
    status, body = await admin.call("GET", "/apis/resource.k8s.io/v1")
    assert status == 200
    names = {r["name"] for r in body["resources"]}
    assert {"resourceslices", "resourceclaims", "deviceclasses", "resourceclaimtemplates"} <= names


@pytest.mark.parametrize("which", ["admin", "user"])
async def test_client_certificates_authenticate_and_their_issuer_is_not_in_the_kubeconfigs_trust(
    testenv: Environment, which: str
) -> None:
    """OpenSSL sends a client certificate's issuer along with it when the client trusts that issuer, making
    kube-apiserver verify a longer chain on every request (pki.py): the kubeconfig must not carry it."""
    from cryptography import x509

    path = testenv.kubeconfig if which == "admin" else testenv.user_kubeconfig("te-cert-user", ["te-group"])
    user = yaml.safe_load(path.read_text())["users"][0]["user"]
    cluster = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    trusted = x509.load_pem_x509_certificates(base64.b64decode(cluster["certificate-authority-data"]))
    assert cert.issuer not in {t.subject for t in trusted}
    client = Client(path)
    try:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        status, body = await client.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        assert status == 201, body
        info = body["status"]["userInfo"]
        assert info["username"] == ("draflow-admin" if which == "admin" else "te-cert-user")
        assert ("system:masters" if which == "admin" else "te-group") in info["groups"]
    finally:
        await client.close()


async def test_serviceaccount_kubeconfig_authenticates_and_has_no_rights_without_rbac(
    testenv: Environment, make_namespace
) -> None:
    ns = await make_namespace("sa")
    sa = Client(await testenv.serviceaccount_kubeconfig(ns, "robot"))
    try:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        status, body = await sa.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        assert status == 201, body
        assert body["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:robot"
        status, body = await sa.call("GET", f"/api/v1/namespaces/{ns}/pods")
        assert status == 403, body
    finally:
        await sa.close()


async def test_node_identity_is_restricted_to_its_own_node(testenv: Environment) -> None:
    node = Client(testenv.node_kubeconfig("te-node-a"))
    try:
        mine = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "te-node-a"}}
        status, body = await node.call("POST", "/api/v1/nodes", mine)
        assert status in (201, 409), body
        other = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "te-node-b"}}
        status, body = await node.call("POST", "/api/v1/nodes", other)
        assert status == 403, body
    finally:
        await node.call("DELETE", "/api/v1/nodes/te-node-a")  # forbidden for a node: admin below
        await node.close()
        await testenv.admin.request("DELETE", "/api/v1/nodes/te-node-a")


async def test_validating_admission_policy_denies_a_request(
    testenv: Environment, admin: Client, make_namespace
) -> None:
    ns = await make_namespace("vap")
    name = f"te-deny-{uuid.uuid4().hex[:6]}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "!object.metadata.name.startsWith('forbidden')",
                             "message": "no forbidden configmaps"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
                 "matchResources": {
                     "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}},
    }
    assert (await admin.call("POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                             policy))[0] == 201
    assert (await admin.call("POST",
                             "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
                             binding))[0] == 201
    async def denied() -> tuple[int, Any] | None:
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": f"forbidden-{uuid.uuid4().hex[:6]}"}}
        status, body = await admin.call("POST", f"/api/v1/namespaces/{ns}/configmaps", cm)
        return None if status == 201 else (status, body)

    try:  # the policy reaches the admission plugin through an informer
        status, body = await eventually(denied, 30, "the ValidatingAdmissionPolicy denies", interval=0.2)
        assert status == 422, body
        assert "no forbidden configmaps" in body["message"]
        ok = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "allowed"}}
        assert (await admin.call("POST", f"/api/v1/namespaces/{ns}/configmaps", ok))[0] == 201
    finally:
        base = "/apis/admissionregistration.k8s.io/v1"
        await admin.call("DELETE", f"{base}/validatingadmissionpolicybindings/{name}")
        await admin.call("DELETE", f"{base}/validatingadmissionpolicies/{name}")


async def test_compaction_makes_an_old_resource_version_of_an_uncached_resource_gone(
    testenv: Environment, admin: Client, make_namespace
) -> None:
    ns = await make_namespace("compact")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": "0"}}
    status, body = await admin.call("POST", f"/api/v1/namespaces/{ns}/configmaps", cm)
    old_rv = body["metadata"]["resourceVersion"]
    for i in range(3):
        body["data"]["n"] = str(i + 1)
        status, body = await admin.call("PUT", f"/api/v1/namespaces/{ns}/configmaps/c", body)
        assert status == 200
    await testenv.compact_etcd()
    path = f"/api/v1/namespaces/{ns}/configmaps?resourceVersion={old_rv}&resourceVersionMatch=Exact"
    status, body = await admin.call("GET", path)
    assert status == 410, body
    assert body["reason"] == "Expired"
    watch = f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={old_rv}&timeoutSeconds=5"
    async with admin.session.get(admin.server + watch) as resp:
        event = json.loads((await resp.content.readline()).decode())
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410


async def test_nats_jetstream_answers_and_survives_a_restart(testenv: Environment, nats_url: str) -> None:
    import nats

    stream = f"TE_{uuid.uuid4().hex[:8].upper()}"
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    info = await js.account_info()
    assert info.limits is not None
    await js.add_stream(name=stream, subjects=[f"{stream.lower()}.>"])
    await js.publish(f"{stream.lower()}.x", b"kept")
    await nc.close()

    await testenv.stop_nats()
    host, port = nats_url.removeprefix("nats://").split(":")
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection(host, int(port))
    await testenv.start_nats()

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        assert (await js.stream_info(stream)).state.messages == 1
        await js.delete_stream(stream)
    finally:
        await nc.close()


async def test_jaeger_stores_a_trace_sent_over_otlp_http(testenv: Environment) -> None:
    trace_id, service = uuid.uuid4().hex, f"te-{uuid.uuid4().hex[:6]}"
    now = time.time_ns()
    payload = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"spans": [{"traceId": trace_id, "spanId": uuid.uuid4().hex[:16], "name": "probe",
                                   "kind": 1, "startTimeUnixNano": str(now - 1000),
                                   "endTimeUnixNano": str(now)}]}],
    }]}
    async with aiohttp.ClientSession() as http:
        async with http.post(testenv.otlp_http_endpoint + "/v1/traces", json=payload) as resp:
            assert resp.status == 200, await resp.text()

        async def stored() -> list[dict[str, Any]] | None:
            async with http.get(f"{testenv.jaeger_query_url}/api/traces/{trace_id}") as resp:
                return (await resp.json())["data"][0]["spans"] if resp.status == 200 else None

        spans = await eventually(stored, 20, "the trace in Jaeger's query API", interval=0.3)
        assert [s["operationName"] for s in spans] == ["probe"]
        async with http.get(testenv.jaeger_query_url + "/api/services") as resp:
            assert service in (await resp.json())["data"]


async def test_run_service_passes_identity_and_logs(testenv: Environment, run_service) -> None:
    # the child stands in for a service: it runs (sleeps) until stopped
    code = "import os, time; print('KUBECONFIG=' + os.environ['KUBECONFIG'], flush=True); time.sleep(60)"
    kubeconfig = testenv.user_kubeconfig("te-user")
    proc = await run_service([sys.executable, "-c", code], kubeconfig=kubeconfig, name="te-echo")
    await eventually(lambda: f"KUBECONFIG={kubeconfig}" in proc.log_path.read_text(), 10, "its log line")
    assert proc.log_path.parent == testenv.logs_dir
    await proc.stop(grace=2)
    assert not pid_alive(proc.pid)


async def test_purge_namespace_removes_it_and_its_finalized_objects(
    testenv: Environment, admin: Client
) -> None:
    ns = f"te-purge-{uuid.uuid4().hex[:6]}"
    await testenv.admin.ensure_namespace(ns)
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "held", "finalizers": ["te.draflow.dev/x"]}}
    assert (await admin.call("POST", f"/api/v1/namespaces/{ns}/configmaps", cm))[0] == 201
    await testenv.admin.purge_namespace(ns)
    assert (await admin.call("GET", f"/api/v1/namespaces/{ns}"))[0] == 404
    _, body = await admin.call("GET", f"/api/v1/configmaps?fieldSelector=metadata.namespace={ns}")
    assert body["items"] == []


def _processes_mentioning(text: str) -> list[int]:
    out = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        try:
            if pid_alive(pid) and text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                out.append(pid)
        except OSError:
            continue
    return out


async def test_a_stopped_environment_leaves_no_process_behind() -> None:
    env = Environment()
    await env.start()
    doc = json.loads((env.state_dir / "pids.json").read_text())
    pids = list(doc["processes"].values())
    assert len(pids) == 4 and all(pid_alive(p) for p in pids)
    await env.stop()
    assert not [p for p in pids if pid_alive(p)]
    assert _processes_mentioning(str(env.state_dir)) == []
    assert (env.logs_dir / "kube-apiserver.log").stat().st_size > 0  # logs are kept


async def test_kube_fixture_is_an_admin_client(kube) -> None:
    from draflow_runtime.kube import NAMESPACES

    ns = await kube.get(NAMESPACES, "kube-system")
    assert ns["metadata"]["name"] == "kube-system"
