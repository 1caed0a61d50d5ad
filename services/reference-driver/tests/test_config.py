"""Opaque config decoding: strict, with errors that name the field; which config applies to a request."""

from __future__ import annotations

import pytest

from reference_driver.config import DEFAULT_CONFIG, ConfigError, configs_by_request, decode_config

DRIVER = "gpu.draflow.example"
API = f"{DRIVER}/v1"


def gpu_config(**sharing):
    return {"apiVersion": API, "kind": "GpuConfig", **({"sharing": sharing} if sharing else {})}


@pytest.mark.parametrize(
    ("parameters", "field", "message"),
    [
        (gpu_config(strategy="TimeSlicing", timeSlicing={"interval": "Forever"}),
         "sharing.timeSlicing.interval", "'Default', 'Short', 'Medium' or 'Long'"),
        (gpu_config(strategy="SpacePartitioning", spacePartitioning={"partitionCount": 0}),
         "sharing.spacePartitioning.partitionCount", "greater than or equal to 1"),
        (gpu_config(strategy="SpacePartitioning"), "sharing", "needs spacePartitioning.partitionCount"),
        (gpu_config(strategy="TimeSlicing", spacePartitioning={"partitionCount": 2}),
         "sharing", "strategy is TimeSlicing"),
        (gpu_config(strategy="Mps"), "sharing.strategy", "'TimeSlicing' or 'SpacePartitioning'"),
        (gpu_config(strategy="TimeSlicing", timeSlicing={"interval": "Short", "extra": 1}),
         "sharing.timeSlicing.extra", "Extra inputs are not permitted"),
        ({**gpu_config(), "color": "red"}, "color", "Extra inputs are not permitted"),
        ({"apiVersion": "other.example/v1", "kind": "GpuConfig"}, "apiVersion", "unsupported"),
        ({"apiVersion": API, "kind": "NetConfig"}, "kind", "'GpuConfig'"),
    ],
    ids=["bad-interval", "zero-partitions", "missing-partitioning", "mismatched-block", "unknown-strategy",
         "unknown-nested-field", "unknown-top-field", "wrong-api-version", "wrong-kind"],
)
def test_invalid_config_names_the_field(parameters, field, message):
    with pytest.raises(ConfigError) as info:
        decode_config(parameters, DRIVER)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert message in str(info.value)


def test_valid_configs_decode():
    ts = decode_config(gpu_config(strategy="TimeSlicing", timeSlicing={"interval": "Short"}), DRIVER)
    assert ts.sharing is not None
    assert ts.sharing.env() == {"SHARING_STRATEGY": "TimeSlicing", "TIMESLICE_INTERVAL": "Short"}
    partitions = gpu_config(strategy="SpacePartitioning", spacePartitioning={"partitionCount": 4})
    sp = decode_config(partitions, DRIVER)
    assert sp.sharing is not None
    assert sp.sharing.env() == {"SHARING_STRATEGY": "SpacePartitioning", "PARTITION_COUNT": "4"}
    default = decode_config(gpu_config(strategy="TimeSlicing"), DRIVER)
    assert default.sharing.env()["TIMESLICE_INTERVAL"] == "Default"


def entry(source, requests, parameters, driver=DRIVER):
    return {"source": source, "requests": requests, "opaque": {"driver": driver, "parameters": parameters}}


def test_claim_config_overrides_class_config_and_matches_parent_requests():
    short = gpu_config(strategy="TimeSlicing", timeSlicing={"interval": "Short"})
    long_ = gpu_config(strategy="TimeSlicing", timeSlicing={"interval": "Long"})
    parts = gpu_config(strategy="SpacePartitioning", spacePartitioning={"partitionCount": 2})
    allocation = {"devices": {"config": [
        entry("FromClaim", ["a"], long_),
        entry("FromClass", [], short),
        entry("FromClaim", ["b"], parts),
        entry("FromClaim", [], {"whatever": True}, driver="other.example"),  # other drivers are ignored
    ]}}
    got = configs_by_request(allocation, DRIVER, ["a", "b/small", "c"])
    assert got["a"].sharing.time_slicing.interval == "Long"
    assert got["b/small"].sharing.strategy == "SpacePartitioning"
    assert got["c"].sharing.time_slicing.interval == "Short"


def test_no_config_means_default():
    assert configs_by_request({"devices": {"results": []}}, DRIVER, ["a"]) == {"a": DEFAULT_CONFIG}


def test_an_invalid_config_fails_even_if_it_matches_no_request():
    allocation = {"devices": {"config": [
        entry("FromClaim", ["unused"], gpu_config(strategy="TimeSlicing", timeSlicing={"interval": "x"})),
    ]}}
    with pytest.raises(ConfigError) as info:
        configs_by_request(allocation, DRIVER, ["a"])
    assert info.value.field == "sharing.timeSlicing.interval"
    assert info.value.index == 0
    assert "invalid opaque config #0 (FromClaim)" in str(info.value)
