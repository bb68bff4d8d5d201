"""Typed config dataclasses: overrides by name with type checks, and field validators.

Configs are frozen dataclasses; `with_overrides` builds a new one from user overrides
(Python values or command-line strings) and rejects unknown fields and ill-typed values
with a message naming the field and what is allowed. Numbers must be finite (`inf` and
`nan` are refused) unless a field documents what `inf` means in its metadata:
`dataclasses.field(default=5.0, metadata={INF: "no clipping"})` takes `inf` (never `nan`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from testbed.errors import InputError, bad_value
from testbed.names import did_you_mean, unknown_setting  # noqa: F401  (did_you_mean: here too)

C = TypeVar("C")

INF = "inf"  # field metadata key: what inf means for that field (then inf is allowed)
UNUSED_SEED = "unused_seed"  # metadata key of a `seed` field nothing random reads (why)
ADDED = "added"  # metadata key of a field added after results were stored (when): at its
# default it is left out of the agent's key, so the keys of stored results stay the same


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of: " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        plural = {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}
        inner = plural.get(args[0], _describe(args[0])) if args else "any values"
        return f"a comma-separated list of {inner} (e.g. 50,50)"
    if tp is type(None):
        return "None"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _coerce(tp: Any, value: Any, field: str) -> Any:
    """Returns `value` as type `tp` (parsing strings from the command line) or raises."""
    origin = typing.get_origin(tp)
    fail = InputError(f"{field}: got {value!r}; allowed: {_describe(tp)}")
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(typing.get_args(tp), value, field, fail)
    if origin is Literal:
        allowed = typing.get_args(tp)
        for a in allowed:
            if value == a or (isinstance(value, str) and str(a) == value):
                return a
        raise bad_value(field, value, allowed)
    if origin is tuple:
        return _coerce_tuple(typing.get_args(tp), value, field, fail)
    if tp is Any:
        return value
    if tp in _SCALARS:
        return _SCALARS[tp](value, fail)
    if isinstance(tp, type) and not isinstance(value, tp):
        raise fail
    return value


def _coerce_union(args: tuple, value: Any, field: str, fail: InputError) -> Any:
    """`value` as the first member of a union that takes it ('none' is None)."""
    if value is None or (isinstance(value, str) and value.lower() == "none"):
        if type(None) in args:
            return None
        raise fail
    for a in args:
        if a is type(None):
            continue
        try:
            return _coerce(a, value, field)
        except InputError:
            continue
    raise fail


def _coerce_tuple(args: tuple, value: Any, field: str, fail: InputError) -> tuple:
    """`value` (a sequence, or a string '1,2' / '(1, 2)', '' the empty list) as a tuple of
    its element type; an empty item ('50,' or ',50') is refused, never dropped."""
    if isinstance(value, str):
        text = value.strip().strip("()[]")
        items = [v.strip() for v in text.split(",")] if text.strip() else []
        if value.strip()[:1] in ("(", "[") and len(items) > 1 and items[-1] == "":
            items.pop()  # Python's one-item tuple, '(50,)'
        if "" in items:
            raise InputError(f"{field}: got {value!r}, which has an empty item; allowed: "
                             f"{_describe(tuple[args])}")  # fmt: skip
        value = items
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise fail
    inner = args[0] if args else Any
    try:
        return tuple(_coerce(inner, v, field) if inner is not Any else v for v in value)
    except InputError:  # say what the whole field takes, not what one element does
        raise fail from None


def _as_bool(value: Any, fail: InputError) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise fail


def _as_int(value: Any, fail: InputError) -> int:
    if isinstance(value, bool):
        raise fail
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            raise fail from None
        if f.is_integer():
            return int(f)
    raise fail


def _as_float(value: Any, fail: InputError) -> float:
    if isinstance(value, bool):
        raise fail
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise fail from None
    raise fail


def _as_str(value: Any, fail: InputError) -> str:
    if isinstance(value, str):
        return value
    raise fail


_SCALARS = {bool: _as_bool, int: _as_int, float: _as_float, str: _as_str}


def field_types(config_cls: type) -> dict[str, Any]:
    """The resolved type of each init field of a config dataclass."""
    hints = typing.get_type_hints(config_cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(config_cls) if f.init}


def _non_finite(value: Any, inf_ok: bool) -> bool:
    """Whether `value` (a number or a tuple of them) holds nan, or inf when not `inf_ok`."""
    if isinstance(value, tuple):
        return any(_non_finite(v, inf_ok) for v in value)
    if isinstance(value, float) and not math.isfinite(value):
        return math.isnan(value) or not inf_ok
    return False


def coerce_fields(config_cls: type, values: Mapping[str, Any], *, where: str = "") -> dict:
    """`values` of fields of the dataclass `config_cls`, each checked against the field's
    type (command-line strings parsed; numbers finite, unless the field's metadata says what
    inf means: `INF`); an unknown name is an InputError listing the fields."""
    types_ = field_types(config_cls)
    inf_meaning = {f.name: f.metadata.get(INF) for f in dataclasses.fields(config_cls)}
    prefix = f"{where}: " if where else ""
    changes = {}
    for name, value in values.items():
        if name not in types_:
            raise InputError(unknown_setting(prefix, name, types_))
        changes[name] = _coerce(types_[name], value, f"{prefix}{name}")
        meaning = inf_meaning[name]
        if _non_finite(changes[name], meaning is not None):
            finite = _describe(types_[name]).replace("number", "finite number")
            also = f", or inf: {meaning}" if meaning is not None else ""
            raise InputError(f"{prefix}{name}: got {value!r}; allowed: {finite}{also}")
    return changes


def with_overrides(config: C, overrides: Mapping[str, Any], *, where: str = "") -> C:
    """A copy of `config` with `overrides` applied, each checked against the field's type
    (numbers finite, unless the field's metadata says what inf means: `INF`)."""
    prefix = f"{where}: " if where else ""
    changes = coerce_fields(type(config), overrides, where=where)
    try:
        return dataclasses.replace(config, **changes)
    except InputError as e:  # a validator in __post_init__: say where
        raise InputError(f"{prefix}{e}") from None


def config_as_dict(config: Any) -> dict[str, Any]:
    """A JSON-friendly dict of a config (tuples become lists)."""
    return {
        k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()
    }


def key_fields(config: Any) -> dict[str, Any]:
    """`config_as_dict` without the fields marked `ADDED` that are at their default (what an
    agent's key hashes: adding a setting keeps the keys of stored results)."""
    added = {
        f.name: f.default for f in dataclasses.fields(config) if ADDED in f.metadata
    }  # fmt: skip
    return {
        k: v
        for k, v in config_as_dict(config).items()
        if k not in added or getattr(config, k) != added[k]
    }


# Validators for __post_init__: each raises an InputError naming the field.


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(value)
    except TypeError:  # not a number: the comparison that follows says so
        return True


def check_positive(name: str, value: float) -> None:
    if not (value > 0 and _finite(value)):
        raise InputError(f"{name}: got {value!r}; allowed: a finite number > 0")


def check_nonnegative(name: str, value: float) -> None:
    if not (value >= 0 and _finite(value)):
        raise InputError(f"{name}: got {value!r}; allowed: a finite number >= 0")


def check_at_least(name: str, value: int, low: int) -> None:
    """`value` is a number >= `low` (a string, None or NaN is refused, naming `name`)."""
    if not (isinstance(value, numbers.Real) and value >= low and _finite(value)):
        raise InputError(f"{name}: got {value!r}; allowed: an integer >= {low}")


def check_sizes(settings: Any, **lows: int) -> None:
    """`check_at_least` on each named field of `settings`, in the order given."""
    for name, low in lows.items():
        check_at_least(name, getattr(settings, name), low)


def check_seed(name: str, value: Any) -> int:
    """`value` as a seed, an integer >= 0 (a command-line string is parsed), else an
    InputError naming `name`. One rule for every seed: `--seed`, `--seeds`, `--set seed`."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = int(value)  # numpy integers too
    try:
        seed = None if isinstance(value, bool) else _coerce(int, value, name)
    except InputError:
        seed = None
    if seed is None or seed < 0:
        raise InputError(f"{name}: got {value!r}; allowed: an integer >= 0")
    return seed


def check_in_range(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise InputError(f"{name}: got {value!r}; allowed: a number in [{low}, {high}]")


def check_one_of(name: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = list(allowed)
    if value not in allowed:
        raise bad_value(name, value, allowed)
