"""The generated code speaks exactly upstream's wire format: method names, messages, field numbers."""

from __future__ import annotations

import importlib

import pytest
from google.protobuf.descriptor import FieldDescriptor

from draflow_protos.dra.v1 import api_pb2 as dra_v1
from draflow_protos.dra.v1 import api_pb2_grpc as dra_v1_grpc
from draflow_protos.dra.v1beta1 import api_pb2 as dra_v1beta1
from draflow_protos.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_protos.drahealth.v1 import api_pb2_grpc as health_v1_grpc
from draflow_protos.drahealth.v1alpha1 import api_pb2 as health_v1alpha1
from draflow_protos.drahealth.v1alpha1 import api_pb2_grpc as health_v1alpha1_grpc
from draflow_protos.inventory.v1 import inventory_pb2, inventory_pb2_grpc
from draflow_protos.pluginregistration.v1 import api_pb2 as reg_v1
from draflow_protos.pluginregistration.v1 import api_pb2_grpc as reg_v1_grpc

# Upstream k8s.io/kubelet api.proto files: message -> {field: number}.
DRA_MESSAGES = {
    "NodePrepareResourcesRequest": {"claims": 1},
    "NodePrepareResourcesResponse": {"claims": 1},
    "NodePrepareResourceResponse": {"devices": 1, "error": 2},
    "Device": {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4, "share_id": 5},
    "NodeUnprepareResourcesRequest": {"claims": 1},
    "NodeUnprepareResourcesResponse": {"claims": 1},
    "NodeUnprepareResourceResponse": {"error": 1},
    "Claim": {"namespace": 1, "uid": 2, "name": 3},
}
DRA_V1BETA1_MESSAGES = {
    **DRA_MESSAGES,
    "Device": {"request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4},
}
HEALTH_MESSAGES = {
    "NodeWatchResourcesRequest": {},
    "DeviceIdentifier": {"pool_name": 1, "device_name": 2},
    "DeviceHealth": {
        "device": 1, "health": 2, "last_updated_time": 3, "health_check_timeout_seconds": 4, "message": 5,
    },
    "NodeWatchResourcesResponse": {"devices": 1},
}
REGISTRATION_MESSAGES = {
    "PluginInfo": {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4},
    "RegistrationStatus": {"plugin_registered": 1, "error": 2},
    "RegistrationStatusResponse": {},
    "InfoRequest": {},
}
# draflow's own API: fixed here so that a renumbering is a deliberate, visible change.
INVENTORY_MESSAGES = {
    "ListAndWatchResourcesRequest": {"node_name": 1},
    "ListAndWatchResourcesResponse": {"driver": 1, "node_name": 2, "pools": 3, "revision": 4},
    "Pool": {
        "name": 1, "generation": 2, "node_name": 3, "node_selector": 4, "all_nodes": 5, "devices": 6,
        "per_device_node_selection": 7, "shared_counters": 8, "partition_type_attribute": 9,
    },
    "Device": {
        "name": 1, "attributes": 2, "capacity": 3, "consumes_counters": 4, "node_name": 5,
        "node_selector": 6, "all_nodes": 7, "taints": 8, "binds_to_node": 9, "binding_conditions": 10,
        "binding_failure_conditions": 11, "allow_multiple_allocations": 12,
    },
    "DeviceAttribute": {
        "int_value": 2, "bool_value": 3, "string_value": 4, "version_value": 5, "int_values": 6,
        "bool_values": 7, "string_values": 8, "version_values": 9,
    },
    "IntList": {"values": 1},
    "BoolList": {"values": 1},
    "StringList": {"values": 1},
    "DeviceCapacity": {"value": 1, "request_policy": 2},
    "CapacityRequestPolicy": {"default": 1, "valid_values": 3, "valid_range": 4},
    "CapacityRequestPolicyRange": {"min": 1, "max": 2, "step": 3},
    "DeviceCounterConsumption": {"counter_set": 1, "counters": 2},
    "CounterSet": {"name": 1, "counters": 2},
    "DeviceTaint": {"key": 1, "value": 2, "effect": 3, "time_added": 4},
    "NodeSelector": {"node_selector_terms": 1},
    "NodeSelectorTerm": {"match_expressions": 1, "match_fields": 2},
    "NodeSelectorRequirement": {"key": 1, "operator": 2, "values": 3},
}

PACKAGES = [
    pytest.param(reg_v1, "pluginregistration", REGISTRATION_MESSAGES, id="pluginregistration"),
    pytest.param(dra_v1, "k8s.io.kubelet.pkg.apis.dra.v1", DRA_MESSAGES, id="dra-v1"),
    pytest.param(dra_v1beta1, "k8s.io.kubelet.pkg.apis.dra.v1beta1", DRA_V1BETA1_MESSAGES, id="dra-v1beta1"),
    pytest.param(health_v1alpha1, "v1alpha1", HEALTH_MESSAGES, id="drahealth-v1alpha1"),
    pytest.param(health_v1, "v1", HEALTH_MESSAGES, id="drahealth-v1"),
    pytest.param(inventory_pb2, "draflow.inventory.v1", INVENTORY_MESSAGES, id="inventory-v1"),
]


def full_method_names(module) -> set[str]:
    names = set()
    for service in module.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            names.add(f"/{service.full_name}/{method.name}")
    return names


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        pytest.param(reg_v1, {
            "/pluginregistration.Registration/GetInfo",
            "/pluginregistration.Registration/NotifyRegistrationStatus",
        }, id="pluginregistration"),
        pytest.param(dra_v1, {
            "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
            "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
        }, id="dra-v1"),
        pytest.param(dra_v1beta1, {
            "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
            "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
        }, id="dra-v1beta1"),
        pytest.param(health_v1alpha1, {"/v1alpha1.DRAResourceHealth/NodeWatchResources"}, id="health"),
        pytest.param(health_v1, {"/v1.DRAResourceHealth/NodeWatchResources"}, id="health-v1"),
        pytest.param(
            inventory_pb2, {"/draflow.inventory.v1.Inventory/ListAndWatchResources"}, id="inventory",
        ),
    ],
)
def test_full_method_names_match_upstream(module, expected):
    assert full_method_names(module) == expected


@pytest.mark.parametrize(("module", "package", "messages"), PACKAGES)
def test_messages_and_field_numbers_match_upstream(module, package, messages):
    assert module.DESCRIPTOR.package == package
    assert set(module.DESCRIPTOR.message_types_by_name) == set(messages)
    for name, fields in messages.items():
        descriptor = module.DESCRIPTOR.message_types_by_name[name]
        assert descriptor.full_name == f"{package}.{name}"
        actual = {f.name: f.number for f in descriptor.fields}
        assert actual == fields, name


def test_v1beta1_device_has_no_share_id_and_v1_share_id_is_optional():
    assert "share_id" not in dra_v1beta1.Device.DESCRIPTOR.fields_by_name
    share_id = dra_v1.Device.DESCRIPTOR.fields_by_name["share_id"]
    assert share_id.has_presence  # proto3 `optional`: unset and "" are different
    device = dra_v1.Device()
    assert not device.HasField("share_id")
    device.share_id = ""
    assert device.HasField("share_id")


def test_repeated_and_map_fields_have_upstream_shapes():
    claims = dra_v1.NodePrepareResourcesResponse.DESCRIPTOR.fields_by_name["claims"]
    assert claims.message_type.GetOptions().map_entry
    assert claims.message_type.fields_by_name["key"].type == FieldDescriptor.TYPE_STRING
    assert dra_v1.Device.DESCRIPTOR.fields_by_name["cdi_device_ids"].is_repeated
    assert reg_v1.PluginInfo.DESCRIPTOR.fields_by_name["supported_versions"].is_repeated
    timeout = health_v1alpha1.DeviceHealth.DESCRIPTOR.fields_by_name["health_check_timeout_seconds"]
    assert timeout.type == FieldDescriptor.TYPE_INT64
    assert not timeout.is_repeated


@pytest.mark.parametrize(("module", "package"), [(health_v1alpha1, "v1alpha1"), (health_v1, "v1")])
def test_health_status_enum_values_match_upstream(module, package):
    enum = module.DESCRIPTOR.enum_types_by_name["HealthStatus"]
    assert enum.full_name == f"{package}.HealthStatus"
    assert {v.name: v.number for v in enum.values} == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}


def test_streaming_shapes():
    for module in (health_v1alpha1, health_v1):
        watch = module.DESCRIPTOR.services_by_name["DRAResourceHealth"].methods_by_name["NodeWatchResources"]
        assert watch.server_streaming and not watch.client_streaming
    law = inventory_pb2.DESCRIPTOR.services_by_name["Inventory"].methods_by_name["ListAndWatchResources"]
    assert law.server_streaming and not law.client_streaming


@pytest.mark.parametrize(
    ("grpc_module", "servicer", "stub"),
    [
        (reg_v1_grpc, "RegistrationServicer", "RegistrationStub"),
        (dra_v1_grpc, "DRAPluginServicer", "DRAPluginStub"),
        (dra_v1beta1_grpc, "DRAPluginServicer", "DRAPluginStub"),
        (health_v1alpha1_grpc, "DRAResourceHealthServicer", "DRAResourceHealthStub"),
        (health_v1_grpc, "DRAResourceHealthServicer", "DRAResourceHealthStub"),
        (inventory_pb2_grpc, "InventoryServicer", "InventoryStub"),
    ],
)
def test_grpc_modules_import_and_expose_stub_and_servicer(grpc_module, servicer, stub):
    # The generated imports (`from draflow_protos.x.y import api_pb2`) resolve in a fresh import too.
    reloaded = importlib.reload(grpc_module)
    assert hasattr(reloaded, servicer)
    assert hasattr(reloaded, stub)
