"""The DRA CEL environment for device selectors, on top of ``cel-expr-python`` (cel-cpp).

One variable, ``device`` (``driver``, ``attributes[domain][id]``, ``capacity[domain][id]`` as Quantity,
``allowMultipleAllocations``; :func:`device_input` builds it from a slice's device), cel-cpp's ``strings``
extension (v4, a superset of cel-go Strings v2) and ``cel.bind``, plus the Kubernetes libraries DRA
selectors use in practice (quantity, semver, lists, regex, sets), implemented in :mod:`.cel_lib`.
:func:`env` builds the environment once; :func:`compile_selector` / :class:`CelCache` compile against it
and :class:`CompiledSelector` evaluates.

How the awkward parts are matched (see the module functions for details):

* Unknown attribute/capacity domains read as an empty map: cel-cpp has no default-valued map, so a
  "key not found" error for a domain the device does not have is answered by adding that domain as an
  empty map and evaluating again (at most :data:`_MAX_DOMAIN_RETRIES` times). The only observable
  difference from upstream: after such a retry, ``"<domain>" in device.attributes`` is true.
* Cost: expressions longer than 10 KiB are rejected at compile time, as upstream. At run time an
  evaluation has the budget of :mod:`.cel_cost` (cel-cpp's 10,000 comprehension iterations, and the
  Kubernetes cost of every call of a Python-implemented library function against the apiserver's
  limit of 1,000,000); running out of it is a :class:`CelRuntimeError` like any other, and so is any
  exception cel-cpp raises instead of returning an error value. There is no static nesting limit
  (upstream's allocator has none either).
* cel-cpp's checker rejects comprehensions over ``dyn`` values (``device.attributes[d].exists(...)``),
  which cel-go accepts: such expressions are compiled without the type checker (runtime typing).
* ``device.<unknown field>`` is a runtime error here (``device`` is declared ``map(string, dyn)``),
  a compile error upstream.
* Not provided: URLs, IP, CIDR, Format, Authz libraries, optional types, two-variable comprehensions,
  ``ext.Lists`` (``sort``, ``distinct``, ...), ``mul``/``div`` on quantities, list-type attributes'
  ``includes()`` (DRAListTypeAttributes, alpha/off).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings

from . import cel_lib
from .cel_cost import COST_EXCEEDED, ITERATION_LIMIT, meter
from .cel_lib import quantity_msg, semver_msg
from .cel_regex import RegexError, compile_regex, literal_patterns
from .quantity import parse_quantity
from .semver import SemverError, parse_semver

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "CelCache",
    "CelCompileError",
    "CelRuntimeError",
    "CompiledSelector",
    "device_input",
    "env",
]

MAX_EXPRESSION_LENGTH = 10 * 1024
_MAX_DOMAIN_RETRIES = 8
_ITERATIONS_EXCEEDED = "Iteration budget exceeded"  # cel-cpp's message
_ITERATIONS_MESSAGE = f"{COST_EXCEEDED} (more than {ITERATION_LIMIT} comprehension iterations)"


class CelCompileError(Exception):
    """The expression does not compile in the DRA environment (or is too long / too costly)."""

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(message)
        self.expression = expression
        self.message = message


class CelRuntimeError(Exception):
    """Evaluating a selector failed (missing attribute, type mismatch, non-bool result...)."""

    def __init__(self, expression: str, message: str) -> None:
        super().__init__(message)
        self.expression = expression
        self.message = message


# -- the environment --------------------------------------------------------------------------------

_ENV: Any = None


def env() -> Any:
    """The DRA CEL environment (built once): the ``device`` variable, the strings and bindings extensions
    and the Kubernetes libraries of :mod:`.cel_lib`."""
    global _ENV
    if _ENV is None:
        _ENV = cel.NewEnv(
            cel_lib.POOL,
            variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
            extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), cel_lib.lists_extension()],
            functions=cel_lib.functions(),
        )
    return _ENV


# -- device input -----------------------------------------------------------------------------------


def _attr_value(attr: Mapping[str, Any]) -> Any:
    if "int" in attr:
        return int(attr["int"])
    if "bool" in attr:
        return bool(attr["bool"])
    if "string" in attr:
        return str(attr["string"])
    if "version" in attr:
        return semver_msg(parse_semver(attr["version"]))
    if "ints" in attr:
        return [int(x) for x in attr["ints"]]
    if "bools" in attr:
        return [bool(x) for x in attr["bools"]]
    if "strings" in attr:
        return [str(x) for x in attr["strings"]]
    if "versions" in attr:
        return [semver_msg(parse_semver(x)) for x in attr["versions"]]
    raise ValueError("unsupported attribute value")


def split_qualified_name(name: str, driver: str) -> tuple[str, str]:
    """``domain/id`` → (domain, id); a name without a domain belongs to the driver's domain."""
    domain, sep, ident = name.partition("/")
    if not sep:
        return driver, name
    return domain, ident


def device_input(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The ``device`` variable for one ResourceSlice device (a dict as served by the API server).

    Raises :class:`ValueError` for a malformed attribute (e.g. an unparsable version), which the caller
    reports as a CEL runtime error, as upstream does.
    """
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in (device.get("attributes") or {}).items():
        domain, ident = split_qualified_name(name, driver)
        try:
            attributes.setdefault(domain, {})[ident] = _attr_value(attr)
        except (SemverError, ValueError) as exc:
            raise ValueError(f"attribute {name}: {exc}") from exc
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in (device.get("capacity") or {}).items():
        domain, ident = split_qualified_name(name, driver)
        capacity.setdefault(domain, {})[ident] = quantity_msg(parse_quantity(cap["value"]))
    return {
        "driver": driver,
        "allowMultipleAllocations": bool(device.get("allowMultipleAllocations", False)),
        "attributes": attributes,
        "capacity": capacity,
    }


# -- compile + evaluate -----------------------------------------------------------------------------

class CompiledSelector:
    """A compiled selector expression; :meth:`matches` evaluates it for one device input."""

    __slots__ = ("_expr", "expression")

    def __init__(self, expression: str, expr: Any) -> None:
        self.expression = expression
        self._expr = expr

    def matches(self, data: dict[str, Any]) -> bool:
        """Evaluate against a :func:`device_input` dict. Raises :class:`CelRuntimeError`."""
        result = self.evaluate(data)
        rtype = result.type()
        if rtype == cel.Type.BOOL:
            return bool(result.value())
        raise CelRuntimeError(
            self.expression, f"CEL result of type {rtype.name()} could not be converted to bool"
        )

    def evaluate(self, data: dict[str, Any]) -> Any:
        """Evaluate against a :func:`device_input` dict and return the cel-cpp result, never an error
        value: an unknown attribute/capacity domain reads as an empty map (the evaluation is retried
        with it added, within one cost budget); any other error raises :class:`CelRuntimeError`."""
        meter().reset()  # one budget for the evaluation, unknown-domain retries included
        for _ in range(_MAX_DOMAIN_RETRIES + 1):
            result = self._eval(data)
            if result.type() != cel.Type.ERROR:
                return result
            message = str(result.value())
            if _ITERATIONS_EXCEEDED in message:
                raise CelRuntimeError(self.expression, _ITERATIONS_MESSAGE)
            domain = _missing_key(message)
            if domain is None or (domain in data["attributes"] and domain in data["capacity"]):
                raise CelRuntimeError(self.expression, _clean_error(message))
            # An unknown domain reads as an empty map: add it where it is missing (the device may have
            # attributes of the domain but no capacity, or the other way round) and evaluate again.
            data = dict(data)
            data["attributes"] = {domain: {}, **data["attributes"]}
            data["capacity"] = {domain: {}, **data["capacity"]}
        raise CelRuntimeError(self.expression, "too many unknown domains")

    def _eval(self, data: dict[str, Any]) -> Any:
        """One cel-cpp evaluation; whatever goes wrong in it is a :class:`CelRuntimeError`."""
        try:
            result = self._expr.eval(data={"device": data})
        except RuntimeError as exc:
            if _ITERATIONS_EXCEEDED in str(exc):
                raise CelRuntimeError(self.expression, _ITERATIONS_MESSAGE) from exc
            raise CelRuntimeError(self.expression, "evaluation failed: " + _clean_error(str(exc))) from exc
        except Exception as exc:  # cel-cpp or a library function failing outside the error-value path
            raise CelRuntimeError(self.expression, f"evaluation failed: {exc!r}") from exc
        spent = meter()
        if spent.exceeded:
            raise CelRuntimeError(self.expression, f"{COST_EXCEEDED} (limit {spent.limit})")
        return result


_KEY_RE = re.compile(r'Key not found in map\s*:\s*"(.*)"\s*$')


def _missing_key(message: str) -> str | None:
    m = _KEY_RE.search(message)
    return m.group(1) if m else None


def _clean_error(message: str) -> str:
    m = _KEY_RE.search(message)
    if m:
        return f"no such key: {m.group(1)}"
    return re.sub(r"^[A-Z_]+: ", "", message)


def compile_selector(expression: str) -> CompiledSelector:
    """Compile one selector; raises :class:`CelCompileError` with upstream-like messages."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(
            expression,
            f"expression too long ({len(expression)} bytes, limit {MAX_EXPRESSION_LENGTH})",
        )
    try:
        expr = env().compile(expression)
    except RuntimeError as exc:
        msg = re.sub(r"^[A-Z_]+: ", "", str(exc)).removesuffix(" [INVALID_ARGUMENT]")
        if "cannot be the range of a comprehension" not in msg:
            raise CelCompileError(expression, "compilation failed: " + msg) from exc
        # cel-cpp's checker refuses a comprehension over a `dyn` value (e.g. device.attributes[d]),
        # which cel-go accepts; such expressions are compiled unchecked and typed at runtime.
        try:
            expr = env().compile(expression, disable_check=True)
        except RuntimeError as exc2:
            raise CelCompileError(expression, "compilation failed: " + str(exc2)) from exc2
    rtype = expr.return_type()
    if rtype != cel.Type.BOOL and rtype != cel.Type.DYN:
        raise CelCompileError(expression, f"must evaluate to bool or the unknown type, not {rtype.name()}")
    _check_regex_literals(expression)
    return CompiledSelector(expression, expr)


def _check_regex_literals(expression: str) -> None:
    """A constant pattern of ``matches``/``find``/``findAll`` that Go's ``regexp`` rejects is a compile
    error, as upstream (the literal is decoded by CEL itself, so escapes mean what they mean in CEL)."""
    for function, literal in literal_patterns(expression):
        try:
            value = env().compile(literal).eval(data={}).value()
        except RuntimeError:
            continue  # not a plain literal after all: the checker has accepted the expression anyway
        if not isinstance(value, str):
            continue
        try:
            compile_regex(value)
        except RegexError as exc:
            raise CelCompileError(
                expression, f"compilation failed: invalid {function}() pattern {value!r}: {exc}"
            ) from exc


class CelCache:
    """LRU of compiled selectors keyed by expression text (compile errors are cached too).

    Safe to share between allocators; not thread-safe (the service calls it from one event loop).
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self._max = max_entries
        self._entries: OrderedDict[str, CompiledSelector | CelCompileError] = OrderedDict()

    def get_or_compile(self, expression: str) -> CompiledSelector:
        entry = self._entries.get(expression)
        if entry is None:
            try:
                entry = compile_selector(expression)
            except CelCompileError as exc:
                entry = exc
            self._entries[expression] = entry
            if len(self._entries) > self._max:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(expression)
        if isinstance(entry, CelCompileError):
            raise entry
        return entry

    def __len__(self) -> int:
        return len(self._entries)
