"""KubeClient's field validation against a real kube-apiserver: with ``DRAFLOW_KUBE_FIELD_VALIDATION=Strict``
(what draflow_testenv sets for every service and test client) a write carrying a field the server does not
know fails loudly; without it the server drops the field and answers success."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from draflow_runtime.errors import ApiError, BadRequest, Invalid
from draflow_runtime.kube import FIELD_VALIDATION_ENV, RESOURCE_CLAIMS, KubeClient
from draflow_testenv.environment import Environment

pytestmark = pytest.mark.integration

MANAGER = "draflow-test"
MakeNamespace = Callable[..., Awaitable[str]]


def claim(name: str, **exactly_extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", **exactly_extra}},
        ]}},
    }


@pytest_asyncio.fixture(loop_scope="session")
async def lenient(testenv: Environment, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubeClient]:
    """A client as a service runs without the setting: no fieldValidation sent."""
    monkeypatch.delenv(FIELD_VALIDATION_ENV, raising=False)
    client = await KubeClient.from_kubeconfig(str(testenv.kubeconfig))
    assert client.field_validation is None
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def strict(testenv: Environment, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[KubeClient]:
    """A client made with ``DRAFLOW_KUBE_FIELD_VALIDATION=strict`` in the environment (any case)."""
    monkeypatch.setenv(FIELD_VALIDATION_ENV, "strict")
    client = await KubeClient.from_kubeconfig(str(testenv.kubeconfig))
    assert client.field_validation == "Strict"
    try:
        yield client
    finally:
        await client.close()


async def test_the_testenv_hands_out_a_strict_client_and_runs_services_strict(
    kube: KubeClient, testenv: Environment,
) -> None:
    assert kube.field_validation == "Strict"
    assert testenv.service_env()[FIELD_VALIDATION_ENV] == "Strict"


async def test_an_unknown_field_on_create_fails_with_strict_and_vanishes_without(
    strict: KubeClient, lenient: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("fieldvalidation")
    with pytest.raises(BadRequest, match="allocatoinMode"):
        await strict.create(RESOURCE_CLAIMS, claim("c", allocatoinMode="All"), ns, field_manager=MANAGER)

    created = await lenient.create(RESOURCE_CLAIMS, claim("c", allocatoinMode="All"), ns,
                                   field_manager=MANAGER)
    exactly = created["spec"]["devices"]["requests"][0]["exactly"]
    assert "allocatoinMode" not in exactly
    assert exactly["deviceClassName"] == "gpu.example.com"


async def test_an_unknown_field_on_patch_apply_and_status_fails_with_strict(
    strict: KubeClient, lenient: KubeClient, make_namespace: MakeNamespace,
) -> None:
    ns = await make_namespace("fieldvalidation")
    await strict.create(RESOURCE_CLAIMS, claim("c"), ns, field_manager=MANAGER)

    writes: list[tuple[str, str, dict[str, Any]]] = [  # a patch answers 422, create and update 400
        ("merge", "labelz", {"metadata": {"labelz": {"a": "b"}}}),
        ("strategic", "labelz", {"metadata": {"labelz": {"a": "b"}}}),
        ("json", "labelz", [{"op": "add", "path": "/metadata/labelz", "value": {"a": "b"}}]),  # type: ignore[list-item]
    ]
    for patch_type, field, body in writes:
        with pytest.raises((BadRequest, Invalid), match=field):
            await strict.patch(RESOURCE_CLAIMS, "c", body, ns, patch_type=patch_type,  # type: ignore[arg-type]
                               field_manager=MANAGER)
        await lenient.patch(RESOURCE_CLAIMS, "c", body, ns, patch_type=patch_type,  # type: ignore[arg-type]
                            field_manager=MANAGER)

    # Server-side apply is loud either way: without the setting the server answers 500 (field not declared
    # in schema) instead of dropping it.
    for client in (strict, lenient):
        with pytest.raises(ApiError, match="countt"):
            await client.patch(RESOURCE_CLAIMS, "c", claim("c", countt=2), ns, patch_type="apply",
                               field_manager=MANAGER)

    status = {"status": {"devicez": []}}
    with pytest.raises((BadRequest, Invalid), match="devicez"):
        await strict.patch(RESOURCE_CLAIMS, "c", status, ns, subresource="status", field_manager=MANAGER)
    await lenient.patch(RESOURCE_CLAIMS, "c", status, ns, subresource="status", field_manager=MANAGER)

    current = await strict.get(RESOURCE_CLAIMS, "c", ns)
    current["spec"]["devices"]["requests"][0]["exactly"]["countt"] = 3
    with pytest.raises(BadRequest, match="countt"):
        await strict.replace(RESOURCE_CLAIMS, current, field_manager=MANAGER)
    replaced = await lenient.replace(RESOURCE_CLAIMS, current, field_manager=MANAGER)
    assert "countt" not in replaced["spec"]["devices"]["requests"][0]["exactly"]
    assert "labelz" not in replaced["metadata"]
    assert "devicez" not in (replaced.get("status") or {})


def test_an_unknown_setting_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from draflow_runtime.kube import field_validation_from_env

    monkeypatch.setenv(FIELD_VALIDATION_ENV, "Strikt")
    with pytest.raises(ValueError, match=FIELD_VALIDATION_ENV):
        field_validation_from_env()
    monkeypatch.setenv(FIELD_VALIDATION_ENV, "")
    assert field_validation_from_env() is None
