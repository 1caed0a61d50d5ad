"""The Kubernetes CEL libraries of the DRA environment (:mod:`.cel_env` builds the environment), in Python:

* quantity: ``quantity()``, ``isQuantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``add``,
  ``sub`` (Quantity or int), ``asInteger``, ``asApproximateFloat``, ``isInteger``, ``sign``;
* semver: ``semver(s[, normalize])``, ``isSemver(s[, normalize])``, ``major``/``minor``/``patch``,
  ``compareTo``, ``isGreaterThan``, ``isLessThan``;
* lists: ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``;
* regex: ``find``, ``findAll`` on RE2 with Go's syntax and ``FindAllString`` semantics (:mod:`.cel_regex`);
  cel-cpp's ``matches`` is RE2 too. Constant patterns are checked at compile time, as upstream;
* sets: ``sets.contains``, ``sets.equivalent``, ``sets.intersects``.

``Quantity`` and ``Semver`` are protobuf messages ``kubernetes.Quantity{s}`` / ``kubernetes.Semver{s}``
declared in a private descriptor pool, so the checker rejects ``"a".compareTo(quantity("1"))``.
cel-cpp dispatches runtime overloads by *kind*, so the two message-typed ``compareTo`` overloads share
one Python implementation that dispatches on the message type.

Functions whose work grows with their input are charged to the evaluation's cost meter (:mod:`.cel_cost`)
with the Kubernetes cost of the same call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .cel_cost import charge_matches, is_metered, list_cost, metered, regex_cost, sets_cost, unit_cost
from .cel_regex import compile_regex, find, iter_matches
from .quantity import Quantity, QuantityError, parse_quantity
from .semver import SemverError, Version, parse_semver

__all__ = ["POOL", "QuantityMsg", "SemverMsg", "functions", "lists_extension", "quantity_msg", "semver_msg"]


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


POOL, QuantityMsg, SemverMsg = _build_pool()
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


def _contains(a: list[Any], b: list[Any]) -> bool:
    return all(x in a for x in b)


def _equivalent(a: list[Any], b: list[Any]) -> bool:
    return all(x in b for x in a) and all(x in a for x in b)


def _intersects(a: list[Any], b: list[Any]) -> bool:
    return any(x in b for x in a)


def _find_all_charged(text: str, pattern: str, limit: int = -1) -> list[str]:
    compile_regex(pattern)  # an invalid pattern is an error even with limit 0
    return charge_matches(iter_matches(text, pattern), limit)


_find = metered(find, regex_cost)
_find_all = metered(_find_all_charged, regex_cost)
_index_of_m = metered(_index_of, list_cost)
_last_index_of_m = metered(_last_index_of, list_cost)


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
    if not is_metered(impl):
        impl = metered(impl, unit_cost)  # a call of a Python function costs at least 1, as upstream
    return cel.Overload(oid, ret, params, is_member=member, impl=impl)


def functions() -> list[cel.FunctionDecl]:
    """The declarations (with implementations) of every library function but the list ``indexOf``s."""
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
        _fn("isSorted", _ov("list_is_sorted", _T.BOOL, [_L], metered(_is_sorted, list_cost), True)),
        _fn("sum", _ov("list_sum", _T.DYN, [_L], metered(_sum, list_cost), True)),
        _fn("min", _ov("list_min", _T.DYN, [_L], metered(_min, list_cost), True)),
        _fn("max", _ov("list_max", _T.DYN, [_L], metered(_max, list_cost), True)),
        _fn("find", _ov("string_find", _T.STRING, [_T.STRING, _T.STRING], _find, True)),
        _fn(
            "findAll",
            _ov("string_find_all", _T.List(_T.STRING), [_T.STRING, _T.STRING], _find_all, True),
            _ov("string_find_all_n", _T.List(_T.STRING), [_T.STRING, _T.STRING, _T.INT], _find_all, True),
        ),
        _fn(
            "sets.contains",
            _ov("list_sets_contains_list", _T.BOOL, [_L, _L], metered(_contains, sets_cost)),
        ),
        _fn(
            "sets.equivalent",
            _ov(
                "list_sets_equivalent_list",
                _T.BOOL,
                [_L, _L],
                metered(_equivalent, sets_cost),
            ),
        ),
        _fn(
            "sets.intersects",
            _ov("list_sets_intersects_list", _T.BOOL, [_L, _L], metered(_intersects, sets_cost)),
        ),
    ]


def lists_extension() -> cel.CelExtension:
    """``indexOf``/``lastIndexOf`` on lists. They must be merged into the strings extension's declarations
    (the same names on strings), which cel-cpp only allows from an extension registered after it."""
    return cel.CelExtension(
        "k8s.lists.indexof",
        [
            _fn("indexOf", _ov("list_index_of", _T.INT, [_L, _T.DYN], _index_of_m, True)),
            _fn("lastIndexOf", _ov("list_last_index_of", _T.INT, [_L, _T.DYN], _last_index_of_m, True)),
        ],
    )
