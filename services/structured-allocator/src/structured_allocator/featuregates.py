"""The DRA feature gates of Kubernetes v1.37, as ``--feature-gates`` of kube-scheduler takes them
(the table and the parser are :mod:`draflow_runtime.featuregates`, shared with kubelet-dra-shim).

``parse("DRADerivedAttributes=true,DRAListTypeAttributes=false")`` → every DRA gate's value: the given
ones, the others at :data:`DRAFLOW_DEFAULTS` — upstream's v1.37 defaults, with the alpha gates that
draflow's test environment (and ``make up``) turns on in its kube-apiserver also on, so that the
allocator follows the API server it is tested against. As upstream, an unknown gate or a locked GA gate
set to false, or an enabled gate whose dependency is disabled, is an error. :func:`allocator_features`
maps the gates to the core's :class:`~.core.Features` exactly as kube-scheduler's DynamicResources plugin
builds ``structured.Features``.
"""

from __future__ import annotations

from collections.abc import Mapping

from draflow_runtime.featuregates import DEPENDENCIES, DRAFLOW_DEFAULTS, DRAFLOW_ON, GATES, LOCKED, parse

from .core import Features

__all__ = ["DEPENDENCIES", "DRAFLOW_DEFAULTS", "DRAFLOW_ON", "GATES", "LOCKED", "allocator_features", "parse"]


def allocator_features(gates: Mapping[str, bool]) -> Features:
    """The core's features for these gates (upstream ``DynamicResources`` → ``structured.Features``)."""
    return Features(
        admin_access=gates["DRAAdminAccess"],
        prioritized_list=gates["DRAPrioritizedList"],
        partitionable_devices=gates["DRAPartitionableDevices"],
        device_taints=gates["DRADeviceTaints"],
        device_binding_and_status=(
            gates["DRADeviceBindingConditions"] and gates["DRAResourceClaimDeviceStatus"]
        ),
        consumable_capacity=gates["DRAConsumableCapacity"],
        fractional_capacity_range=gates["DRAFractionalCapacityRange"],
        list_type_attributes=gates["DRAListTypeAttributes"],
        compatibility_groups=gates["DRADeviceCompatibilityGroups"],
        derived_attributes=gates["DRADerivedAttributes"],
        optional_node_operations=gates["DRAOptionalNodeOperations"],
    )
