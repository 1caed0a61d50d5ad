from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListAndWatchResourcesRequest(_message.Message):
    __slots__ = ("node_name",)
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    def __init__(self, node_name: _Optional[str] = ...) -> None: ...

class ListAndWatchResourcesResponse(_message.Message):
    __slots__ = ("driver", "node_name", "pools", "revision")
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    driver: str
    node_name: str
    pools: _containers.RepeatedCompositeFieldContainer[Pool]
    revision: int
    def __init__(self, driver: _Optional[str] = ..., node_name: _Optional[str] = ..., pools: _Optional[_Iterable[_Union[Pool, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...

class Pool(_message.Message):
    __slots__ = ("name", "generation", "node_name", "node_selector", "all_nodes", "devices", "per_device_node_selection", "shared_counters", "partition_type_attribute")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    ALL_NODES_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    PER_DEVICE_NODE_SELECTION_FIELD_NUMBER: _ClassVar[int]
    SHARED_COUNTERS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_TYPE_ATTRIBUTE_FIELD_NUMBER: _ClassVar[int]
    name: str
    generation: int
    node_name: str
    node_selector: NodeSelector
    all_nodes: bool
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    per_device_node_selection: bool
    shared_counters: _containers.RepeatedCompositeFieldContainer[CounterSet]
    partition_type_attribute: str
    def __init__(self, name: _Optional[str] = ..., generation: _Optional[int] = ..., node_name: _Optional[str] = ..., node_selector: _Optional[_Union[NodeSelector, _Mapping]] = ..., all_nodes: _Optional[bool] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., per_device_node_selection: _Optional[bool] = ..., shared_counters: _Optional[_Iterable[_Union[CounterSet, _Mapping]]] = ..., partition_type_attribute: _Optional[str] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("name", "attributes", "capacity", "consumes_counters", "node_name", "node_selector", "all_nodes", "taints", "binds_to_node", "binding_conditions", "binding_failure_conditions", "allow_multiple_allocations")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DeviceAttribute
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DeviceAttribute, _Mapping]] = ...) -> None: ...
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DeviceCapacity
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DeviceCapacity, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    CONSUMES_COUNTERS_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    ALL_NODES_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    BINDS_TO_NODE_FIELD_NUMBER: _ClassVar[int]
    BINDING_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    BINDING_FAILURE_CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MULTIPLE_ALLOCATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.MessageMap[str, DeviceAttribute]
    capacity: _containers.MessageMap[str, DeviceCapacity]
    consumes_counters: _containers.RepeatedCompositeFieldContainer[DeviceCounterConsumption]
    node_name: str
    node_selector: NodeSelector
    all_nodes: bool
    taints: _containers.RepeatedCompositeFieldContainer[DeviceTaint]
    binds_to_node: bool
    binding_conditions: _containers.RepeatedScalarFieldContainer[str]
    binding_failure_conditions: _containers.RepeatedScalarFieldContainer[str]
    allow_multiple_allocations: bool
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Mapping[str, DeviceAttribute]] = ..., capacity: _Optional[_Mapping[str, DeviceCapacity]] = ..., consumes_counters: _Optional[_Iterable[_Union[DeviceCounterConsumption, _Mapping]]] = ..., node_name: _Optional[str] = ..., node_selector: _Optional[_Union[NodeSelector, _Mapping]] = ..., all_nodes: _Optional[bool] = ..., taints: _Optional[_Iterable[_Union[DeviceTaint, _Mapping]]] = ..., binds_to_node: _Optional[bool] = ..., binding_conditions: _Optional[_Iterable[str]] = ..., binding_failure_conditions: _Optional[_Iterable[str]] = ..., allow_multiple_allocations: _Optional[bool] = ...) -> None: ...

class DeviceAttribute(_message.Message):
    __slots__ = ("int_value", "bool_value", "string_value", "version_value", "int_values", "bool_values", "string_values", "version_values")
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    VERSION_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUES_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUES_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUES_FIELD_NUMBER: _ClassVar[int]
    VERSION_VALUES_FIELD_NUMBER: _ClassVar[int]
    int_value: int
    bool_value: bool
    string_value: str
    version_value: str
    int_values: IntList
    bool_values: BoolList
    string_values: StringList
    version_values: StringList
    def __init__(self, int_value: _Optional[int] = ..., bool_value: _Optional[bool] = ..., string_value: _Optional[str] = ..., version_value: _Optional[str] = ..., int_values: _Optional[_Union[IntList, _Mapping]] = ..., bool_values: _Optional[_Union[BoolList, _Mapping]] = ..., string_values: _Optional[_Union[StringList, _Mapping]] = ..., version_values: _Optional[_Union[StringList, _Mapping]] = ...) -> None: ...

class IntList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class BoolList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, values: _Optional[_Iterable[bool]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class DeviceCapacity(_message.Message):
    __slots__ = ("value", "request_policy")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_POLICY_FIELD_NUMBER: _ClassVar[int]
    value: str
    request_policy: CapacityRequestPolicy
    def __init__(self, value: _Optional[str] = ..., request_policy: _Optional[_Union[CapacityRequestPolicy, _Mapping]] = ...) -> None: ...

class CapacityRequestPolicy(_message.Message):
    __slots__ = ("default", "valid_values", "valid_range")
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    VALID_VALUES_FIELD_NUMBER: _ClassVar[int]
    VALID_RANGE_FIELD_NUMBER: _ClassVar[int]
    default: str
    valid_values: _containers.RepeatedScalarFieldContainer[str]
    valid_range: CapacityRequestPolicyRange
    def __init__(self, default: _Optional[str] = ..., valid_values: _Optional[_Iterable[str]] = ..., valid_range: _Optional[_Union[CapacityRequestPolicyRange, _Mapping]] = ...) -> None: ...

class CapacityRequestPolicyRange(_message.Message):
    __slots__ = ("min", "max", "step")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    min: str
    max: str
    step: str
    def __init__(self, min: _Optional[str] = ..., max: _Optional[str] = ..., step: _Optional[str] = ...) -> None: ...

class DeviceCounterConsumption(_message.Message):
    __slots__ = ("counter_set", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COUNTER_SET_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    counter_set: str
    counters: _containers.ScalarMap[str, str]
    def __init__(self, counter_set: _Optional[str] = ..., counters: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CounterSet(_message.Message):
    __slots__ = ("name", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    counters: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., counters: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DeviceTaint(_message.Message):
    __slots__ = ("key", "value", "effect", "time_added")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TIME_ADDED_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    time_added: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., time_added: _Optional[str] = ...) -> None: ...

class NodeSelector(_message.Message):
    __slots__ = ("node_selector_terms",)
    NODE_SELECTOR_TERMS_FIELD_NUMBER: _ClassVar[int]
    node_selector_terms: _containers.RepeatedCompositeFieldContainer[NodeSelectorTerm]
    def __init__(self, node_selector_terms: _Optional[_Iterable[_Union[NodeSelectorTerm, _Mapping]]] = ...) -> None: ...

class NodeSelectorTerm(_message.Message):
    __slots__ = ("match_expressions", "match_fields")
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELDS_FIELD_NUMBER: _ClassVar[int]
    match_expressions: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    match_fields: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    def __init__(self, match_expressions: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ..., match_fields: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ...) -> None: ...

class NodeSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...
