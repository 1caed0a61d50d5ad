"""The DRA feature gates of Kubernetes v1.37 (and GenericWorkload, which DRAWorkloadResourceClaims needs), as
``--feature-gates`` of kube-scheduler, kube-controller-manager and kubelet take them.

``parse("DRADerivedAttributes=true,DRAListTypeAttributes=false")`` → every DRA gate's value: the given
ones, the others at :data:`DRAFLOW_DEFAULTS` — upstream's v1.37 defaults, with the alpha gates that
draflow's test environment (and ``make up``) turns on in its kube-apiserver also on, so that a service
follows the API server it is tested against. As upstream, an unknown gate or a locked GA gate set to
false, or an enabled gate whose dependency is disabled, is an error. Used by the structured-allocator
(kube-scheduler's gates), claim-controller (kube-controller-manager's) and kubelet-dra-shim (the kubelet's).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEPENDENCIES", "DRAFLOW_DEFAULTS", "DRAFLOW_ON", "GATES", "LOCKED", "parse"]

# name -> default in kube-apiserver/kube-scheduler v1.37.1 (pkg/features/kube_features.go).
GATES: Mapping[str, bool] = {
    "DRAAdminAccess": True,  # GA, locked
    "DRAConsumableCapacity": True,  # beta
    "DRADerivedAttributes": False,  # alpha
    "DRADeviceBindingConditions": True,  # beta
    "DRADeviceCompatibilityGroups": False,  # alpha
    "DRADeviceTaintRules": True,  # GA
    "DRADeviceTaints": True,  # GA
    "DRAExtendedResource": True,  # GA, locked
    "DRAFractionalCapacityRange": True,  # beta
    "DRAListTypeAttributes": False,  # alpha
    "DRANodeAllocatableResources": False,  # alpha
    "DRAOptionalNodeOperations": False,  # alpha
    "DRAPartitionableDevices": True,  # beta
    "DRAPartitionableDevicesType": False,  # alpha
    "DRAPrioritizedList": True,  # GA, locked
    "DRAResourceClaimDeviceStatus": True,  # GA, locked
    "DRAResourceClaimGranularStatusAuthorization": True,  # beta
    "DRAResourcePoolStatus": False,  # alpha
    "DRASchedulerFilterTimeout": True,  # beta
    "DRAWorkloadResourceClaims": False,  # beta, off
    # Not a DRA gate, but DRAWorkloadResourceClaims depends on it: PodGroups and spec.schedulingGroup.
    "GenericWorkload": False,  # beta, off
}
LOCKED = frozenset(
    {"DRAAdminAccess", "DRAExtendedResource", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"}
)

# Dependencies among the DRA gates (kube_features.go's defaultKubernetesFeatureGateDependencies; the
# ones on gates outside this list, e.g. DynamicResourceAllocation, are on in every cluster draflow serves).
# As upstream's feature gate, an enabled gate whose dependency is disabled is an error.
DEPENDENCIES: Mapping[str, tuple[str, ...]] = {
    "DRADeviceBindingConditions": ("DRAResourceClaimDeviceStatus",),
    "DRADeviceCompatibilityGroups": ("DRAPartitionableDevices",),
    "DRADeviceTaintRules": ("DRADeviceTaints",),
    "DRAFractionalCapacityRange": ("DRAConsumableCapacity",),
    "DRAPartitionableDevicesType": ("DRAPartitionableDevices", "DRAResourcePoolStatus"),
    "DRAResourceClaimGranularStatusAuthorization": ("DRAResourceClaimDeviceStatus",),
    "DRAWorkloadResourceClaims": ("GenericWorkload",),
}

# Off upstream, on in draflow's test environment and `make up` (draflow_testenv.featuregates.WANTED_GATES);
# a unit test keeps the two lists in step.
DRAFLOW_ON = ("DRAListTypeAttributes", "DRADeviceCompatibilityGroups", "DRADerivedAttributes",
              "DRAResourcePoolStatus", "DRAPartitionableDevicesType", "DRAOptionalNodeOperations",
              "DRANodeAllocatableResources", "DRAWorkloadResourceClaims", "GenericWorkload")
DRAFLOW_DEFAULTS: Mapping[str, bool] = {**GATES, **dict.fromkeys(DRAFLOW_ON, True)}


def parse(value: str) -> dict[str, bool]:
    """``Name=true|false`` pairs, comma-separated → all DRA gates; raises ValueError naming the entry."""
    gates = dict(DRAFLOW_DEFAULTS)
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip().lower()
        if not sep or raw not in ("true", "false"):
            raise ValueError(f"feature gate {item!r}: expected Name=true or Name=false")
        if name not in GATES:
            raise ValueError(f"unrecognized feature gate: {name} (known: {', '.join(sorted(GATES))})")
        enabled = raw == "true"
        if name in LOCKED and not enabled:
            raise ValueError(f"cannot set feature gate {name} to false, feature is locked to true")
        gates[name] = enabled
    for name, needs in DEPENDENCIES.items():
        off = [dep for dep in needs if not gates[dep]]
        if gates[name] and off:
            raise ValueError(f"{name} is enabled, but depends on features that are disabled: {off}")
    return gates
