"""The Leases this replica will campaign for, checked against its RBAC before the controller starts.

``deploy/kustomize/base/claim-controller/rbac.yaml`` grants ``get``/``update`` on Leases by name (Kubernetes
cannot grant a name prefix): ``<leader-election-id>`` for leader election, ``<id>-shard-<i>`` and
``<id>-member-<i>`` for ``i`` < ``--shards``. A ``--shards`` above what the Role names would leave shards
nobody can hold; the claims of their pods would never be made. :func:`check_lease_access` stops the
start-up instead, with an error naming the Leases, the namespace and the Role to extend.
"""

from __future__ import annotations

from draflow_runtime.access import denied_names
from draflow_runtime.errors import ApiError, TransportError
from draflow_runtime.kube import KubeClient
from draflow_runtime.log import get_logger
from draflow_runtime.shards import lease_names

from .settings import Settings

__all__ = ["ROLE", "LeaseAccessDenied", "check_lease_access", "needed_leases"]

log = get_logger(__name__)

ROLE = "draflow-claim-controller-leader-election"
RBAC_FILE = "deploy/kustomize/base/claim-controller/rbac.yaml"
LEASE_GROUP = "coordination.k8s.io"
_SHOWN = 8  # names listed in the error; the rest counted


class LeaseAccessDenied(Exception):
    """The RBAC does not let this replica use every Lease it needs (``denied``: names, or ``create``)."""

    def __init__(self, message: str, denied: list[str]) -> None:
        super().__init__(message)
        self.denied = denied


def needed_leases(settings: Settings) -> list[str]:
    """The Leases this replica gets and updates: the shards' and the member slots' with ``--shards`` above
    1, else the leader-election Lease with ``--leader-elect``, else none."""
    if settings.shards > 1:
        return lease_names(settings.leader_election_id, settings.shards)
    return [settings.leader_election_id] if settings.leader_elect else []


async def check_lease_access(kube: KubeClient, settings: Settings) -> None:
    """Raise :class:`LeaseAccessDenied` when a needed Lease cannot be created, read or updated. A review
    the API server does not answer is logged and the start-up goes on (the Leases still fail loudly)."""
    names = needed_leases(settings)
    if not names:
        return
    namespace = settings.leader_election_namespace
    try:
        denied = await denied_names(kube, namespace, LEASE_GROUP, "leases", names, ("get", "update"))
        if await denied_names(kube, namespace, LEASE_GROUP, "leases", [""], ("create",)):
            denied = ["create", *denied]
    except (ApiError, TransportError) as exc:
        log.warning("lease access not checked", namespace=namespace, error=repr(exc))
        return
    if not denied:
        return
    shown = ", ".join(denied[:_SHOWN]) + (f" and {len(denied) - _SHOWN} more" if len(denied) > _SHOWN else "")
    what = f"--shards {settings.shards}" if settings.shards > 1 else "--leader-elect"
    raise LeaseAccessDenied(
        f"{what} needs create, get and update on {len(names)} Lease(s) in namespace {namespace}, and this "
        f"replica's RBAC denies: {shown}. Name every Lease in the resourceNames of the Role {ROLE} "
        f"({RBAC_FILE}: <id>-shard-<i> and <id>-member-<i> for i < --shards), or lower --shards",
        denied)
