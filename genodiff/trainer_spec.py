"""The keyword arguments of ``lightning.Trainer`` read from Lightning's source, without
importing Lightning (several seconds): a config's ``trainer`` section is checked against them
(``genodiff.config.section_spec``), so a mistyped key or a wrong value anywhere in a config is
said before a run imports Lightning.

Each argument's default is the literal its ``def`` gives; its annotation is evaluated with the
names it uses looked up statically: a name Lightning's modules assign (``_PRECISION_INPUT =
Union[...]``, through the ``from ... import`` chain that brings it in) is evaluated the same
way, a name from the standard library (``typing``, ``datetime``) is imported, and any other
(torch's and Lightning's classes, which no config value is judged against) is ``Any``.
Where the source cannot be read so (another layout), ``lightning.Trainer`` is imported.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

TRAINER_MODULE = "lightning.pytorch.trainer.trainer"


def trainer_signature() -> inspect.Signature:
    """The signature of ``lightning.Trainer.__init__`` (``self`` left out), read from the
    source where it can be, else from the imported class."""
    signature = _signature_from_source()
    if signature is not None:
        return signature
    import lightning

    parameters = list(inspect.signature(lightning.Trainer.__init__).parameters.values())
    return inspect.Signature(parameters[1:])


def trainer_init() -> Callable[..., None]:
    """A function of ``trainer_signature()``'s parameters and annotations: what
    ``genodiff.config_values.callable_spec`` reads of ``lightning.Trainer.__init__``."""

    def init(**kwargs: Any) -> None:
        raise NotImplementedError("only its signature is read")

    signature = trainer_signature()
    init.__signature__ = signature
    init.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return init


@functools.cache
def _signature_from_source() -> inspect.Signature | None:
    tree = _module_tree(TRAINER_MODULE)
    init = next(
        (
            node
            for cls in (tree.body if tree is not None else ())
            if isinstance(cls, ast.ClassDef) and cls.name == "Trainer"
            for node in cls.body
            if isinstance(node, ast.FunctionDef) and node.name == "__init__"
        ),
        None,
    )
    if init is None:
        return None
    args = init.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [
        *zip(positional, defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    parameters = []
    try:
        for arg, default in pairs[1:]:  # without self
            value = inspect.Parameter.empty if default is None else ast.literal_eval(default)
            annotation = (
                _evaluated(TRAINER_MODULE, ast.unparse(arg.annotation)) if arg.annotation else Any
            )
            parameters.append(
                inspect.Parameter(
                    arg.arg, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=annotation
                )
            )
    except ValueError:  # a default that is no literal: not this layout
        return None
    return inspect.Signature(parameters)


def _source_file(module: str) -> Path | None:
    """The file of ``module`` below its top package's folder, found without importing it."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)  # a top-level package: nothing is run
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _module_tree(module: str) -> ast.Module | None:
    path = _source_file(module)
    if path is None:
        return None
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


class _Names(dict):
    """The names an expression of ``module`` uses, looked up as ``_value`` says (eval's local
    mapping: a name missing here goes on to the builtins)."""

    def __init__(self, module: str) -> None:
        super().__init__()
        self.module = module

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise KeyError(name)
        return _value(self.module, name)


def _evaluated(module: str, expression: str) -> Any:
    """``expression`` (source text of ``module``) evaluated with ``_Names``; ``Any`` where it
    cannot be."""
    try:
        return eval(expression, {"__builtins__": builtins}, _Names(module))  # noqa: S307
    except Exception:
        return Any


@functools.cache
def _value(module: str, name: str) -> Any:
    """What ``name`` is in ``module``: its module-level assignment evaluated, or what the
    ``from ... import`` that brings it in gives; ``Any`` for anything else."""
    tree = _module_tree(module)
    for node in tree.body if tree is not None else ():
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return _evaluated(module, ast.unparse(node.value))
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _imported(_absolute(module, node), alias.name)
    return Any


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` of ``module`` names, relative imports resolved (a
    package's ``__init__`` counts as the package)."""
    if not node.level:
        return node.module or ""
    package = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _is_package(module: str) -> bool:
    path = _source_file(module)
    return path is not None and path.name == "__init__.py"


def _imported(module: str, name: str) -> Any:
    top = module.split(".")[0]
    if top == TRAINER_MODULE.split(".")[0]:
        return _value(module, name)
    if top in sys.stdlib_module_names:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return Any
    return Any
