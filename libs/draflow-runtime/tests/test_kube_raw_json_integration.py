"""Raw JSON fields (RawExtension: opaque driver parameters) survive every write KubeClient makes.

The API server stores a RawExtension as the bytes the client sent and compares them byte for byte when it
validates a later write of the object. KubeClient sends canonical JSON (draflow_runtime.gojson), so no write
path turns an unchanged opaque config into a "changed" one: no ``422 field is immutable`` on a claim or
template, no generation bump on a DeviceClass whose spec did not change.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from draflow_runtime.errors import Invalid
from draflow_runtime.gojson import dumps
from draflow_runtime.kube import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, KubeClient

pytestmark = pytest.mark.integration

DRIVER = "gpu.draflow.example"
MANAGER = "draflow-test"

# Opaque parameters a user may write: keys in no particular order, nested objects and arrays, non-ASCII,
# characters Go escapes (<, >, &, U+2028), numbers Python and Go write differently (1.0, 1e-07, 1e+21).
PARAMETERS: dict[str, dict[str, Any]] = {
    "reference-driver": {"kind": "GpuConfig", "apiVersion": f"{DRIVER}/v1",
                         "sharing": {"timeSlicing": {"interval": "Short"}, "strategy": "TimeSlicing"}},
    "unicode-and-html": {"note": "caf\xe9 \u20ac \U0001f600 <b> & </b>\u2028", "z": ["\t", "\x01"]},
    "numbers": {"one": 1.0, "half": 0.5, "tiny": 1e-7, "huge": 1e21, "int": 7, "neg": -3, "list": [1.0, 2]},
}


def _config(parameters: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": parameters}}]


def _claim(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}],
            "config": _config(parameters),
        }},
    }


def _allocation(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {
        "results": [{"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}],
        "config": [{"source": "FromClaim", **_config(parameters)[0]}],
    }}


def _label(value: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"touched": value}}}


async def _merge(kube: KubeClient, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    # what the allocator does first: the delete-protection finalizer, a JSON merge patch
    body = {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": ["draflow.dev/test"]}}
    return await kube.patch(RESOURCE_CLAIMS, meta["name"], body, meta["namespace"], field_manager=MANAGER)


async def _strategic(kube: KubeClient, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    return await kube.patch(RESOURCE_CLAIMS, meta["name"], _label("strategic"), meta["namespace"],
                            patch_type="strategic", field_manager=MANAGER)


async def _json_patch(kube: KubeClient, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"touched": "json"}}]
    return await kube.patch(RESOURCE_CLAIMS, meta["name"], ops, meta["namespace"], patch_type="json",
                            field_manager=MANAGER)


async def _apply(kube: KubeClient, claim: dict[str, Any]) -> dict[str, Any]:
    meta = claim["metadata"]
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": meta["name"], "labels": {"touched": "apply"}}}
    return await kube.patch(RESOURCE_CLAIMS, meta["name"], body, meta["namespace"], patch_type="apply",
                            field_manager=MANAGER)


async def _replace(kube: KubeClient, claim: dict[str, Any]) -> dict[str, Any]:
    # read-modify-write of the whole object, spec included as it was read
    fresh = await kube.get(RESOURCE_CLAIMS, claim["metadata"]["name"], claim["metadata"]["namespace"])
    fresh["metadata"].setdefault("labels", {})["touched"] = "replace"
    return await kube.replace(RESOURCE_CLAIMS, fresh, field_manager=MANAGER)


WRITES: dict[str, Callable[[KubeClient, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "merge-patch-finalizer": _merge, "strategic-merge-patch": _strategic, "json-patch": _json_patch,
    "server-side-apply": _apply, "replace": _replace,
}


@pytest.mark.parametrize("params", PARAMETERS)
@pytest.mark.parametrize("write", WRITES)
async def test_writes_of_a_claim_leave_its_opaque_parameters_alone(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]], write: str, params: str,
) -> None:
    ns = await make_namespace("rawjson")
    created = await kube.create(RESOURCE_CLAIMS, _claim("c", PARAMETERS[params]), ns, field_manager=MANAGER)

    written = await WRITES[write](kube, created)  # raised Invalid "field is immutable" before the fix

    assert written["spec"] == created["spec"]
    assert written["spec"]["devices"]["config"][0]["opaque"]["parameters"] == PARAMETERS[params]


@pytest.mark.parametrize("params", PARAMETERS)
async def test_status_writes_leave_the_allocated_opaque_parameters_alone(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]], params: str,
) -> None:
    """The allocator's writes: status PUT with the allocation (config copied from the claim), then another
    pod added to reservedFor by a strategic-merge patch of the status and a server-side apply of it."""
    ns = await make_namespace("rawjson")
    claim = await kube.create(RESOURCE_CLAIMS, _claim("c", PARAMETERS[params]), ns, field_manager=MANAGER)
    pods = [{"resource": "pods", "name": f"p{i}", "uid": str(uuid.uuid4())} for i in range(3)]
    claim["status"] = {"allocation": _allocation(PARAMETERS[params]), "reservedFor": pods[:1]}
    allocated = await kube.replace(RESOURCE_CLAIMS, claim, subresource="status", field_manager=MANAGER)

    body = {"metadata": {"uid": claim["metadata"]["uid"]}, "status": {"reservedFor": pods[1:2]}}
    await kube.patch(RESOURCE_CLAIMS, "c", body, ns, patch_type="strategic", subresource="status",
                     field_manager=MANAGER)
    apply = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "status": {"reservedFor": pods[2:]}}
    await kube.patch(RESOURCE_CLAIMS, "c", apply, ns, patch_type="apply", subresource="status",
                     field_manager="draflow-test-apply")
    final = await _merge(kube, await kube.get(RESOURCE_CLAIMS, "c", ns))

    assert final["status"]["allocation"] == allocated["status"]["allocation"]
    assert final["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"] == PARAMETERS[params]
    assert {r["uid"] for r in final["status"]["reservedFor"]} == {p["uid"] for p in pods}


async def test_allocator_writes_work_on_a_claim_a_go_client_wrote_in_struct_order(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    """A claim created by a Go client (typed parameters: compact, keys in struct order, not sorted) takes
    the allocator's writes: finalizer merge patch, status PUT with the config copied into the allocation,
    strategic-merge patch of reservedFor (the one write that re-sorts raw JSON on the server)."""
    ns = await make_namespace("rawjson")
    struct_order = b'{"kind":"GpuConfig","apiVersion":"gpu.draflow.example/v1",' \
                   b'"sharing":{"strategy":"TimeSlicing"}}'
    body = _with_raw_parameters(_claim("c", {"x": "@"}), struct_order)
    await kube.request("POST", RESOURCE_CLAIMS.path(ns), body)
    claim = await _merge(kube, await kube.get(RESOURCE_CLAIMS, "c", ns))
    parameters = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert list(parameters) == ["kind", "apiVersion", "sharing"]  # kept as sent

    pods = [{"resource": "pods", "name": f"p{i}", "uid": str(uuid.uuid4())} for i in range(2)]
    claim["status"] = {"allocation": _allocation(parameters), "reservedFor": pods[:1]}
    await kube.replace(RESOURCE_CLAIMS, claim, subresource="status", field_manager=MANAGER)
    body = {"metadata": {"uid": claim["metadata"]["uid"]}, "status": {"reservedFor": pods[1:]}}
    final = await kube.patch(RESOURCE_CLAIMS, "c", body, ns, patch_type="strategic", subresource="status",
                             field_manager=MANAGER)

    assert final["spec"] == claim["spec"]
    assert final["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"] == parameters
    assert {r["uid"] for r in final["status"]["reservedFor"]} == {p["uid"] for p in pods}


async def test_server_side_apply_carries_characters_yaml_refuses(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]],
) -> None:
    """An apply patch is read as YAML: raw DEL, C1 controls and U+FFFE are "control characters are not
    allowed" there (400) and U+0085 turns into a space, though all are fine in JSON."""
    ns = await make_namespace("rawjson")
    parameters = {"del": "a\x7fb", "c1": "\x80\x9f", "nel": "line\x85break", "nonchar": "\ufffe\uffff"}
    body = {**_claim("c", parameters), "metadata": {"name": "c", "namespace": ns}}

    applied = await kube.patch(RESOURCE_CLAIMS, "c", body, ns, patch_type="apply", field_manager=MANAGER)

    assert applied["spec"]["devices"]["config"][0]["opaque"]["parameters"] == parameters
    assert (await _merge(kube, applied))["spec"] == applied["spec"]


@pytest.mark.parametrize("params", PARAMETERS)
async def test_template_with_opaque_parameters_can_be_labelled(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]], params: str,
) -> None:
    ns = await make_namespace("rawjson")
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t"}, "spec": {"spec": _claim("", PARAMETERS[params])["spec"]}}
    created = await kube.create(RESOURCE_CLAIM_TEMPLATES, template, ns, field_manager=MANAGER)
    for patch_type in ("merge", "strategic"):
        written = await kube.patch(RESOURCE_CLAIM_TEMPLATES, "t", _label(patch_type), ns,
                                   patch_type=patch_type, field_manager=MANAGER)
        assert written["spec"] == created["spec"]


@pytest.mark.parametrize("params", PARAMETERS)
async def test_labelling_a_device_class_does_not_change_its_spec(kube: KubeClient, params: str) -> None:
    name = f"rawjson-{uuid.uuid4().hex[:8]}.example.com"
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                     "config": [{"opaque": {"driver": DRIVER, "parameters": PARAMETERS[params]}}]}}
    created = await kube.create(DEVICE_CLASSES, body, field_manager=MANAGER)
    try:
        for patch_type in ("merge", "strategic"):
            written = await kube.patch(DEVICE_CLASSES, name, _label(patch_type), patch_type=patch_type,
                                       field_manager=MANAGER)
            # the generation counts spec changes: re-encoded parameters would have been one
            assert written["metadata"]["generation"] == created["metadata"]["generation"] == 1
            assert written["spec"] == created["spec"]
    finally:
        await kube.delete(DEVICE_CLASSES, name)


# -- the premise: what the API server does with raw JSON it would not have written itself --------------------

RAW_PARAMETERS = {
    "json.dumps default separators": (b'{"b": 1, "a": 2}', "merge"),
    "keys not sorted": (b'{"b":1,"a":2}', "strategic"),
    "HTML characters not escaped": (b'{"a":"<"}', "merge"),
    "number not as Go writes it": (b'{"a":1.0}', "strategic"),
}


@pytest.mark.parametrize(("raw", "patch_type"), RAW_PARAMETERS.values(), ids=RAW_PARAMETERS)
async def test_api_server_keeps_raw_bytes_as_sent_and_then_sees_them_change(
    kube: KubeClient, make_namespace: Callable[..., Awaitable[str]], raw: bytes, patch_type: str,
) -> None:
    """Why KubeClient must send canonical JSON: the same parameters in other bytes (sent here verbatim)
    make the next metadata-only patch fail."""
    ns = await make_namespace("rawjson")
    body = _with_raw_parameters(_claim("c", {"x": "@"}), raw)
    await kube.request("POST", RESOURCE_CLAIMS.path(ns), body, content_type="application/json")

    with pytest.raises(Invalid, match="field is immutable"):
        await kube.patch(RESOURCE_CLAIMS, "c", _label("x"), ns, patch_type=patch_type)  # type: ignore[arg-type]


def _with_raw_parameters(obj: dict[str, Any], raw: bytes) -> bytes:
    """``obj`` encoded, its placeholder parameters ``{"x":"@"}`` replaced by ``raw``."""
    doc = dumps(obj).replace(b'{"x":"@"}', raw)
    assert raw in doc
    return doc
