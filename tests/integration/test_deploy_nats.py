"""deploy/: NATS credentials and permissions. The production overlay connects each NATS-using service as
its own user over TLS (components/nats-auth), and every such user has a permissions block in
components/nats-auth/permissions.conf — the file the secure nats-server of the integration tests and
``make up`` includes (draflow_testenv.natssecure), so the flow is proven under exactly these permissions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from deploy_kit import REPO, draflow_containers, env_of, env_prefix

from draflow_testenv.natssecure import PERMISSIONS_FILE, USERS

pytestmark = pytest.mark.integration

NATS_SERVICES = ["claim-controller", "structured-allocator", "slice-publisher", "kubelet-dra-shim"]


def permission_blocks() -> set[str]:
    text = (REPO / PERMISSIONS_FILE).read_text()
    return set(re.findall(r"^([A-Z_]+):\s*\{", text, flags=re.M))


def test_every_service_user_has_its_permissions_and_the_testenv_uses_them() -> None:
    blocks = permission_blocks()
    assert {USERS[s] for s in NATS_SERVICES} | {USERS["reader"]} <= blocks
    assert blocks == {v for v in USERS.values() if v}  # nothing declared that no user gets


async def test_production_connects_each_service_as_its_own_user_over_tls(
        built: dict[str, list[dict[str, Any]]]) -> None:
    seen = set()
    for workload, container in draflow_containers(built["production"]):
        service = container["command"][0]
        env = env_of(container)
        prefix = env_prefix(service)
        if service not in NATS_SERVICES:
            assert prefix + "NATS_USER" not in env, service
            continue
        seen.add(service)
        assert env[prefix + "NATS_USER"]["value"] == service
        secret = env[prefix + "NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert secret == {"name": "draflow-nats-credentials", "key": service}
        ca = env[prefix + "NATS_TLS_CA_FILE"]["value"]
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        assert ca == mounts["nats-ca"] + "/ca.crt"
        assert volumes["nats-ca"]["secret"]["secretName"] == "draflow-nats-ca"
    assert seen == set(NATS_SERVICES)
