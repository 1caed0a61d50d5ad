"""Device health cases of kubelet v1.37.1's ``pkg/kubelet/cm/dra`` tests restated on the shim's pure pieces
(``kubelet_map.py`` says which): the health cache (``healthinfo_test.go``), the health messages and states
(``TestBuildDeviceHealth``, ``TestToDeviceHealthStatus``), and the pod's ``allocatedResourcesStatus``
(``TestBuildResourceHealth``, ``TestTruncateHealthMessage``, ``TestUpdateAllocatedResourcesStatus*``)."""

from __future__ import annotations

from typing import Any

import pytest

from draflow_protos.drahealth.v1 import api_pb2 as health_v1
from draflow_runtime.drahealth import DEFAULT_HEALTH_TIMEOUT, device_reports
from kubelet_dra_shim import health as health_module
from kubelet_dra_shim.checkpoint import ClaimInfo, PreparedDevice
from kubelet_dra_shim.health import MAX_DEVICES_PER_DRIVER, NodeHealth
from kubelet_dra_shim.plugins import PluginStore
from kubelet_dra_shim.podclaims import (
    HEALTH_MESSAGE_MAX_LENGTH,
    allocated_resources_status,
    truncate_health_message,
)

# -- the messages of the drivers' streams -------------------------------------------------------------------


def _response(health: int, timeout: int = 0, message: str = "") -> Any:
    return health_v1.NodeWatchResourcesResponse(devices=[health_v1.DeviceHealth(
        device=health_v1.DeviceIdentifier(pool_name="pool", device_name="dev"), health=health,
        message=message, health_check_timeout_seconds=timeout)])


@pytest.mark.parametrize(("timeout", "want"), [
    pytest.param(60, 60.0, id="healthy with positive timeout"),
    pytest.param(0, DEFAULT_HEALTH_TIMEOUT, id="unhealthy with zero timeout"),
    pytest.param(-5, DEFAULT_HEALTH_TIMEOUT, id="unknown with negative timeout"),
])
def test_a_timeout_that_is_not_positive_is_the_default(timeout: int, want: float) -> None:
    """TestBuildDeviceHealth: a zero or negative timeout means kubelet's default (30 s), never "already
    timed out"."""
    (report,) = device_reports(_response(health_v1.HEALTHY, timeout))
    assert report.timeout == want


@pytest.mark.parametrize(("value", "want"), [
    pytest.param(health_v1.HEALTHY, "Healthy", id="healthy"),
    pytest.param(health_v1.UNHEALTHY, "Unhealthy", id="unhealthy"),
    pytest.param(health_v1.UNKNOWN, "Unknown", id="unknown"),
    pytest.param(42, "Unknown", id="unexpected"),
])
def test_health_states_and_an_unexpected_one_is_unknown(value: int, want: str) -> None:
    """TestToDeviceHealthStatus, TestToResourceHealthStatus."""
    (report,) = device_reports(_response(value))
    assert report.state == want


# -- the node's health cache ------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(health_module, "time", c)
    return c


def _node() -> NodeHealth:
    return NodeHealth("n", PluginStore(), lambda node, driver: None)


def test_an_empty_cache_knows_no_device(clock: _Clock) -> None:
    """TestGetHealthInfoRobust/empty cache, device/driver/pool does not exist."""
    h = _node()
    h.apply("d", [("p", "a", "Healthy", "", 30.0)])
    view = h.view()
    assert ("d", "p", "b") not in view and ("x", "p", "a") not in view and ("d", "q", "a") not in view
    assert _node().view() == {}


def test_a_report_is_kept_for_its_timeout_then_unknown(clock: _Clock) -> None:
    """TestGetHealthInfo, TestGetHealthInfoRobust: healthy, unhealthy, within the timeout, timed out,
    several devices."""
    h = _node()
    h.apply("d", [("p", "a", "Healthy", "", 30.0), ("p", "b", "Unhealthy", "ECC errors", 10.0)])
    assert h.view() == {("d", "p", "a"): ("Healthy", ""), ("d", "p", "b"): ("Unhealthy", "ECC errors")}
    clock.now += 10.0
    assert h.view()[("d", "p", "b")] == ("Unhealthy", "ECC errors"), "just within its timeout"
    clock.now += 0.5
    assert h.view()[("d", "p", "b")][0] == "Unknown"
    assert h.view()[("d", "p", "a")] == ("Healthy", "")
    clock.now += 20.0
    assert h.view()[("d", "p", "a")][0] == "Unknown"


def test_only_a_change_of_state_or_message_is_a_change(clock: _Clock) -> None:
    """TestUpdateHealthInfo, TestHandleWatchResourcesStream/NoActualStateChange."""
    h = _node()
    assert h.apply("d", [("p", "a", "Healthy", "", 30.0)])
    clock.now += 5.0
    assert not h.apply("d", [("p", "a", "Healthy", "", 30.0)])
    assert h.apply("d", [("p", "a", "Healthy", "fan slow", 30.0)])
    assert h.apply("d", [("p", "a", "Unhealthy", "fan slow", 30.0)])
    assert h.view() == {("d", "p", "a"): ("Unhealthy", "fan slow")}


def test_a_device_no_longer_reported_is_dropped(clock: _Clock) -> None:
    """TestUpdateHealthInfoStaleEntryRemoval: each message is the driver's full list."""
    h = _node()
    h.apply("d", [("p", "a", "Healthy", "", 30.0), ("p", "b", "Healthy", "", 30.0)])
    h.apply("e", [("p", "a", "Healthy", "", 30.0)])
    assert h.apply("d", [("p", "a", "Healthy", "", 30.0)])
    assert set(h.view()) == {("d", "p", "a"), ("e", "p", "a")}


def test_a_driver_keeps_at_most_the_cap_of_devices(clock: _Clock) -> None:
    """TestUpdateHealthInfoDeviceCap: devices beyond kubelet's 16384 per driver are ignored."""
    h = _node()
    h.apply("d", [("p", f"dev-{i}", "Healthy", "", 30.0) for i in range(MAX_DEVICES_PER_DRIVER + 5)])
    view = h.view()
    assert len(view) == MAX_DEVICES_PER_DRIVER == 16384
    assert ("d", "p", "dev-0") in view and ("d", "p", f"dev-{MAX_DEVICES_PER_DRIVER}") not in view
    h.apply("e", [("p", "a", "Healthy", "", 30.0)])
    assert ("e", "p", "a") in h.view(), "the cap is per driver"


def test_clearing_a_driver_drops_only_its_devices(clock: _Clock) -> None:
    """TestClearDriver, TestHandleWatchResourcesStream/StreamError (a stream that ends clears its driver)."""
    h = _node()
    h.apply("d", [("p", "a", "Unhealthy", "x", 30.0)])
    h.apply("e", [("p", "a", "Healthy", "", 30.0)])
    assert h.clear("d")
    assert not h.clear("d")
    assert set(h.view()) == {("e", "p", "a")}


# -- allocatedResourcesStatus ------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "want"), [
    pytest.param("", "", id="empty message"),
    pytest.param("Device is healthy", "Device is healthy", id="short message"),
    pytest.param("x" * 1024, "x" * 1024, id="message at exactly max length"),
    pytest.param("x" * 1025, "x" * 1021 + "...", id="message one character over max length"),
    pytest.param("x" * 5000, "x" * 1021 + "...", id="very long message"),
    pytest.param("ECC error count exceeded threshold on device GPU-0",
                 "ECC error count exceeded threshold on device GPU-0", id="message with meaningful content"),
    pytest.param("x" * 1024 + " extra content", "x" * 1021 + "...",
                 id="long message with meaningful content"),
])
def test_health_messages_are_cut_to_what_the_api_server_takes(message: str, want: str) -> None:
    """TestTruncateHealthMessage: kube-apiserver refuses a message over 1024 bytes, and with it the whole
    pod status write."""
    assert truncate_health_message(message) == want
    assert len(truncate_health_message(message).encode()) <= HEALTH_MESSAGE_MAX_LENGTH == 1024


def test_a_cut_never_splits_a_character() -> None:
    cut = truncate_health_message("é" * 1000)  # 2000 bytes
    assert cut.endswith("...") and len(cut.encode()) <= 1024
    assert cut == "é" * 510 + "..."


def _pod(request: str = "", claim_name: str = "c") -> dict[str, Any]:
    ref: dict[str, str] = {"name": "gpus"}
    if request:
        ref["request"] = request
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pu"},
            "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimName": claim_name}],
                     "containers": [{"name": "main", "resources": {"claims": [ref]}}]}}


def _claims(*devices: PreparedDevice) -> dict[str, ClaimInfo]:
    return {"gpus": ClaimInfo("cu", "c", "ns", pod_uids={"pu"}, drivers={"d": list(devices)})}


def _status(pod: dict[str, Any], claims: dict[str, ClaimInfo],
            health: dict[tuple[str, str, str], tuple[str, str]]) -> list[dict[str, Any]]:
    return allocated_resources_status(pod, claims, health).get("main", [])


def test_resource_health_entries_like_kubelets() -> None:
    """TestBuildResourceHealth: the first CDI ID, else driver/pool/device; no message when empty; every
    state; a device with no report is Unknown."""
    claims = _claims(PreparedDevice("p", "a", ["r"], ["d/gpu=a"]), PreparedDevice("p", "b", ["r"], []),
                     PreparedDevice("p", "c", ["r"], []))
    health = {("d", "p", "a"): ("Unhealthy", "hot"), ("d", "p", "b"): ("Healthy", "")}
    assert _status(_pod(), claims, health) == [{"name": "claim:gpus", "resources": [
        {"resourceID": "d/gpu=a", "health": "Unhealthy", "message": "hot"},
        {"resourceID": "d/p/b", "health": "Healthy"},
        {"resourceID": "d/p/c", "health": "Unknown"}]}]


def test_a_long_message_is_cut_in_the_pod_status() -> None:
    claims = _claims(PreparedDevice("p", "a", ["r"], ["d/gpu=a"]))
    (entry,) = _status(_pod(), claims, {("d", "p", "a"): ("Unhealthy", "y" * 2000)})
    assert entry["resources"][0]["message"] == "y" * 1021 + "..."


@pytest.mark.parametrize(("request_name", "reported"), [
    pytest.param("req-base/sub", True, id="Subrequest matches base name"),
    pytest.param("req-other/sub", False, id="Subrequest does not match different base name"),
    pytest.param("req-base", True, id="Base request matches base name"),
    pytest.param("", True, id="Empty request matches any device"),
])
def test_a_subrequest_is_reported_under_its_request(request_name: str, reported: bool) -> None:
    """TestUpdateAllocatedResourcesStatus_Subrequest: devices record their base request."""
    claims = _claims(PreparedDevice("p", "a", ["req-base"], ["d/gpu=a"]))
    (entry,) = _status(_pod(request_name), claims, {("d", "p", "a"): ("Healthy", "Device healthy")})
    want = [{"resourceID": "d/gpu=a", "health": "Healthy", "message": "Device healthy"}] if reported else []
    assert entry["resources"] == want


def test_entries_are_named_after_the_pod_claim_for_renamed_templated_and_shared_claims() -> None:
    """TestUpdateAllocatedResourcesStatus/Renamed claim, /Templated claim, /Claim with ShareID: the entry is
    ``claim:<pod claim name>`` whatever the ResourceClaim is called (generated from a template or not), and
    a device with a ShareID is reported by its device (CDI ID, else driver/pool/device) as any other."""
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "pu"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                    "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]},
           "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}]}}
    info = ClaimInfo("cu", "p-gpu-x7k2", "ns", pod_uids={"pu"},
                     drivers={"d": [PreparedDevice("pool", "dev-shared", [], [], share_id="share-1")]})
    status = allocated_resources_status(pod, {"gpu": info}, {("d", "pool", "dev-shared"): ("Healthy", "ok")})
    assert status == {"main": [{"name": "claim:gpu", "resources": [
        {"resourceID": "d/pool/dev-shared", "health": "Healthy", "message": "ok"}]}]}
