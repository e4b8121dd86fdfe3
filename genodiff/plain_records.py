"""What genodiff reads from a file's records, checked before anything walks it: a bounded tree
of plain values (``plain_tree``).

The config and records of a checkpoint (``hyper_parameters``, the run and tokenizer records)
and an exported folder's config.json and genodiff.json come from other people's files. A few
hundred unpickled bytes can hold lists that share themselves (``a = [a, a]`` sixty times:
2**60 leaves when walked), an OmegaConf container whose interpolations (``${oc.env:HOME}``)
would read the environment when resolved, or objects of any allow-listed type. So each record is
first copied as dicts (str keys), lists, str, int, float, bool and None only: at most
``MAX_DEPTH`` containers deep and ``MAX_NODES`` values, a value counted each time it is reached
(a list shared by two places counts twice, so the 2**60 tree is refused after ``MAX_NODES``
steps); an OmegaConf container is taken as the values it holds, unresolved, and a string that
OmegaConf would resolve (an interpolation, or ``???``, its missing value) is refused. The copy
shares nothing with the file's objects. Anything else is one ``InputValueError`` naming the
file, the key and what is wrong.

A YAML file (an experiment config) is bounded before a YAML reader builds it
(``check_yaml_file``): read as the parser's events, nothing constructed, its values are
counted as ``plain_tree`` counts them (an alias each time it is reached, so a "billion laughs"
file of nested aliases is refused after ``MAX_YAML_VALUES``, where building it would take
hours), and its nesting is bounded by ``MAX_DEPTH`` (past a thousand or so, a reader's
recursion fails).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from omegaconf import Node

from genodiff.errors import InputValueError
from genodiff.hub import redownload_advice
from genodiff.memory import size_text
from genodiff.user_warnings import warn_user

MAX_DEPTH = 32
MAX_NODES = 100_000
# The most bytes of a JSON record file read (config.json, genodiff.json, tokenizer.json): a
# config is a few kilobytes, a tokenizer with a large vocabulary some megabytes.
MAX_JSON_BYTES = 64 << 20
# The most values a YAML config may expand to (``check_yaml_file``): a shipped experiment has a
# few hundred, and building one takes OmegaConf about a third of a millisecond per value.
MAX_YAML_VALUES = 10_000
# A leaf genodiff takes as it is (bool is an int).
SCALARS = (str, int, float, type(None))
# How OmegaConf tells a string it resolves (omegaconf._utils.get_value_kind, not strict).
INTERPOLATION, MISSING = "${", "???"


def plain_tree(value: Any, source: str | Path, where: str = "") -> Any:
    """A copy of ``value`` as a bounded tree of plain values (see the module docstring), read
    from ``source`` (a file, named in the error) at the key ``where`` (``hyper_parameters``);
    one ``InputValueError`` naming both and what is wrong when it is not one."""
    return _Walk(str(source)).copy(value, where, 0)


def _advice(path: Path) -> str:
    """What to do about a record file that does not read (``hub.redownload_advice``)."""
    return redownload_advice(path, "restore the file, or export the folder again")


def read_json_object(path: Path, advice: str | None = None) -> dict[str, Any]:
    """The JSON object the file ``path`` holds (a folder's config.json, genodiff.json,
    tokenizer.json, a run's record), checked to be a bounded tree of plain values
    (``plain_tree``) before anything walks it; an input error naming the file when it is not a
    regular file, larger than ``MAX_JSON_BYTES``, not JSON, not an object or not such a tree,
    saying what to do: ``advice``, by default to restore or download the file again."""
    advice = advice or _advice(path)
    if not path.is_file():  # a FIFO would block the read, a device never end it
        raise InputValueError(
            f"{path} is not a regular file (a folder, FIFO, device or broken link); {advice}"
        )
    with path.open("rb") as handle:
        data = handle.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise InputValueError(
            f"{path} is larger than {size_text(MAX_JSON_BYTES)}, more than any record genodiff "
            f"writes; {advice}"
        )
    try:
        content = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputValueError(f"{path} is not valid JSON ({err}); {advice}") from None
    except RecursionError:  # nested deeper than Python's JSON parser goes
        raise InputValueError(
            f"{path}: the record is nested more than {MAX_DEPTH} containers deep"
        ) from None
    if not isinstance(content, dict):
        raise InputValueError(
            f"{path} holds a JSON {type(content).__name__}, not the object (mapping) expected"
        )
    return plain_tree(content, path)


def check_yaml_file(path: Path) -> None:
    """An input error naming the YAML file ``path`` when it is larger than ``MAX_JSON_BYTES``,
    nests collections more than ``MAX_DEPTH`` deep, or expands to more than
    ``MAX_YAML_VALUES`` values, each alias counted with everything its anchor holds (see the
    module docstring); read as parser events: no value is built and no tag is acted on. YAML
    that does not parse is left to the reader, which says where."""
    import yaml

    with path.open("rb") as handle:
        data = handle.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise InputValueError(
            f"{path} is larger than {size_text(MAX_JSON_BYTES)}, more than any config; give "
            "the config file itself"
        )
    # The C parser where built; where it refuses the file (libyaml stops at 1,000 levels,
    # where the Python parser goes on and the reader's recursion fails), Python's.
    for loader in dict.fromkeys([getattr(yaml, "CSafeLoader", yaml.SafeLoader), yaml.SafeLoader]):
        try:
            _check_yaml_events(path, yaml.parse(data, Loader=loader))
            return
        except yaml.YAMLError:
            continue


def _check_yaml_events(path: Path, events: Iterator[Any]) -> None:
    """``check_yaml_file``'s count of the parser's ``events`` of ``path``."""
    import yaml

    sizes: dict[str, int] = {}  # values under each anchor, itself included
    open_collections: list[list] = []  # [anchor, values so far] of each collection open
    total = 0
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            open_collections.append([event.anchor, 1])
            if len(open_collections) > MAX_DEPTH:
                raise InputValueError(
                    f"{path}: collections are nested more than {MAX_DEPTH} deep (line "
                    f"{event.start_mark.line + 1}), deeper than any config"
                )
            size = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = open_collections.pop()
            if anchor is not None:
                sizes[anchor] = size
            if open_collections:
                open_collections[-1][1] += size
            continue  # counted when it opened and as its values came
        elif isinstance(event, yaml.AliasEvent | yaml.ScalarEvent):
            alias = isinstance(event, yaml.AliasEvent)
            if alias and any(anchor == event.anchor for anchor, _ in open_collections):
                raise InputValueError(
                    f"{path}: the alias *{event.anchor} (line {event.start_mark.line + 1}) is "
                    f"inside the collection &{event.anchor} it names, a value that holds itself "
                    "(no config does): write the values out"
                )
            size = sizes.get(event.anchor, 1) if alias else 1
            if not alias and event.anchor is not None:
                sizes[event.anchor] = 1
            if open_collections:
                open_collections[-1][1] += size
        else:
            continue
        total += size
        if total > MAX_YAML_VALUES:
            raise InputValueError(
                f"{path} expands to more than {MAX_YAML_VALUES:,} values (line "
                f"{event.start_mark.line + 1}; aliases of anchors that hold aliases "
                "multiply), more than any config: write the values out"
            )


def bounded_yaml_file(path: Path) -> bool:
    """Whether ``check_yaml_file`` passes ``path``, a YAML file that a reader may or may not
    need (one beside an experiment); a warning naming it and what is wrong when not."""
    try:
        check_yaml_file(path)
    except InputValueError as refusal:
        warn_user(f"{refusal}; it is left out of the configs read")
        return False
    return True


class _Walk:
    """One walk of a tree: the values counted so far, every visit of a shared one included."""

    def __init__(self, source: str) -> None:
        self.source, self.nodes = source, 0

    def copy(self, value: Any, where: str, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.refusal(
                where,
                f"is not a tree of at most {MAX_NODES:,} values (nested containers that hold "
                "one another several times?)",
            )
        if depth > MAX_DEPTH:
            raise self.refusal(where, f"is nested more than {MAX_DEPTH} containers deep")
        if isinstance(value, Node):
            value = self.omegaconf_value(value, where)
        if isinstance(value, str) and (INTERPOLATION in value or value == MISSING):
            shown = value if len(value) <= 60 else value[:57] + "..."
            raise self.refusal(
                where,
                f"holds {shown!r}, which OmegaConf would resolve (an interpolation or a missing "
                "value); genodiff does not resolve what a file holds: write the value itself",
            )
        if isinstance(value, SCALARS):
            return value
        if isinstance(value, dict):
            keys = [key for key in value if not isinstance(key, str)]
            if keys:
                raise self.refusal(where, f"has a key that is not a string ({keys[0]!r})")
            return {
                key: self.copy(item, f"{where}.{key}" if where else key, depth + 1)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.copy(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
        raise self.refusal(
            where,
            f"holds a {type(value).__module__}.{type(value).__qualname__}, not a plain value "
            "(dict, list, str, number, bool or null)",
        )

    def omegaconf_value(self, node: Node, where: str) -> Any:
        """What an OmegaConf node holds, unresolved: a container's dict or list of nodes, a
        value node's value (an interpolation as its string)."""
        try:
            return node._value()  # OmegaConf's own accessor of the raw, unresolved content
        except Exception as err:  # noqa: BLE001 (a node unpickled from a file may be any state)
            detail = " ".join(str(err).split())[:160] or type(err).__name__
            raise self.refusal(
                where, f"holds an OmegaConf node that cannot be read ({detail})"
            ) from None

    def refusal(self, where: str, problem: str) -> InputValueError:
        return InputValueError(f"{self.source}: {where or 'the record'} {problem}")
