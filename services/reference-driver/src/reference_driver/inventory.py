"""The fake GPUs of a node: profiles, deterministic UUIDs, and the reloadable inventory configuration.

:func:`build_pool` is pure: the same (node, config) always gives the same pool. Three profiles:

- ``plain``: ``gpu-<i>``, each with ``memory`` and ``compute`` capacity.
- ``partitionable`` (like MIG): per GPU a counter set ``gpu-<i>-counters`` (memory, compute), a whole-GPU
  device ``gpu-<i>`` consuming all of it and ``partitions`` devices ``gpu-<i>-part-<j>`` consuming a share
  each, so a GPU is allocated either whole or as partitions.
- ``consumable``: ``gpu-<i>`` with ``allowMultipleAllocations`` and capacity request policies, so several
  claims share one GPU, each consuming part of its memory and compute.

Every device has the attributes ``index`` (int), ``uuid`` (string, derived from the node name),
``model`` (string) and ``driverVersion`` (version); partition devices add ``partition`` (int) and
``parentUUID`` (string). In the ``partitionable`` profile every device also has ``partitionType``
(string: ``whole`` or ``1/<partitions>``) and ``partitionGroup`` (string: ``gpu-<i>:<partitionType>``),
and the pool names ``<driver>/partitionGroup`` as its ``partition_type_attribute``
(:func:`with_partition_type`; DRAPartitionableDevicesType), so a ResourcePoolStatusRequest reports how
many of each still fit. Per GPU, because the API server's pool status (as kube-controller-manager
v1.37.1 computes it) groups devices by that attribute's value and refuses a group whose devices consume
different counters (``PartitionCostMismatch``): the ``1/<n>`` partitions of two GPUs draw on two counter
sets, so one group across GPUs would flag every pool with more than one GPU. The pool is named after
the node and is local to it.

:class:`InventorySource` holds the configuration: the settings give the base, an optional JSON/YAML file
overrides any of its fields and is re-read when it changes (:meth:`InventorySource.poll`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from draflow_protos.inventory.v1 import inventory_pb2 as inv
from draflow_runtime.log import get_logger

log = get_logger(__name__)

UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://draflow.dev/reference-driver/gpu")
PARTITION_TYPE = "partitionType"  # string attribute of partitionable-profile devices: whole, 1/<n>
PARTITION_GROUP = "partitionGroup"  # gpu-<i>:<partitionType>: the pool's partition type attribute
MAX_PARTITION_GROUPS = 32  # the API's maxItems on a pool status' partitionSummary


class InventoryConfig(BaseModel):
    """What a node has. File keys are camelCase (``gpuCount``); unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    profile: Literal["plain", "partitionable", "consumable"] = "plain"
    gpu_count: int = Field(8, ge=0, le=4096, alias="gpuCount")
    gpu_model: str = Field("draflow-fake-gpu", max_length=64, alias="gpuModel")
    gpu_memory: str = Field("80Gi", alias="gpuMemory")
    gpu_compute: str = Field("100", alias="gpuCompute")
    partitions_per_gpu: int = Field(4, ge=1, le=16, alias="partitionsPerGpu")
    driver_version: str = Field("1.0.0", alias="driverVersion")
    binds_to_node: bool | None = Field(None, alias="bindsToNode")
    binding_conditions: list[str] = Field(default_factory=list, max_length=4, alias="bindingConditions")
    binding_failure_conditions: list[str] = Field(
        default_factory=list, max_length=4, alias="bindingFailureConditions"
    )


class InventoryFileError(Exception):
    """The inventory file could not be read or does not describe a valid inventory."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"inventory file {path}: {message}")
        self.path = path


def gpu_uuid(node_name: str, index: int) -> str:
    """Deterministic UUID of GPU ``index`` on ``node_name``: ``gpu-<uuid5>``; stable across restarts."""
    return "gpu-" + str(uuid.uuid5(UUID_NAMESPACE, f"{node_name}/{index}"))


# -- quantities: only what the profiles need (split a GPU's memory/compute into partitions) -----------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def split_quantity(quantity: str, parts: int) -> str:
    """``quantity / parts`` as a Kubernetes quantity string, rounded down (``"80Gi"/4 == "20Gi"``).

    Integer quantities with a binary or decimal suffix only; that is all the fake GPUs use.
    """
    for suffixes in (_BINARY, _DECIMAL):
        for suffix, factor in sorted(suffixes.items(), key=lambda kv: -len(kv[0])):
            number = quantity[: len(quantity) - len(suffix)] if suffix else quantity
            if quantity.endswith(suffix) and number.isdigit():
                total = int(number) * factor // parts
                for name, unit in sorted(suffixes.items(), key=lambda kv: -kv[1]):
                    if total % unit == 0:
                        return f"{total // unit}{name}"
                return str(total)
    raise ValueError(f"unsupported quantity {quantity!r} (want an integer with an optional suffix)")


def min_quantity(quantity: str) -> str:
    """The unit step of a quantity's scale: ``"1Gi"`` for ``"80Gi"``, ``"1"`` for ``"100"``."""
    for suffix in ("Ki", "Mi", "Gi", "Ti", "k", "M", "G", "T"):
        if quantity.endswith(suffix):
            return "1" + suffix
    return "1"


# -- profiles ------------------------------------------------------------------------------------


def _attr(value: int | bool | str, *, version: bool = False) -> inv.DeviceAttribute:
    if version:
        return inv.DeviceAttribute(version_value=str(value))
    if isinstance(value, bool):
        return inv.DeviceAttribute(bool_value=value)
    if isinstance(value, int):
        return inv.DeviceAttribute(int_value=value)
    return inv.DeviceAttribute(string_value=value)


def _base_attributes(node_name: str, index: int, config: InventoryConfig) -> dict[str, inv.DeviceAttribute]:
    return {
        "index": _attr(index),
        "uuid": _attr(gpu_uuid(node_name, index)),
        "model": _attr(config.gpu_model),
        "driverVersion": _attr(config.driver_version, version=True),
    }


def _capacity(memory: str, compute: str, *, consumable: bool) -> dict[str, inv.DeviceCapacity]:
    if not consumable:
        return {"memory": inv.DeviceCapacity(value=memory), "compute": inv.DeviceCapacity(value=compute)}
    result = {}
    for name, value in (("memory", memory), ("compute", compute)):
        step = min_quantity(value)
        policy = inv.CapacityRequestPolicy(
            default=step,
            valid_range=inv.CapacityRequestPolicyRange(min=step, max=value, step=step),
        )
        result[name] = inv.DeviceCapacity(value=value, request_policy=policy)
    return result


def _finish(device: inv.Device, config: InventoryConfig) -> inv.Device:
    if config.binds_to_node is not None:
        device.binds_to_node = config.binds_to_node
    device.binding_conditions.extend(config.binding_conditions)
    device.binding_failure_conditions.extend(config.binding_failure_conditions)
    return device


def build_pool(node_name: str, config: InventoryConfig) -> inv.Pool:
    """The node's pool (named after the node, local to it) for ``config``. Pure and deterministic."""
    pool = inv.Pool(name=node_name, node_name=node_name)
    for i in range(config.gpu_count):
        attrs = _base_attributes(node_name, i, config)
        if config.profile == "partitionable":
            _add_partitionable_gpu(pool, i, attrs, config)
            continue
        consumable = config.profile == "consumable"
        device = inv.Device(
            name=f"gpu-{i}",
            attributes=attrs,
            capacity=_capacity(config.gpu_memory, config.gpu_compute, consumable=consumable),
        )
        if consumable:
            device.allow_multiple_allocations = True
        pool.devices.append(_finish(device, config))
    return pool


def _add_partitionable_gpu(
    pool: inv.Pool, i: int, attrs: dict[str, inv.DeviceAttribute], config: InventoryConfig
) -> None:
    counter_set = f"gpu-{i}-counters"
    whole = {"memory": config.gpu_memory, "compute": config.gpu_compute}
    pool.shared_counters.append(inv.CounterSet(name=counter_set, counters=whole))
    full = inv.Device(
        name=f"gpu-{i}",
        attributes={**attrs, "partitionable": _attr(True), PARTITION_TYPE: _attr("whole"),
                    PARTITION_GROUP: _attr(f"gpu-{i}:whole")},
        capacity=_capacity(config.gpu_memory, config.gpu_compute, consumable=False),
        consumes_counters=[inv.DeviceCounterConsumption(counter_set=counter_set, counters=whole)],
    )
    pool.devices.append(_finish(full, config))
    n = config.partitions_per_gpu
    share = {"memory": split_quantity(config.gpu_memory, n), "compute": split_quantity(config.gpu_compute, n)}
    parent_uuid = attrs["uuid"].string_value
    for j in range(n):
        part_attrs = {
            **attrs,
            "uuid": _attr(f"{parent_uuid}-part-{j}"),
            "parentUUID": _attr(parent_uuid),
            "partition": _attr(j),
            "partitionable": _attr(True),
            PARTITION_TYPE: _attr(f"1/{n}"),
            PARTITION_GROUP: _attr(f"gpu-{i}:1/{n}"),
        }
        part = inv.Device(
            name=f"gpu-{i}-part-{j}",
            attributes=part_attrs,
            capacity=_capacity(share["memory"], share["compute"], consumable=False),
            consumes_counters=[inv.DeviceCounterConsumption(counter_set=counter_set, counters=share)],
        )
        pool.devices.append(_finish(part, config))


def with_partition_type(pool: inv.Pool, driver: str) -> inv.Pool:
    """Name the pool's partition type attribute (``<driver>/partitionGroup``) when it has partitions, as
    long as a pool status can list every group (more would be reported as over the cap, not summarised)."""
    groups = {d.attributes[PARTITION_GROUP].string_value
              for d in pool.devices if PARTITION_GROUP in d.attributes}
    if pool.shared_counters and len(groups) <= MAX_PARTITION_GROUPS:
        pool.partition_type_attribute = f"{driver}/{PARTITION_GROUP}"
    return pool


def device_uuid(device: inv.Device) -> str:
    """The ``uuid`` attribute of a device built by :func:`build_pool`."""
    return device.attributes["uuid"].string_value


# -- the reloadable configuration --------------------------------------------------------------------


def load_inventory_file(path: str, base: InventoryConfig) -> InventoryConfig:
    """``base`` with the fields set in the JSON/YAML file at ``path``. Raises :class:`InventoryFileError`."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InventoryFileError(path, f"cannot read: {exc.strerror}") from exc
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise InventoryFileError(path, f"cannot parse: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InventoryFileError(path, "must be a mapping")
    try:
        return InventoryConfig.model_validate({**base.model_dump(by_alias=True), **data})
    except ValidationError as exc:
        raise InventoryFileError(path, _validation_summary(exc)) from exc


def _validation_summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
    )


@dataclass
class InventorySource:
    """The current :class:`InventoryConfig`: settings as the base, overridden by an optional file.

    ``revision`` increases whenever the effective configuration changes. :meth:`poll` re-reads the file
    when its modification time, size or inode changed; an invalid file is logged and the previous
    configuration stays in effect.
    """

    base: InventoryConfig
    path: str = ""
    config: InventoryConfig = field(init=False)
    revision: int = field(default=1, init=False)
    _stamp: tuple[int, int, int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.config = self.base
        if self.path:
            self._stamp = self._file_stamp()
            self.config = load_inventory_file(self.path, self.base)

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = Path(self.path).stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def poll(self) -> bool:
        """Re-read the file if it changed; True if the effective configuration changed."""
        if not self.path:
            return False
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            config = load_inventory_file(self.path, self.base) if stamp else self.base
        except InventoryFileError as exc:
            log.warning("inventory file invalid, keeping the previous one", path=self.path, error=str(exc))
            return False
        if config == self.config:
            return False
        self.config = config
        self.revision += 1
        log.info("inventory changed", path=self.path, revision=self.revision, **_summary(config))
        return True


def _summary(config: InventoryConfig) -> dict[str, Any]:
    return {"profile": config.profile, "gpus": config.gpu_count}
