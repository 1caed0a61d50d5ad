import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClaimEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLAIM_EVENT_KIND_UNSPECIFIED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_CREATED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_ALLOCATED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_ALLOCATION_FAILED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_RESERVED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_PREPARED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_PREPARE_FAILED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_UNPREPARED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_DEALLOCATED: _ClassVar[ClaimEventKind]
    CLAIM_EVENT_KIND_DELETED: _ClassVar[ClaimEventKind]
CLAIM_EVENT_KIND_UNSPECIFIED: ClaimEventKind
CLAIM_EVENT_KIND_CREATED: ClaimEventKind
CLAIM_EVENT_KIND_ALLOCATED: ClaimEventKind
CLAIM_EVENT_KIND_ALLOCATION_FAILED: ClaimEventKind
CLAIM_EVENT_KIND_RESERVED: ClaimEventKind
CLAIM_EVENT_KIND_PREPARED: ClaimEventKind
CLAIM_EVENT_KIND_PREPARE_FAILED: ClaimEventKind
CLAIM_EVENT_KIND_UNPREPARED: ClaimEventKind
CLAIM_EVENT_KIND_DEALLOCATED: ClaimEventKind
CLAIM_EVENT_KIND_DELETED: ClaimEventKind

class PodRef(_message.Message):
    __slots__ = ("namespace", "name", "uid")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("request", "driver", "pool", "device", "share_id", "cdi_device_ids")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    SHARE_ID_FIELD_NUMBER: _ClassVar[int]
    CDI_DEVICE_IDS_FIELD_NUMBER: _ClassVar[int]
    request: str
    driver: str
    pool: str
    device: str
    share_id: str
    cdi_device_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, request: _Optional[str] = ..., driver: _Optional[str] = ..., pool: _Optional[str] = ..., device: _Optional[str] = ..., share_id: _Optional[str] = ..., cdi_device_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ClaimEvent(_message.Message):
    __slots__ = ("kind", "claim_uid", "namespace", "name", "pod", "node", "driver", "devices", "reason", "message", "time", "service", "trace_id", "resource_version")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CLAIM_UID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: ClaimEventKind
    claim_uid: str
    namespace: str
    name: str
    pod: PodRef
    node: str
    driver: str
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    reason: str
    message: str
    time: _timestamp_pb2.Timestamp
    service: str
    trace_id: str
    resource_version: str
    def __init__(self, kind: _Optional[_Union[ClaimEventKind, str]] = ..., claim_uid: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., pod: _Optional[_Union[PodRef, _Mapping]] = ..., node: _Optional[str] = ..., driver: _Optional[str] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., service: _Optional[str] = ..., trace_id: _Optional[str] = ..., resource_version: _Optional[str] = ...) -> None: ...

class PoolChanged(_message.Message):
    __slots__ = ("driver", "node", "pool", "generation", "resource_slice_count", "devices", "tainted_devices", "unhealthy_devices", "slices_created", "slices_updated", "slices_deleted", "time", "service")
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_SLICE_COUNT_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    TAINTED_DEVICES_FIELD_NUMBER: _ClassVar[int]
    UNHEALTHY_DEVICES_FIELD_NUMBER: _ClassVar[int]
    SLICES_CREATED_FIELD_NUMBER: _ClassVar[int]
    SLICES_UPDATED_FIELD_NUMBER: _ClassVar[int]
    SLICES_DELETED_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    driver: str
    node: str
    pool: str
    generation: int
    resource_slice_count: int
    devices: int
    tainted_devices: int
    unhealthy_devices: int
    slices_created: int
    slices_updated: int
    slices_deleted: int
    time: _timestamp_pb2.Timestamp
    service: str
    def __init__(self, driver: _Optional[str] = ..., node: _Optional[str] = ..., pool: _Optional[str] = ..., generation: _Optional[int] = ..., resource_slice_count: _Optional[int] = ..., devices: _Optional[int] = ..., tainted_devices: _Optional[int] = ..., unhealthy_devices: _Optional[int] = ..., slices_created: _Optional[int] = ..., slices_updated: _Optional[int] = ..., slices_deleted: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., service: _Optional[str] = ...) -> None: ...
