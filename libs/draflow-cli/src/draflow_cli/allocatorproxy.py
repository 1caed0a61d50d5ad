"""The structured-allocator's ``/explain`` through the API server's proxy subresource.

Without ``--allocator-url`` the CLI needs nothing but a kubeconfig: it lists the allocator's pods
(label ``app.kubernetes.io/name=structured-allocator``, every namespace; running ones with a pod IP,
newest first) and asks each ``GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/explain/<ns>/<claim>``
until one answers; ``<port>`` is the container port named ``http`` (the deployment's), else the first.
Only the leader has explanations for claims it tried; the others answer 404 and the next is asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from draflow_runtime.errors import ApiError, TransportError
from draflow_runtime.kube import PODS, KubeClient

SELECTOR = "app.kubernetes.io/name=structured-allocator"


def http_port(pod: Mapping[str, Any]) -> int | None:
    """The container port named ``http``, else the first declared one, else None."""
    ports = [p for c in (pod.get("spec") or {}).get("containers") or () for p in c.get("ports") or ()]
    named = [p for p in ports if p.get("name") == "http"]
    chosen = (named or ports or [None])[0]
    return int(chosen["containerPort"]) if chosen and chosen.get("containerPort") else None


def candidates(pods: list[Mapping[str, Any]]) -> list[tuple[str, str, int]]:
    """(namespace, pod, port) of each running allocator pod with an IP and a port, newest first."""
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and (p.get("status") or {}).get("podIP")
               and not (p.get("metadata") or {}).get("deletionTimestamp")]
    running.sort(key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")), reverse=True)
    out = []
    for p in running:
        port = http_port(p)
        meta = p.get("metadata") or {}
        if port is not None:
            out.append((str(meta.get("namespace", "")), str(meta.get("name", "")), port))
    return out


def proxy_path(pod_namespace: str, pod: str, port: int, namespace: str, name: str) -> str:
    return (f"/api/v1/namespaces/{quote(pod_namespace)}/pods/{quote(pod)}:{port}/proxy"
            f"/explain/{quote(namespace)}/{quote(name)}")


async def explanation(kube: KubeClient, namespace: str, name: str) -> tuple[Any, str]:
    """(the allocator's JSON or None, a description of where it was asked)."""
    try:
        pods = (await kube.list(PODS, label_selector=SELECTOR)).get("items") or []
    except (ApiError, TransportError):
        return None, "<no access to allocator pods>"
    asked = []
    for pod_ns, pod, port in candidates(pods):
        try:
            return await kube.request("GET", proxy_path(pod_ns, pod, port, namespace, name)), \
                f"pod {pod_ns}/{pod}:{port} via the API server"
        except (ApiError, TransportError, ValueError) as exc:  # 404: not the leader; 401: needs a token
            asked.append(f"{pod_ns}/{pod}:{port} ({str(exc)[:120]})")
    if not asked:
        return None, f"<no running pod labelled {SELECTOR}>"
    return None, "pods " + ", ".join(asked) + " via the API server"
