"""Canonical JSON (draflow_runtime.gojson): the bytes Go's encoding/json writes, a fixed point of the API
server's re-encodings. The expected bytes below were produced by Go 1.26's encoding/json (json.Marshal of the
value decoded the way the API server decodes raw JSON: integers as int64, other numbers as float64)."""

from __future__ import annotations

import json
import math
import random
import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import orjson
import pytest

from draflow_runtime.gojson import dumps, dumps_recursive, format_float, request_body, yaml_safe

GO_VECTORS: list[tuple[str, Any, bytes]] = [
    ("compact, keys sorted", {"b": 1, "a": [1, 2], "c": {"z": None, "y": True}},
     b'{"a":[1,2],"b":1,"c":{"y":true,"z":null}}'),
    ("keys sorted by code point / UTF-8 bytes", {"\ufeff": 1, "\U0001f600": 2, "Z": 3, "a": 4, "\xe9": 5},
     '{"Z":3,"a":4,"\xe9":5,"\ufeff":1,"\U0001f600":2}'.encode()),
    ("HTML characters escaped", {"expr": "a<b && c>d"}, b'{"expr":"a\\u003cb \\u0026\\u0026 c\\u003ed"}'),
    ("line and paragraph separators escaped", "x\u2028y\u2029z", b'"x\\u2028y\\u2029z"'),
    ("non-ASCII as UTF-8, not \\u escapes", {"name": "caf\xe9 \u20ac \U0001f600"},
     '{"name":"caf\xe9 \u20ac \U0001f600"}'.encode()),
    ("short escapes", '"\\\b\f\n\r\t/', b'"\\"\\\\\\b\\f\\n\\r\\t/"'),
    ("other control characters as lower-case \\u00xx", "\x00\x01\x1f\x7f", b'"\\u0000\\u0001\\u001f\x7f"'),
    ("integral float", 1.0, b"1"),
    ("float", 0.1, b"0.1"),
    ("small float in fixed notation", 1e-6, b"0.000001"),
    ("smaller float in exponent notation", 1.5e-7, b"1.5e-7"),
    ("two-digit negative exponent", 1e-10, b"1e-10"),
    ("large float in fixed notation", 1e20, b"100000000000000000000"),
    ("larger float in exponent notation", 1e21, b"1e+21"),
    ("shortest digits", 123456.789, b"123456.789"),
    ("largest float", 1.7976931348623157e308, b"1.7976931348623157e+308"),
    ("smallest float", 5e-324, b"5e-324"),
    ("int64 bounds", [2**63 - 1, -(2**63)], b"[9223372036854775807,-9223372036854775808]"),
    ("integer beyond int64 becomes float64", 2**63, b"9223372036854776000"),
    ("negative integer beyond int64", -(2**63) - 1, b"-9223372036854776000"),
    ("tuple as array", (1, "a"), b'[1,"a"]'),
    ("empty containers", {"a": {}, "b": []}, b'{"a":{},"b":[]}'),
]


@pytest.mark.parametrize(("value", "expected"), [(v, e) for _, v, e in GO_VECTORS],
                         ids=[name for name, _, _ in GO_VECTORS])
def test_bytes_are_what_go_writes(value: Any, expected: bytes) -> None:
    assert dumps(value) == expected


def test_negative_zero_is_written_as_the_api_server_reads_it_back() -> None:
    # Go writes float64 -0 as "-0", which the API server's decoding turns into the integer 0 ("0"):
    # "0" is the form that survives both.
    assert dumps(-0.0) == b"0"
    assert dumps({"x": [-0.0]}) == b'{"x":[0]}'


def test_opaque_driver_parameters() -> None:
    params = {"kind": "GpuConfig", "apiVersion": "gpu.draflow.example/v1",
              "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Short"}}}
    assert dumps({"opaque": {"driver": "gpu.draflow.example", "parameters": params}}) == (
        b'{"opaque":{"driver":"gpu.draflow.example","parameters":{"apiVersion":"gpu.draflow.example/v1",'
        b'"kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}}}}')


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, {"x": [math.nan]}])
def test_nan_and_infinity_are_rejected(bad: Any) -> None:
    with pytest.raises(ValueError):
        dumps(bad)


@pytest.mark.parametrize("bad", [{1: "a"}, {"a": {None: 1}}, {"a": {1.5: 1}}])
def test_non_string_keys_are_rejected(bad: Any) -> None:
    with pytest.raises(TypeError, match="keys must be strings"):
        dumps(bad)


@pytest.mark.parametrize("bad", [{"a": {1, 2}}, [object()], b"bytes"])
def test_values_without_a_json_form_are_rejected(bad: Any) -> None:
    with pytest.raises(TypeError, match="no JSON form"):
        dumps(bad)


@pytest.mark.parametrize("value", ["\ud800", {"k": "a\udfff"}, {"k": ["x", 1.5, "\ud83d"]}])
def test_lone_surrogates_are_rejected(value: Any) -> None:
    with pytest.raises(ValueError):
        dumps(value)


def test_mappings_other_than_dict_are_encoded() -> None:
    assert dumps(MappingProxyType({"b": 1, "a": 2})) == b'{"a":2,"b":1}'


# -- properties over generated values ---------------------------------------------------------------------

_CHARS = [chr(i) for i in range(0x20)] + list('<>&"\\/aZ\x7f \xe9\u20ac\U0001f600\u2028\u2029\ufeff\xa0')
_CHARS += ["\x85", "\x9f", "\ufffe"]  # fine in JSON, not in YAML


def _value(rnd: random.Random, depth: int = 0, floats: bool = True) -> Any:
    def text() -> str:
        return "".join(rnd.choice(_CHARS) for _ in range(rnd.randint(0, 6)))

    kind = rnd.randint(0, 6 if depth < 3 else 3)
    if kind == 0:
        return text()
    if kind == 1:
        return rnd.choice([rnd.randint(-100, 100), rnd.randint(-(2**63), 2**63 - 1),
                           rnd.randint(2**63, 2**70) if floats else 7])
    if kind == 2:
        if not floats:
            return rnd.choice([True, False, None])
        bits = struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0]
        scaled = rnd.uniform(-1, 1) * 10 ** rnd.randint(-30, 30)
        return rnd.choice([bits if math.isfinite(bits) else 0.5, scaled, float(rnd.randint(-(10**6), 10**6)),
                           1e-6, 9.999999e-7, 1e21, 2.0**64])
    if kind == 3:
        return rnd.choice([True, False, None])
    if kind in (4, 5):
        return {text(): _value(rnd, depth + 1, floats) for _ in range(rnd.randint(0, 4))}
    return [_value(rnd, depth + 1, floats) for _ in range(rnd.randint(0, 4))]


def _values(seed: int, n: int, floats: bool) -> list[Any]:
    rnd = random.Random(seed)
    return [_value(rnd, floats=floats) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_encoding_is_a_fixed_point_of_decoding_and_encoding_again(seed: int) -> None:
    for value in _values(seed, 500, floats=True):
        once = dumps(value)
        assert dumps(orjson.loads(once)) == once, value
        assert _as_float64(json.loads(once)) == _as_float64(value), value


def _as_float64(value: Any) -> Any:
    """Numbers as the float64 Go reads them into (integers beyond int64 are written as the nearest one)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, Mapping):
        return {k: _as_float64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_float64(v) for v in value]
    return value


@pytest.mark.parametrize("seed", range(4))
def test_fast_path_and_recursive_encoder_agree(seed: int) -> None:
    for value in _values(seed, 500, floats=False):
        assert dumps(value) == dumps_recursive(value), value


@pytest.mark.parametrize(("value", "expected"), [
    (0.5, "0.5"), (-2.5, "-2.5"), (1e-5, "0.00001"), (3e16, "30000000000000000"), (-1e-7, "-1e-7"),
    (1.25e-300, "1.25e-300"), (9.999999999999999e20, "999999999999999900000"),
])
def test_format_float(value: float, expected: str) -> None:
    assert format_float(value) == expected
    assert float(expected) == value


def test_yaml_safe_escapes_what_yaml_refuses_or_folds_and_nothing_else() -> None:
    text = "del\x7f c1\x80\x85\x9f nonchar\ufffe\uffff kept\xa0\ufffd\xe9\u20ac\U0001f600\t"
    encoded = yaml_safe(dumps({"t": text}))
    assert encoded == (b'{"t":"del\\u007f c1\\u0080\\u0085\\u009f nonchar\\ufffe\\uffff kept'
                       + "\xa0\ufffd\xe9\u20ac\U0001f600".encode() + b'\\t"}')
    assert orjson.loads(encoded) == {"t": text}


@pytest.mark.parametrize("seed", range(2))
def test_yaml_safe_keeps_the_value(seed: int) -> None:
    for value in _values(seed, 300, floats=True):
        assert orjson.loads(yaml_safe(dumps(value))) == orjson.loads(dumps(value)), value


def test_request_body_encodes_once() -> None:
    assert request_body(b'{"a": 1}') == b'{"a": 1}'
    assert request_body(bytearray(b"[]")) == b"[]"
    assert request_body({"a": "<\x85"}) == b'{"a":"\\u003c\xc2\x85"}'
    assert request_body({"a": "<\x85"}, yaml=True) == b'{"a":"\\u003c\\u0085"}'
