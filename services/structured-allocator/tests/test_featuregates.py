"""``--feature-gates``: parsing, defaults that follow the test environment, the mapping to the core."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from draflow_testenv.featuregates import NOT_WANTED_GATES, WANTED_GATES
from structured_allocator import featuregates
from structured_allocator.core import Features
from structured_allocator.settings import Settings


def test_by_default_the_allocator_has_every_gate_the_test_environment_turns_on() -> None:
    gates = featuregates.parse("")
    off = [g for g in WANTED_GATES if not gates[g]]
    assert off == []


def test_gates_the_test_environment_leaves_off_keep_upstream_defaults() -> None:
    gates = featuregates.parse("")
    assert {g: gates[g] for g in NOT_WANTED_GATES} == {g: featuregates.GATES[g] for g in NOT_WANTED_GATES}
    assert set(featuregates.DRAFLOW_ON) <= set(WANTED_GATES)


def test_the_default_settings_follow_the_apiserver_gates() -> None:
    # Before: the service built Features() with DRAListTypeAttributes off while testenv had it on.
    features = Settings().allocator_features
    assert features.list_type_attributes and features.compatibility_groups and features.derived_attributes
    assert features.optional_node_operations  # alpha, off upstream, on in the test environment (issue 13)


def test_explicit_values_win_and_map_like_kube_scheduler() -> None:
    gates = featuregates.parse("DRADeviceBindingConditions=false, DRAListTypeAttributes=false,"
                               "DRAOptionalNodeOperations=TRUE")
    features = featuregates.allocator_features(gates)
    assert features == Features(
        device_binding_and_status=False, list_type_attributes=False, compatibility_groups=True,
        derived_attributes=True, optional_node_operations=True,
    )


@pytest.mark.parametrize(("value", "message"), [
    ("DRANoSuchThing=true", "unrecognized feature gate: DRANoSuchThing"),
    ("DRAListTypeAttributes", "expected Name=true or Name=false"),
    ("DRAListTypeAttributes=yes", "expected Name=true or Name=false"),
    ("DRAPrioritizedList=false", "cannot set feature gate DRAPrioritizedList to false, feature is locked"),
    ("DRAResourcePoolStatus=false", "DRAPartitionableDevicesType is enabled, but depends on features that "
     "are disabled: ['DRAResourcePoolStatus']"),
    ("DRAConsumableCapacity=false", "DRAFractionalCapacityRange is enabled, but depends on"),
])
def test_bad_gates_are_refused_at_start_up_naming_the_entry(value: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        Settings(feature_gates=value)
    assert message in str(info.value)


def test_filter_timeout_and_taint_rules_follow_their_gates() -> None:
    on = Settings(filter_timeout=3.0)
    assert (on.effective_filter_timeout, on.watch_device_taint_rules) == (3.0, True)
    gates = "DRASchedulerFilterTimeout=false,DRADeviceTaintRules=false"
    off = Settings(filter_timeout=3.0, feature_gates=gates)
    assert (off.effective_filter_timeout, off.watch_device_taint_rules) == (0.0, False)


def test_every_gate_the_testenv_knows_is_a_gate_the_allocator_knows() -> None:
    assert set(WANTED_GATES) | set(NOT_WANTED_GATES) == set(featuregates.GATES)


def test_a_gate_and_its_dependency_switched_off_together_are_fine() -> None:
    gates = featuregates.parse("DRAResourcePoolStatus=false,DRAPartitionableDevicesType=false")
    assert not gates["DRAResourcePoolStatus"] and not gates["DRAPartitionableDevicesType"]


def test_every_dependency_names_known_gates_and_the_defaults_satisfy_them() -> None:
    for name, needs in featuregates.DEPENDENCIES.items():
        assert {name, *needs} <= set(featuregates.GATES)
    featuregates.parse("")  # draflow's defaults: no error
    for name, needs in featuregates.DEPENDENCIES.items():  # upstream's defaults satisfy them too
        assert not featuregates.GATES[name] or all(featuregates.GATES[d] for d in needs), name
