"""A user of the services' authenticated HTTP endpoints (``/explain``, ``/ui``, ``/debug/*``): a
ServiceAccount with a real bound token, granted a role of ``deploy/kustomize/base/common/http-readers.yaml``
only when the test says so. Fixture ``http_user`` (:mod:`draflow_testenv.pytest_plugin`):
``user = await http_user(namespace, "cli-user")``; ``user.token``; ``await user.grant()``; every grant is
removed after the test."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from draflow_runtime.errors import NotFound
from draflow_runtime.kube import KubeClient

from .binaries import repo_root

__all__ = ["READERS", "HttpUser", "http_user"]

READERS = Path("deploy/kustomize/base/common/http-readers.yaml")
_RBAC = "/apis/rbac.authorization.k8s.io/v1"


@dataclass
class HttpUser:
    """``system:serviceaccount:<namespace>:<name>`` and its bearer token; ``kube``: the admin client."""

    kube: KubeClient
    namespace: str
    name: str
    token: str
    granted: list[str] = field(default_factory=list)  # ClusterRole (and binding) names made by grant()

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    async def grant(self, role: str = "draflow-debug-reader") -> str:
        """Bind a copy of ClusterRole ``role`` of http-readers.yaml (uniquely named) to this user; returns
        the copy's name. The RBAC authorizer reads roles from an informer: wait for the grant to count."""
        doc: dict[str, Any] = next(d for d in yaml.safe_load_all((repo_root() / READERS).read_text())
                                   if d["metadata"]["name"] == role)
        name = f"{self.name}-{role.removeprefix('draflow-')}-{uuid.uuid4().hex[:6]}"
        doc["metadata"] = {"name": name}
        await self.kube.request("POST", f"{_RBAC}/clusterroles", body=doc)
        self.granted.append(name)
        await self.kube.request("POST", f"{_RBAC}/clusterrolebindings", body={
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": self.name, "namespace": self.namespace}]})
        return name

    async def revoke_all(self) -> None:
        for name in reversed(self.granted):
            for kind in ("clusterrolebindings", "clusterroles"):
                with contextlib.suppress(NotFound):
                    await self.kube.request("DELETE", f"{_RBAC}/{kind}/{name}")
        self.granted.clear()


async def http_user(testenv: Any, kube: KubeClient, namespace: str, name: str) -> HttpUser:
    """The ServiceAccount ``namespace/name`` (created if missing) with a token from its kubeconfig."""
    kubeconfig = await testenv.serviceaccount_kubeconfig(namespace, name)
    async with await KubeClient.from_kubeconfig(str(kubeconfig)) as sa_kube:
        token = await sa_kube.bearer_token()
    assert token, f"no bearer token in {kubeconfig}"
    return HttpUser(kube, namespace, name, token)
