"""Canonical JSON: the bytes Go's ``encoding/json`` writes for the same value, so the API server keeps them.

Why it matters: a ``runtime.RawExtension`` (``config[].opaque.parameters`` in ResourceClaims, their
templates and DeviceClasses, ``status.devices[].data``) is stored as the exact bytes a client sent. Every
later write of the object makes the API server re-encode it, and its validation compares the raw bytes
(``apiequality.Semantic.DeepEqual`` on ``Raw``). If the re-encoded bytes differ from the stored ones, an
immutable field looks changed: a JSON merge patch of ``metadata.finalizers`` fails with
``422 spec: field is immutable``. Two re-encodings happen on the server:

- plain JSON paths (create, update, merge and JSON patch) compact the stored bytes (``json.Compact``
  with HTML escaping): whitespace goes, ``<``, ``>``, ``&``, U+2028 and U+2029 become ``\\u003c`` ...;
- strategic merge patch and server-side apply decode the bytes into Go maps (integers as int64, other
  numbers as float64) and marshal them again: keys sorted, numbers in Go's float64 formatting.

:func:`dumps` produces the fixed point of both: no whitespace, keys sorted (by code point, the order of
their UTF-8 bytes, as Go sorts map keys), strings as UTF-8 with Go's escapes (``\\"``, ``\\\\``, ``\\b``,
``\\f``, ``\\n``, ``\\r``, ``\\t``, ``\\u00XX`` for other control characters, ``\\u003c``, ``\\u003e``,
``\\u0026``, ``\\u2028``, ``\\u2029``), integers in int64 range as written, every other number as Go writes
a float64 (``1.0`` -> ``1``, ``1e-07`` -> ``1e-7``, ``1e21`` -> ``1e+21``, ``-0.0`` -> ``0``; an integer
beyond int64 -> the float64 nearest to it). NaN and infinities raise ``ValueError`` (not JSON).

Objects without floats and big integers (nearly all) go through orjson; the rest through a small
recursive encoder. Both give the same bytes (the unit tests check it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["dumps", "dumps_recursive", "format_float", "go_escapes", "request_body", "yaml_safe"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# Characters Go escapes but orjson and Python's json module leave alone; they only ever occur inside
# strings in the output, so replacing them in the encoded bytes is safe.
_GO_ONLY_ESCAPES: tuple[tuple[bytes, bytes], ...] = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def dumps(obj: Any) -> bytes:
    """``obj`` (dicts with string keys, lists/tuples, str, int, float, bool, None) as canonical JSON.

    Raises ``TypeError`` for other types or non-string keys and ``ValueError`` for NaN/infinity or
    strings that are not valid Unicode (lone surrogates).
    """
    if not _orjson_safe(obj):
        return dumps_recursive(obj)
    try:
        return go_escapes(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS))
    except orjson.JSONEncodeError as exc:
        raise ValueError(str(exc)) from exc


def dumps_recursive(obj: Any) -> bytes:
    """:func:`dumps` without the orjson fast path (what it uses for floats and big integers)."""
    parts: list[str] = []
    _encode(obj, parts)
    try:
        return go_escapes("".join(parts).encode())
    except UnicodeEncodeError as exc:
        raise ValueError(f"string is not valid Unicode: {exc}") from exc


def go_escapes(data: bytes) -> bytes:
    """JSON ``data`` (orjson's or Python's) with the escapes Go's ``encoding/json`` adds on top: ``<``, ``>``,
    ``&``, U+2028, U+2029 as ``\\u`` escapes (HTML-safe). Key order and everything else are left as they are
    (the kubelet checkpoint writes its struct fields in order through this)."""
    for raw, escaped in _GO_ONLY_ESCAPES:
        data = data.replace(raw, escaped)
    return data


# Characters JSON allows raw in strings but YAML does not (outside c-printable: DEL, the C1 controls,
# U+FFFE, U+FFFF; U+0085 NEL is printable but read as a line break). In UTF-8 none of these byte
# sequences can occur inside another character, and outside strings JSON has only printable ASCII.
_YAML_UNSAFE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xef\xbf[\xbe\xbf]")


def yaml_safe(data: bytes) -> bytes:
    """Canonical JSON ``data`` that a YAML parser reads as the same value: the characters YAML refuses
    (``control characters are not allowed``) or folds (U+0085 becomes a space) as ``\\u`` escapes. For
    server-side apply bodies (``application/apply-patch+yaml``), which the API server reads as YAML."""
    return _YAML_UNSAFE.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data)


def request_body(body: Any, *, yaml: bool = False) -> bytes:
    """The bytes of an API request body: ``bytes``/``bytearray`` as they are (already encoded), anything
    else as canonical JSON (``yaml``: for a server-side apply, :func:`yaml_safe` as well)."""
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    data = dumps(body)
    return yaml_safe(data) if yaml else data


def _orjson_safe(obj: Any) -> bool:
    """True when orjson writes ``obj`` exactly as Go would (before the HTML escapes): only plain dicts
    with string keys, lists, strings, booleans, None and integers in int64 range. Anything else (floats,
    big integers, tuples, other mappings, types JSON has no form for) goes to the recursive encoder,
    which also raises the errors. Exact type checks, no isinstance: this runs on every request body."""
    kind = type(obj)
    if kind is dict:
        for key in obj:
            if type(key) is not str:
                return False
        values: Any = obj.values()
    elif kind is list:
        values = obj
    else:
        return kind is str or kind is bool or obj is None or (kind is int and _INT64_MIN <= obj <= _INT64_MAX)
    for value in values:
        kind = type(value)
        if kind is str or kind is bool or value is None:
            continue
        if kind is int:
            if not _INT64_MIN <= value <= _INT64_MAX:
                return False
        elif kind is dict or kind is list:
            if not _orjson_safe(value):
                return False
        else:
            return False
    return True


def _encode(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(json.encoder.encode_basestring(value))  # type: ignore[attr-defined]
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)) if _INT64_MIN <= value <= _INT64_MAX else format_float(float(value)))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(value)):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
            if i:
                out.append(",")
            out.append(json.encoder.encode_basestring(key))  # type: ignore[attr-defined]
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} has no JSON form")


def format_float(value: float) -> str:
    """``value`` as Go's ``encoding/json`` writes a float64 (ES6 number-to-string): the shortest digits
    that read back to ``value``, fixed notation for 1e-6 <= |value| < 1e21, else ``d.ddde±x``.
    ``-0.0`` gives ``0`` (what the API server's number decoding turns ``-0`` into)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"
    # repr() is the shortest round-tripping decimal, the same digits Go's FormatFloat(f, _, -1, 64) picks.
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    prefix = "-" if sign else ""
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        sci = len(digits) - 1 + exponent
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'+' if sci >= 0 else '-'}{abs(sci)}"
    if exponent >= 0:
        return prefix + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    return f"{prefix}0.{'0' * -point}{digits}"
