"""Type and range checks of config values, declared beside the code that takes them.

Every config section feeds a dataclass (the top level, ``optim``, ``ema``, ``samples``) or a
constructor (``model``, ``objective``, ``data``, ``tokenizer``: the registered class;
``trainer``: ``lightning.Trainer``). A key's type is that field's or parameter's annotation;
its range is declared in a ``config_ranges`` table on the class, ``{key: spec}``, merged along
the MRO so that a base class declares once the keys its subclasses share::

    config_ranges = {"n_layer": ">=1", "dropout": "[0, 1)", "decay": "[0, 1]; 0 = off"}

A spec is ``>=a``, ``>a``, ``<=b``, ``<b`` or an interval ``[a, b]``, ``[a, b)``, ``(a, b]``,
``(a, b)``, optionally followed by ``; a note`` shown in the error. A list or tuple value must
have every item in range; a number of a typed key must be finite. A mapping argument whose
keys are the keyword arguments of another callable (Caduceus's ``ssm_cfg`` -> ``Mamba``) is
declared in ``config_mappings = {key: Keywords(target, exclude=..., extra=...)}`` and checked
the same way one level down: its keys, their types and ``target``'s ranges.

The declared ranges are the one source of truth: ``check_arguments`` applies them, with the
same messages, when a class is constructed from Python (objectives call it for every
construction), so constructors hold no range checks of their own; only checks that relate
several arguments stay in the constructors.

This module imports nothing heavy, so backbones and objectives can import ``Keywords``.
"""

from __future__ import annotations

import collections.abc as abc
import difflib
import enum
import functools
import inspect
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import PurePath
from typing import Any, Literal, Union, get_args, get_origin

from genodiff.errors import InputValueError

REQUIRED = inspect.Parameter.empty  # a key without a default


class ConfigError(InputValueError):
    """A config key or value that cannot be used; the message says what to change.
    (``genodiff.config.ConfigError`` is this class.)"""


@dataclass(frozen=True)
class Range:
    """An allowed interval of numbers, parsed from a ``config_ranges`` spec."""

    low: float = -math.inf
    high: float = math.inf
    low_closed: bool = True
    high_closed: bool = True
    note: str = ""

    _ONE_SIDED = re.compile(r"^(>=|>|<=|<)\s*(\S+)$")
    _INTERVAL = re.compile(r"^([\[(])\s*([^,]+?)\s*,\s*([^\])]+?)\s*([\])])$")

    @classmethod
    def parse(cls, spec: str) -> Range:
        text, _, note = spec.partition(";")
        text, note = text.strip(), note.strip()
        if match := cls._ONE_SIDED.match(text):
            op, bound = match[1], float(match[2])
            if op.startswith(">"):
                return cls(low=bound, low_closed=op == ">=", note=note)
            return cls(high=bound, high_closed=op == "<=", note=note)
        if match := cls._INTERVAL.match(text):
            low, high = float(match[2]), float(match[3])
            return cls(low, high, match[1] == "[", match[4] == "]", note)
        raise ValueError(f"bad range spec {spec!r}: use >=a, >a, <=b, <b or [a, b] / (a, b)")

    def __contains__(self, x: float) -> bool:
        above = x >= self.low if self.low_closed else x > self.low
        below = x <= self.high if self.high_closed else x < self.high
        return above and below

    def describe(self) -> str:
        """``in [0, 1)``, ``at least 1``, ``greater than 0``, ``at most 5``, ``less than 5``."""
        if math.isinf(self.high):
            return f"{'at least' if self.low_closed else 'greater than'} {_number(self.low)}"
        if math.isinf(self.low):
            return f"{'at most' if self.high_closed else 'less than'} {_number(self.high)}"
        left, right = "[" if self.low_closed else "(", "]" if self.high_closed else ")"
        return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class Keywords:
    """Declares a mapping argument whose keys are the keyword arguments of ``target`` (a
    class: those of its ``__init__``) less ``exclude`` (the ones the owner passes itself),
    plus ``extra`` ``{key: annotation}`` (keys the owner reads before calling ``target``).
    ``ranges`` ``{key: spec}`` are those of a function ``target`` (a class declares its own
    ``config_ranges``)."""

    target: Callable[..., Any]
    exclude: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    ranges: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Key:
    """What one config key takes: ``annotation`` (``Any``: not checked), ``default``
    (``REQUIRED`` when there is none), ``range`` and, for a mapping, the ``Spec`` of its keys."""

    annotation: Any = Any
    default: Any = None
    range: Range | None = None
    nested: Spec | None = None


def unknown_key_error(dotted: str, valid: abc.Iterable[str]) -> ConfigError:
    """The error for the config key ``dotted`` where only ``valid`` are taken (the keys of its
    mapping), naming the valid key spelled closest to its last part (``trainer.max_step``: did
    you mean trainer.max_steps?)."""
    prefix, dot, leaf = dotted.rpartition(".")
    valid = sorted(valid)
    close = difflib.get_close_matches(leaf, valid, n=1)
    hint = f" (did you mean '{prefix}{dot}{close[0]}'?)" if close else ""
    return ConfigError(f"unknown config key '{dotted}'{hint}. Valid keys here: {', '.join(valid)}")


@dataclass(frozen=True)
class Spec:
    """The keys of one config mapping (a section, or a mapping inside one)."""

    keys: dict[str, Key]

    def check(self, prefix: str, values: Mapping[str, Any]) -> None:
        """ConfigError for the first unknown key, missing required key, or value of the
        wrong type or out of range; ``prefix`` is the dotted path of ``values``."""
        for name, value in values.items():
            dotted = f"{prefix}.{name}" if prefix else str(name)
            if name not in self.keys:
                raise unknown_key_error(dotted, self.keys)
            check_value(dotted, value, self.keys[name])
        for name, key in self.keys.items():
            if key.default is REQUIRED and name not in values:
                dotted = f"{prefix}.{name}" if prefix else name
                raise ConfigError(f"{dotted}: required, and the config does not set it; add it")


# ---------------------------------------------------------------------------------------------
# Building specs from dataclasses and signatures


def declared(cls: type, attribute: str) -> dict[str, Any]:
    """``cls.<attribute>`` tables merged along the MRO (a subclass entry wins)."""
    merged: dict[str, Any] = {}
    for klass in reversed(getattr(cls, "__mro__", (cls,))):
        merged.update(vars(klass).get(attribute) or {})
    return merged


def _annotations(fn: Any) -> dict[str, Any]:
    """The resolved annotations of ``fn``; one that cannot be resolved (a name imported only
    for type checkers) is ``Any``."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        pass
    hints, scope = {}, getattr(fn, "__globals__", {})
    for name, annotation in getattr(fn, "__annotations__", {}).items():
        try:
            hints[name] = eval(annotation, scope) if isinstance(annotation, str) else annotation
        except Exception:
            hints[name] = Any
    return hints


def callable_spec(
    fn: Callable[..., Any],
    ranges: Mapping[str, str] | None = None,
    mappings: Mapping[str, Keywords] | None = None,
    drop: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
) -> Spec:
    """The keyword arguments of ``fn`` (``self``, ``*args``, ``**kwargs`` and ``drop`` left
    out) with their annotations, ``ranges`` and nested ``mappings``. ``optional`` keys may be
    left out or null (another part of genodiff fills them in, e.g. ids from the tokenizer)."""
    hints = _annotations(fn)
    ranges, mappings = dict(ranges or {}), dict(mappings or {})
    keys = {}
    for p in inspect.signature(fn).parameters.values():
        if p.name in ("self", *drop) or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = None if p.name in optional else p.default
        keys[p.name] = Key(
            annotation=hints.get(p.name, Any),
            default=default,
            range=Range.parse(ranges[p.name]) if p.name in ranges else None,
            nested=keywords_spec(mappings[p.name]) if p.name in mappings else None,
        )
    return Spec(keys)


def class_spec(cls: type, drop: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> Spec:
    """The constructor keywords of ``cls`` with its declared ``config_ranges`` and
    ``config_mappings``."""
    return callable_spec(
        cls.__init__,
        declared(cls, "config_ranges"),
        declared(cls, "config_mappings"),
        drop=drop,
        optional=optional,
    )


def check_arguments(
    cls: type, section: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> None:
    """Check a construction of ``cls`` from Python as a config's ``section`` is checked: each
    argument with a declared range (``config_ranges``) gets the type, finiteness and range
    checks, and the same ConfigError, as ``section.<argument>`` in a config; an argument
    ``cls`` does not take is a TypeError naming it and the ones it takes."""
    parameters = inspect.signature(cls.__init__)
    try:
        bound = parameters.bind(None, *args, **kwargs).arguments  # None stands for self
    except TypeError as err:
        names = [name for name in parameters.parameters if name != "self"]
        raise TypeError(f"{cls.__name__}: {err}; it takes {', '.join(names)}") from None
    keys = _ranged_keys(cls)
    for name, value in bound.items():
        if name in keys:
            check_value(f"{section}.{name}", value, keys[name])


@functools.cache
def _ranged_keys(cls: type) -> dict[str, Key]:
    """The constructor keys of ``cls`` that have a declared range."""
    return {name: key for name, key in class_spec(cls).keys.items() if key.range is not None}


def keywords_spec(keywords: Keywords) -> Spec:
    target = keywords.target
    spec = (
        class_spec(target) if isinstance(target, type) else callable_spec(target, keywords.ranges)
    )
    keys = {k: v for k, v in spec.keys.items() if k not in keywords.exclude}
    keys.update({k: Key(annotation=a) for k, a in keywords.extra.items()})
    return Spec(keys)


def dataclass_spec(cls: type) -> Spec:
    """The fields of dataclass ``cls`` with their annotations and its ``config_ranges``; a
    field that is itself a dataclass is a nested mapping."""
    hints = _annotations(cls)
    ranges = declared(cls, "config_ranges")
    keys = {}
    for f in fields(cls):
        annotation = hints.get(f.name, Any)
        nested = dataclass_spec(annotation) if is_dataclass(annotation) else None
        default = f.default if f.default is not MISSING else None
        keys[f.name] = Key(
            annotation=dict if nested else annotation,
            default=default,
            range=Range.parse(ranges[f.name]) if f.name in ranges else None,
            nested=nested,
        )
    return Spec(keys)


# ---------------------------------------------------------------------------------------------
# Checking one value


def check_value(dotted: str, value: Any, key: Key) -> None:
    """ConfigError when ``value`` does not fit ``key``'s type or range."""
    if value is None and key.default is None:
        return  # null = the default (or filled in elsewhere)
    if not fits(value, key.annotation):
        raise ConfigError(
            f"{dotted}: expected {describe(key.annotation)}, got {_shown(value)}; "
            f"{_fix(dotted, key)}"
        )
    if key.annotation is not Any:
        for number in _numbers(value):
            if not math.isfinite(number):
                raise ConfigError(
                    f"{dotted}: {_number_text(number)} is not a finite number; {_fix(dotted, key)}"
                )
    if key.range is not None:
        for number in _numbers(value):
            if number not in key.range:
                note = f" ({key.range.note})" if key.range.note else ""
                raise ConfigError(
                    f"{dotted}: {_number_text(number)} is out of range; set a value "
                    f"{key.range.describe()}{note}"
                )
    if key.nested is not None and isinstance(value, Mapping):
        key.nested.check(dotted, value)


def _fix(dotted: str, key: Key) -> str:
    """What to do: an example from the default when it is a usable value."""
    default = key.default
    usable = default not in (None, REQUIRED) and not isinstance(default, Mapping)
    if usable and fits(default, key.annotation) and not isinstance(default, bool):
        shown = list(default) if isinstance(default, tuple) else default
        return f"set e.g. {dotted}={_yaml(shown)} (the default)"
    return f"give {dotted} such a value"


def _yaml(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_yaml(v) for v in value) + "]"
    return str(value)


def _number_text(x: float) -> str:
    return str(int(x)) if isinstance(x, int) else repr(x)


def _shown(value: Any) -> str:
    kind = {str: "a string", bool: "a boolean", int: "an integer", float: "a number"}
    for cls, name in kind.items():
        if type(value) is cls:
            return f"{value!r} ({name})"
    if isinstance(value, Mapping):
        return f"a mapping {dict(value)!r}"
    if isinstance(value, list | tuple):
        return f"a list {list(value)!r}"
    return "null" if value is None else repr(value)


def _numbers(value: Any) -> list[float]:
    """The numbers in ``value`` (itself, or the items of a list or tuple); booleans are not."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, list | tuple):
        return [n for item in value for n in _numbers(item)]
    return []


# What a YAML list may be passed as, and a YAML mapping (bare or as the origin of X[...]).
_SEQUENCES = (list, tuple, set, frozenset, abc.Sequence, abc.MutableSequence, abc.Iterable)
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def _is_sequence_type(annotation: Any) -> bool:
    return annotation in _SEQUENCES or get_origin(annotation) in _SEQUENCES


def _is_mapping_type(annotation: Any) -> bool:
    return annotation in _MAPPINGS or get_origin(annotation) in _MAPPINGS


def fits(value: Any, annotation: Any) -> bool:
    """Whether a config value (YAML scalars, lists, mappings, null) can be passed where
    ``annotation`` is expected. An annotation this cannot judge (a class other than the
    builtins, a type variable, a callable) accepts anything."""
    if annotation is Any or annotation is REQUIRED or isinstance(annotation, str | typing.TypeVar):
        return True
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is typing.Annotated:
        return fits(value, args[0])
    if origin in (Union, types.UnionType):
        return any(fits(value, a) for a in args)
    if origin is Literal:
        return any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in args)
    if annotation is None or annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:  # a number is accepted where text is (name=2024)
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    if _is_mapping_type(annotation):
        return isinstance(value, Mapping)
    if _is_sequence_type(annotation):
        if not isinstance(value, list | tuple):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(fits, value, args))
        item = args[0] if args else Any
        return all(fits(v, item) for v in value)
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return any(value in (m.name, m.value) for m in annotation)
        if issubclass(annotation, PurePath) or annotation is os.PathLike:
            return isinstance(value, str)
    return True  # a class or construct a config value cannot be judged against


def describe(annotation: Any) -> str:
    """``an integer``, ``a number``, ``a list of 2 numbers``, ``one of 'a', 'b'``, ..."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is typing.Annotated:
        return describe(args[0])
    if origin in (Union, types.UnionType):
        literals = [v for a in args if get_origin(a) is Literal for v in get_args(a)]
        parts = [describe(a) for a in args if a is not type(None) and get_origin(a) is not Literal]
        if literals:
            parts.insert(0, "one of " + ", ".join(repr(v) for v in literals))
        text = " or ".join(dict.fromkeys(parts))
        return text + (" or null" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    simple = {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        type(None): "null",
        None: "null",
    }
    if annotation in simple:
        return simple[annotation]
    if _is_mapping_type(annotation):
        return "a mapping"
    if _is_sequence_type(annotation):
        if origin is tuple and args and args[-1] is not Ellipsis:
            items = {describe(a) for a in args}
            if len(items) == 1:
                return f"a list of {len(args)} {_plural(items.pop())}"
            return f"a list of {len(args)} values"
        return f"a list of {_plural(describe(args[0]))}" if args else "a list"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(m.name) for m in annotation)
    return getattr(annotation, "__name__", str(annotation))


def _plural(description: str) -> str:
    words = {
        "an integer": "integers",
        "a number": "numbers",
        "a string": "strings",
        "true or false": "booleans",
    }
    return words.get(description, description)
