"""The DRA CEL environment: device variable, Kubernetes libraries, errors, cache and limits."""

import pytest

from structured_allocator.core.cel_env import (
    CelCache,
    CelCompileError,
    CelRuntimeError,
    compile_selector,
    device_input,
)

DRIVER = "gpu.example.com"
DEVICE = device_input(
    DRIVER,
    {
        "name": "gpu-0",
        "attributes": {
            "model": {"string": "a100"},
            "numa": {"int": 1},
            "mig": {"bool": True},
            "driverVersion": {"version": "1.11.0"},
            "topo.example.com/socket": {"int": 0},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    },
)
A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.driver == "{DRIVER}"', True),
        (f'{A}.model == "a100" && {A}.numa == 1 && {A}.mig', True),
        ('device.attributes["topo.example.com"].socket == 0', True),
        ("device.allowMultipleAllocations", False),
        ('"x" in device.attributes["other.example"]', False),
        ('size(device.capacity["other.example"]) == 0', True),
        (f'{C}.memory.compareTo(quantity("40Gi")) > 0', True),
        (f'{C}.memory.isGreaterThan(quantity("80Gi"))', False),
        (f'{C}.memory.isLessThan(quantity("81Gi"))', True),
        (f'{C}.memory == quantity("81920Mi")', True),
        ('quantity("1.5").add(quantity("500m")).asInteger() == 2', True),
        ('quantity("1k").sub(1).asInteger() == 999 && quantity("1Ki").add(1).isInteger()', True),
        ('quantity("0.5").asApproximateFloat() == 0.5 && quantity("-1").sign() == -1', True),
        ('isQuantity("1Gi") && !isQuantity("1Qi")', True),
        (f'{A}.driverVersion.isGreaterThan(semver("1.10.0"))', True),
        (f'{A}.driverVersion.compareTo(semver("1.11.0")) == 0', True),
        (f'{A}.driverVersion.isLessThan(semver("2.0.0")) && {A}.driverVersion.minor() == 11', True),
        ('semver("v1.2", true).major() == 1 && isSemver("1.0.0") && !isSemver("1.0")', True),
        (f'cel.bind(a, {A}, a.model == "a100" && a.numa == 1)', True),
        ('"A100-sxm".lowerAscii().startsWith("a100") && "a,b".split(",").size() == 2', True),
        ('"abc".indexOf("c") == 2 && [1, 2, 3].indexOf(2) == 1 && [1, 2, 1].lastIndexOf(1) == 2', True),
        ("[1, 2, 3].isSorted() && ![3, 1].isSorted() && [1, 2].sum() == 3", True),
        ("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3", True),
        ('"gpu-12".find("[0-9]+") == "12" && "a1b22".findAll("[0-9]+") == ["1", "22"]', True),
        (
            "sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 5])"
            " && sets.equivalent([1, 2], [2, 1])",
            True,
        ),
        (f'{A}.exists(k, k == "numa")', True),
    ],
)
def test_selector_results(expression: str, expected: bool) -> None:
    assert compile_selector(expression).matches(DEVICE) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (f"{A}.missing == 1", "no such key: missing"),
        ('device.attributes["other.example"].x == 1', "no such key: x"),
        ("device.driver", "could not be converted to bool"),
        (f'{A}.model.compareTo(quantity("1")) == 0', "No matching overloads"),
        ('quantity("nope").sign() == 1', "quantity parse error"),
        ("[].min() == 1", "min called on empty list"),
    ],
)
def test_runtime_errors(expression: str, message: str) -> None:
    with pytest.raises(CelRuntimeError) as info:
        compile_selector(expression).matches(DEVICE)
    assert message in info.value.message


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("device.attributes[", "compilation failed"),
        ('"a".compareTo(quantity("1")) == 0', "found no matching overload"),
        ("1 + 1", "must evaluate to bool or the unknown type"),
        ("undeclared == 1", "undeclared reference"),
        ("x" * (10 * 1024 + 1), "expression too long"),
    ],
)
def test_compile_errors(expression: str, message: str) -> None:
    with pytest.raises(CelCompileError) as info:
        compile_selector(expression)
    assert message in info.value.message


def test_cache_is_lru_and_caches_errors() -> None:
    cache = CelCache(max_entries=2)
    first = cache.get_or_compile("true")
    assert cache.get_or_compile("true") is first
    with pytest.raises(CelCompileError):
        cache.get_or_compile("1 +")
    with pytest.raises(CelCompileError):
        cache.get_or_compile("1 +")
    cache.get_or_compile("false")
    assert len(cache) == 2
    assert cache.get_or_compile("true") is not first  # evicted, recompiled


def test_bad_version_attribute_is_runtime_error() -> None:
    with pytest.raises(ValueError, match="attribute v"):
        device_input(DRIVER, {"name": "d", "attributes": {"v": {"version": "not-a-version"}}})
