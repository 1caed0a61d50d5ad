"""Where each kind lives in the Kubernetes API: :class:`Resource` descriptors of the kinds draflow reads
and writes. Import them from :mod:`draflow_runtime.kube`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the API: group, version, plural and whether it is namespaced."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """``apiVersion`` as written in objects: ``v1`` or ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """URL path of the collection (``name=None``) or of one object/subresource.

        ``namespace=None`` on a namespaced resource addresses all namespaces (list/watch only).
        Raises ``ValueError`` for a namespace on a cluster-scoped resource.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.kind} is cluster-scoped; no namespace allowed")
            base = f"{base}/namespaces/{namespace}"
        path = f"{base}/{self.plural}"
        if name is not None:
            path = f"{path}/{name}"
            if subresource:
                path = f"{path}/{subresource}"
        return path


PODS = Resource("", "v1", "pods", "Pod", True)
NODES = Resource("", "v1", "nodes", "Node", False)
EVENTS = Resource("", "v1", "events", "Event", True)  # read them here (kubectl describe does)
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event", True)  # the same objects; written here
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
# resource.k8s.io/v1 since 1.37 (DRADeviceTaintRules GA; verified in v1.37.1 discovery); 1.36: v1beta2 only.
DEVICE_TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False)
# resource.k8s.io/v1alpha3 only (DRAResourcePoolStatus, alpha in 1.36 and 1.37).
RESOURCE_POOL_STATUS_REQUESTS = Resource(
    "resource.k8s.io", "v1alpha3", "resourcepoolstatusrequests", "ResourcePoolStatusRequest", False
)
# scheduling.k8s.io/v1beta1 (GenericWorkload, beta and off by default in 1.37: the API server needs the gate
# and --runtime-config=scheduling.k8s.io/v1beta1=true). Claims shared by PodGroups: DRAWorkloadResourceClaims.
POD_GROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", True)
