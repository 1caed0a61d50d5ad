"""The DRA CEL environment for device selectors, on top of ``cel-expr-python`` (cel-cpp).

One variable, ``device`` (``driver``, ``attributes[domain][id]``, ``capacity[domain][id]`` as Quantity,
``allowMultipleAllocations``), plus the Kubernetes libraries DRA selectors use in practice:

* quantity: ``quantity()``, ``isQuantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``,
  ``sub`` (Quantity or int), ``asInteger``, ``asApproximateFloat``, ``isInteger``, ``sign``;
* semver: ``semver(s[, normalize])``, ``isSemver(s[, normalize])``, ``major``/``minor``/``patch``,
  ``compareTo``, ``isGreaterThan``, ``isLessThan``;
* lists: ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``;
* regex: ``find``, ``findAll`` on RE2 with Go's syntax and ``FindAllString`` semantics (:mod:`.cel_regex`);
  cel-cpp's ``matches`` is RE2 too. Constant patterns are checked at compile time, as upstream;
* sets: ``sets.contains``, ``sets.equivalent``, ``sets.intersects``;
* cel-cpp's ``strings`` extension (v4, a superset of cel-go Strings v2) and ``cel.bind``.

How the awkward parts are matched (see the module functions for details):

* ``Quantity`` and ``Semver`` are protobuf messages ``kubernetes.Quantity{s}`` / ``kubernetes.Semver{s}``
  declared in a private descriptor pool, so the checker rejects ``"a".compareTo(quantity("1"))``.
  cel-cpp dispatches runtime overloads by *kind*, so the two message-typed ``compareTo`` overloads share
  one Python implementation that dispatches on the message type.
* Unknown attribute/capacity domains read as an empty map: cel-cpp has no default-valued map, so a
  "key not found" error for a domain the device does not have is answered by adding that domain as an
  empty map and evaluating again (at most :data:`_MAX_DOMAIN_RETRIES` times). The only observable
  difference from upstream: after such a retry, ``"<domain>" in device.attributes`` is true.
* Cost: expressions longer than 10 KiB are rejected at compile time, as upstream. cel-expr-python 0.1.3
  has no runtime cost limit or interrupt, so instead of cel-go's estimated cost (limit 1,000,000) we
  reject expressions whose comprehension macros nest deeper than :data:`MAX_COMPREHENSION_NESTING`
  (every device list/map is bounded by 64 elements, so depth 3 stays within 64**3 iterations).
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
from collections.abc import Callable, Mapping
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .cel_regex import RegexError, compile_regex, find, find_all, literal_patterns
from .quantity import Quantity, QuantityError, parse_quantity
from .semver import SemverError, Version, parse_semver

__all__ = [
    "MAX_COMPREHENSION_NESTING",
    "MAX_EXPRESSION_LENGTH",
    "CelCache",
    "CelCompileError",
    "CelRuntimeError",
    "CompiledSelector",
    "device_input",
]

MAX_EXPRESSION_LENGTH = 10 * 1024
MAX_COMPREHENSION_NESTING = 3
_MAX_DOMAIN_RETRIES = 8


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


# -- Quantity and Semver as protobuf messages ------------------------------------------------------


def _build_pool() -> tuple[Any, type, type]:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="draflow/structured_allocator/k8s_cel.proto", package="kubernetes", syntax="proto3"
    )
    for name in ("Quantity", "Semver"):
        msg = fdp.message_type.add(name=name)
        msg.field.add(
            name="s",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    q = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Quantity"))
    s = message_factory.GetMessageClass(pool.FindMessageTypeByName("kubernetes.Semver"))
    return pool, q, s


_POOL, QuantityMsg, SemverMsg = _build_pool()
_QT = cel.Type("kubernetes.Quantity")
_ST = cel.Type("kubernetes.Semver")
_L = cel.Type.List(cel.Type.DYN)
_T = cel.Type


def quantity_msg(q: Quantity | str) -> Any:
    """A CEL Quantity value for ``q`` (exact value kept via the canonical string)."""
    if isinstance(q, str):
        q = parse_quantity(q)
    return QuantityMsg(s=_encode_q(q))


def semver_msg(v: Version | str) -> Any:
    return SemverMsg(s=str(v))


def _encode_q(q: Quantity) -> str:
    # Exact (nano precision) and format-independent, so message equality is value equality.
    return Quantity(q.value).canonical()


def _q(m: Any) -> Quantity:
    return parse_quantity(m.s)


def _v(m: Any) -> Version:
    return parse_semver(m.s)


def _to_quantity(s: str) -> Any:
    try:
        return quantity_msg(parse_quantity(s))
    except QuantityError as exc:
        raise ValueError(f"quantity parse error: {exc}") from exc


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def _to_semver(s: str, normalize: bool = False) -> Any:
    try:
        return semver_msg(parse_semver(s, normalize))
    except SemverError as exc:
        raise ValueError(f"semver parse error: {exc}") from exc


def _is_semver(s: str, normalize: bool = False) -> bool:
    try:
        parse_semver(s, normalize)
    except SemverError:
        return False
    return True


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, QuantityMsg) and isinstance(b, QuantityMsg):
        return _q(a).cmp(_q(b))
    if isinstance(a, SemverMsg) and isinstance(b, SemverMsg):
        return _v(a).compare(_v(b))
    raise TypeError("no such overload: compareTo")


def _as_integer(m: Any) -> int:
    q = _q(m)
    if not q.is_integer():
        raise ValueError("cannot convert value to integer")
    v = int(q.value)
    if not -(2**63) <= v < 2**63:
        raise ValueError("cannot convert value to integer")
    return v


def _add(a: Any, b: Any) -> Any:
    return quantity_msg(_q(a).add(_q(b) if isinstance(b, QuantityMsg) else int(b)))


def _sub(a: Any, b: Any) -> Any:
    return quantity_msg(_q(a).sub(_q(b) if isinstance(b, QuantityMsg) else int(b)))


# -- lists, sets, regex -------------------------------------------------------------------------------


def _sort_key(x: Any) -> Any:
    if isinstance(x, QuantityMsg):
        return _q(x).value
    if isinstance(x, SemverMsg):
        return _SemverKey(_v(x))
    return x


class _SemverKey:
    __slots__ = ("v",)

    def __init__(self, v: Version) -> None:
        self.v = v

    def __lt__(self, other: _SemverKey) -> bool:
        return self.v.compare(other.v) < 0


def _is_sorted(items: list[Any]) -> bool:
    keys = [_sort_key(x) for x in items]
    return all(not keys[i + 1] < keys[i] for i in range(len(keys) - 1))


def _sum(items: list[Any]) -> Any:
    if not items:
        return 0
    if isinstance(items[0], QuantityMsg):
        total = _q(items[0])
        for x in items[1:]:
            total = total.add(_q(x))
        return quantity_msg(total)
    if any(isinstance(x, bool) for x in items):
        raise TypeError("no such overload: sum")
    return sum(items)


def _min(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min called on empty list")
    return min(items, key=_sort_key)


def _max(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max called on empty list")
    return max(items, key=_sort_key)


def _index_of(items: list[Any], x: Any) -> int:
    for i, v in enumerate(items):
        if v == x:
            return i
    return -1


def _last_index_of(items: list[Any], x: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if items[i] == x:
            return i
    return -1


def _fn(name: str, *overloads: cel.Overload) -> cel.FunctionDecl:
    return cel.FunctionDecl(name, list(overloads))


def _ov(
    oid: str,
    ret: cel.Type,
    params: list[cel.Type],
    impl: Callable[..., Any] | None = None,
    member: bool = False,
) -> cel.Overload:
    if impl is None:
        return cel.Overload(oid, ret, params, is_member=member)
    return cel.Overload(oid, ret, params, is_member=member, impl=impl)


def _k8s_functions() -> list[cel.FunctionDecl]:
    # Overloads sharing a runtime kind signature (message, message) carry the implementation only once.
    return [
        _fn("quantity", _ov("string_to_quantity", _QT, [_T.STRING], _to_quantity)),
        _fn("isQuantity", _ov("is_quantity_string", _T.BOOL, [_T.STRING], _is_quantity)),
        _fn("sign", _ov("quantity_sign", _T.INT, [_QT], lambda a: _q(a).sign(), True)),
        _fn("isInteger", _ov("quantity_is_integer", _T.BOOL, [_QT], lambda a: _q(a).is_integer(), True)),
        _fn("asInteger", _ov("quantity_get_integer", _T.INT, [_QT], _as_integer, True)),
        _fn(
            "asApproximateFloat",
            _ov("quantity_get_float", _T.DOUBLE, [_QT], lambda a: float(_q(a).value), True),
        ),
        _fn(
            "add",
            _ov("quantity_add", _QT, [_QT, _QT], _add, True),
            _ov("quantity_add_int", _QT, [_QT, _T.INT], _add, True),
        ),
        _fn(
            "sub",
            _ov("quantity_sub", _QT, [_QT, _QT], _sub, True),
            _ov("quantity_sub_int", _QT, [_QT, _T.INT], _sub, True),
        ),
        _fn(
            "compareTo",
            _ov("quantity_compare_to", _T.INT, [_QT, _QT], _compare, True),
            _ov("semver_compare_to", _T.INT, [_ST, _ST], None, True),
        ),
        _fn(
            "isGreaterThan",
            _ov("quantity_is_greater_than", _T.BOOL, [_QT, _QT], lambda a, b: _compare(a, b) > 0, True),
            _ov("semver_is_greater_than", _T.BOOL, [_ST, _ST], None, True),
        ),
        _fn(
            "isLessThan",
            _ov("quantity_is_less_than", _T.BOOL, [_QT, _QT], lambda a, b: _compare(a, b) < 0, True),
            _ov("semver_is_less_than", _T.BOOL, [_ST, _ST], None, True),
        ),
        _fn(
            "semver",
            _ov("string_to_semver", _ST, [_T.STRING], _to_semver),
            _ov("string_bool_to_semver", _ST, [_T.STRING, _T.BOOL], _to_semver),
        ),
        _fn(
            "isSemver",
            _ov("is_semver_string", _T.BOOL, [_T.STRING], _is_semver),
            _ov("is_semver_string_bool", _T.BOOL, [_T.STRING, _T.BOOL], _is_semver),
        ),
        _fn("major", _ov("semver_major", _T.INT, [_ST], lambda a: _v(a).major, True)),
        _fn("minor", _ov("semver_minor", _T.INT, [_ST], lambda a: _v(a).minor, True)),
        _fn("patch", _ov("semver_patch", _T.INT, [_ST], lambda a: _v(a).patch, True)),
        _fn("isSorted", _ov("list_is_sorted", _T.BOOL, [_L], _is_sorted, True)),
        _fn("sum", _ov("list_sum", _T.DYN, [_L], _sum, True)),
        _fn("min", _ov("list_min", _T.DYN, [_L], _min, True)),
        _fn("max", _ov("list_max", _T.DYN, [_L], _max, True)),
        _fn("find", _ov("string_find", _T.STRING, [_T.STRING, _T.STRING], find, True)),
        _fn(
            "findAll",
            _ov("string_find_all", _T.List(_T.STRING), [_T.STRING, _T.STRING], find_all, True),
            _ov("string_find_all_n", _T.List(_T.STRING), [_T.STRING, _T.STRING, _T.INT], find_all, True),
        ),
        _fn(
            "sets.contains",
            _ov("list_sets_contains_list", _T.BOOL, [_L, _L], lambda a, b: all(x in a for x in b)),
        ),
        _fn(
            "sets.equivalent",
            _ov(
                "list_sets_equivalent_list",
                _T.BOOL,
                [_L, _L],
                lambda a, b: all(x in b for x in a) and all(x in a for x in b),
            ),
        ),
        _fn(
            "sets.intersects",
            _ov("list_sets_intersects_list", _T.BOOL, [_L, _L], lambda a, b: any(x in b for x in a)),
        ),
    ]


def _new_env() -> Any:
    # indexOf/lastIndexOf on lists must be merged into the strings extension's declarations, which
    # cel-cpp only allows from an extension registered after it.
    lists_ext = cel.CelExtension(
        "k8s.lists.indexof",
        [
            _fn("indexOf", _ov("list_index_of", _T.INT, [_L, _T.DYN], _index_of, True)),
            _fn("lastIndexOf", _ov("list_last_index_of", _T.INT, [_L, _T.DYN], _last_index_of, True)),
        ],
    )
    return cel.NewEnv(
        _POOL,
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        extensions=[ext_strings.ExtStrings(), ext_bindings.ExtBindings(), lists_ext],
        functions=_k8s_functions(),
    )


_ENV: Any = None


def _env() -> Any:
    global _ENV
    if _ENV is None:
        _ENV = _new_env()
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

_MACROS = ("all", "exists", "exists_one", "existsOne", "map", "filter")
_MACRO_RE = re.compile(r"\.\s*(" + "|".join(_MACROS) + r")\s*\($")


def comprehension_nesting(expression: str) -> int:
    """Maximum nesting depth of comprehension macros, ignoring string literals."""
    depth = 0
    stack: list[bool] = []  # one entry per open parenthesis: does it open a macro call?
    macro_depth = 0
    best = 0
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        if c in "\"'":
            triple = expression[i : i + 3] in ('"""', "'''")
            quote = expression[i : i + 3] if triple else c
            i += len(quote)
            while i < n and expression[i : i + len(quote)] != quote:
                i += 2 if expression[i] == "\\" else 1
            i += len(quote)
            continue
        if c == "(":
            is_macro = bool(_MACRO_RE.search(expression[max(0, i - 20) : i + 1]))
            stack.append(is_macro)
            depth += 1
            if is_macro:
                macro_depth += 1
                best = max(best, macro_depth)
        elif c == ")" and stack:
            if stack.pop():
                macro_depth -= 1
            depth -= 1
        i += 1
    return best


class CompiledSelector:
    """A compiled selector expression; :meth:`matches` evaluates it for one device input."""

    __slots__ = ("_expr", "expression")

    def __init__(self, expression: str, expr: Any) -> None:
        self.expression = expression
        self._expr = expr

    def matches(self, data: dict[str, Any]) -> bool:
        """Evaluate against a :func:`device_input` dict. Raises :class:`CelRuntimeError`."""
        added: set[str] = set()
        for _ in range(_MAX_DOMAIN_RETRIES + 1):
            result = self._expr.eval(data={"device": data})
            rtype = result.type()
            if rtype == cel.Type.BOOL:
                return bool(result.value())
            if rtype != cel.Type.ERROR:
                raise CelRuntimeError(
                    self.expression, f"CEL result of type {rtype.name()} could not be converted to bool"
                )
            message = str(result.value())
            domain = _missing_key(message)
            if (
                domain is None
                or domain in added
                or domain in data["attributes"]
                or domain in data["capacity"]
            ):
                raise CelRuntimeError(self.expression, _clean_error(message))
            # An unknown domain reads as an empty map: add it and evaluate again.
            added.add(domain)
            data = dict(data)
            data["attributes"] = {**data["attributes"], domain: {}}
            data["capacity"] = {**data["capacity"], domain: {}}
        raise CelRuntimeError(self.expression, "too many unknown domains")


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
    if comprehension_nesting(expression) > MAX_COMPREHENSION_NESTING:
        raise CelCompileError(
            expression,
            "expression too complex: estimated cost exceeds the limit "
            f"(comprehensions nested deeper than {MAX_COMPREHENSION_NESTING})",
        )
    try:
        expr = _env().compile(expression)
    except RuntimeError as exc:
        msg = re.sub(r"^[A-Z_]+: ", "", str(exc)).removesuffix(" [INVALID_ARGUMENT]")
        if "cannot be the range of a comprehension" not in msg:
            raise CelCompileError(expression, "compilation failed: " + msg) from exc
        # cel-cpp's checker refuses a comprehension over a `dyn` value (e.g. device.attributes[d]),
        # which cel-go accepts; such expressions are compiled unchecked and typed at runtime.
        try:
            expr = _env().compile(expression, disable_check=True)
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
            value = _env().compile(literal).eval(data={}).value()
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
