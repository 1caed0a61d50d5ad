"""Opaque device configuration of the driver (``allocation.devices.config[].opaque.parameters``).

A claim or device class may carry, for this driver::

    {"apiVersion": "gpu.draflow.example/v1", "kind": "GpuConfig",
     "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Short"}}}
    {"apiVersion": "gpu.draflow.example/v1", "kind": "GpuConfig",
     "sharing": {"strategy": "SpacePartitioning", "spacePartitioning": {"partitionCount": 4}}}

Decoding is strict (unknown fields are errors) and errors name the field, e.g.
``sharing.timeSlicing.interval: Input should be 'Default', 'Short', 'Medium' or 'Long'``. An invalid
config fails the claim that carries it, never the whole NodePrepareResources batch.

Which config applies to an allocated device (:func:`configs_by_request`): entries whose ``requests`` is
empty or names the device's request (``req`` or ``req/sub``, or its parent ``req``); class configs
first, then claim configs, in order; the last match wins. No match: :data:`DEFAULT_CONFIG` (no sharing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CONFIG_KIND = "GpuConfig"
CONFIG_VERSION = "v1"


class ConfigError(Exception):
    """An opaque config for this driver is invalid. ``field`` is the dotted path of the first bad field."""

    def __init__(self, message: str, *, field: str = "", index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.index = index


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TimeSlicingConfig(_Strict):
    interval: Literal["Default", "Short", "Medium", "Long"] = "Default"


class SpacePartitioningConfig(_Strict):
    partition_count: int = Field(alias="partitionCount", ge=1, le=16)


class Sharing(_Strict):
    strategy: Literal["TimeSlicing", "SpacePartitioning"]
    time_slicing: TimeSlicingConfig | None = Field(None, alias="timeSlicing")
    space_partitioning: SpacePartitioningConfig | None = Field(None, alias="spacePartitioning")

    @model_validator(mode="after")
    def _one_matching_block(self) -> Sharing:
        if self.strategy == "TimeSlicing":
            if self.space_partitioning is not None:
                raise ValueError("spacePartitioning is set but strategy is TimeSlicing")
        elif self.time_slicing is not None:
            raise ValueError("timeSlicing is set but strategy is SpacePartitioning")
        elif self.space_partitioning is None:
            raise ValueError("strategy SpacePartitioning needs spacePartitioning.partitionCount")
        return self

    def env(self) -> dict[str, str]:
        """The sharing settings as environment variable suffixes."""
        result: dict[str, str] = {"SHARING_STRATEGY": self.strategy}
        if self.strategy == "TimeSlicing":
            result["TIMESLICE_INTERVAL"] = (self.time_slicing or TimeSlicingConfig()).interval
        elif self.space_partitioning is not None:
            result["PARTITION_COUNT"] = str(self.space_partitioning.partition_count)
        return result


class GpuConfig(_Strict):
    api_version: str = Field(alias="apiVersion")
    kind: Literal["GpuConfig"]
    sharing: Sharing | None = None


DEFAULT_CONFIG = GpuConfig.model_validate({"apiVersion": "default", "kind": CONFIG_KIND})


def _field_path(loc: Iterable[Any]) -> str:
    return ".".join(str(part) for part in loc)


def decode_config(parameters: Any, driver_name: str) -> GpuConfig:
    """Decode and validate one opaque config. Raises :class:`ConfigError` naming the bad field."""
    if not isinstance(parameters, Mapping):
        raise ConfigError("opaque parameters must be a JSON object")
    want = f"{driver_name}/{CONFIG_VERSION}"
    if parameters.get("apiVersion") != want:
        raise ConfigError(
            f"apiVersion: unsupported {parameters.get('apiVersion')!r}, want {want!r}", field="apiVersion"
        )
    try:
        return GpuConfig.model_validate(parameters)
    except ValidationError as exc:
        err = exc.errors()[0]
        path = _field_path(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{path or '(root)'}: {message}", field=path) from exc


def base_request(name: str) -> str:
    """``req/sub`` -> ``req`` (what the kubelet matches against container requests)."""
    return name.split("/", 1)[0]


def configs_by_request(
    allocation: Mapping[str, Any], driver_name: str, requests: Iterable[str]
) -> dict[str, GpuConfig]:
    """The effective config of each allocated request name in ``requests``.

    Every config for this driver is decoded, also those matching no request, so a bad config always
    fails its claim. Raises :class:`ConfigError` (with ``index`` of the offending entry).
    """
    entries = [
        (i, entry) for i, entry in enumerate(allocation.get("devices", {}).get("config") or [])
        if (entry.get("opaque") or {}).get("driver") == driver_name
    ]
    entries.sort(key=lambda item: 0 if item[1].get("source") == "FromClass" else 1)
    decoded: list[tuple[list[str], GpuConfig]] = []
    for i, entry in entries:
        try:
            cfg = decode_config(entry["opaque"].get("parameters"), driver_name)
        except ConfigError as exc:
            source = entry.get("source", "FromClaim")
            raise ConfigError(
                f"invalid opaque config #{i} ({source}) for driver {driver_name}: {exc}",
                field=exc.field, index=i,
            ) from exc
        decoded.append((list(entry.get("requests") or []), cfg))
    result: dict[str, GpuConfig] = {}
    for request in requests:
        chosen = DEFAULT_CONFIG
        for names, cfg in decoded:
            if not names or request in names or base_request(request) in names:
                chosen = cfg
        result[request] = chosen
    return result
