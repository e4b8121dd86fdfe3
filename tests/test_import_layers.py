"""The package's import structure: no module imports a higher layer, and no import cycle.

Every ``import`` statement of every module under ``genodiff/`` counts: at module level, inside
functions (lazy imports) and under ``if TYPE_CHECKING`` (a type-only import is still a
dependency of the code that names the type). A *unit* is a top-level module
(``genodiff/generate.py``) or a subpackage (``genodiff/samplers/``); ``LAYERS`` orders the units
from the foundation up, and a module may import from its own unit or from units listed before
its own. ``tests/test_import_layers.py`` is what keeps docs/architecture.md's layer picture true.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "genodiff"

# Bottom to top. Within the package, data flows upwards only (docs/architecture.md §2).
LAYERS = (
    "version",
    "errors",
    "user_warnings",
    "memory",
    "atomic_files",
    "progress",
    "threads",
    "devices",
    "syncs",
    "randomness",
    "resources",
    "named_models",
    "hub",
    "plain_records",
    "batch_shard",
    "parallel",
    "registry",
    "shipped_configs",
    "config_values",
    "generation_config",
    "conditioning",
    "tokenizers",
    "trainer_spec",
    "config",
    "ops",
    "backbones",
    "processes",
    "guidance",
    "samplers",
    "objectives",
    "model",
    "checkpoints",
    "data",
    "sample_formats",
    "domains",
    "sample_files",
    "trained_window",
    "generate",
    "evaluate",
    "scorers",
    "generative_perplexity",
    "training",
    "finetuning",
    "classifiers",
    "metrics",
    "pipeline",
    "sample_quality",
    "cli",
    "__init__",  # the package's front door: lazy names of the public API
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (PACKAGE.parent / relative).with_suffix(".py").is_file() or (
        PACKAGE.parent / relative / "__init__.py"
    ).is_file()


def imported_modules(path: Path, package: str | None = None) -> set[str]:
    """The genodiff modules ``path`` (a module of ``package``: by default the one its place
    under genodiff/ says) imports anywhere in its body (``from genodiff import x`` counts as
    importing ``genodiff.x`` when that is a module, else the package itself)."""
    if package is None:
        package = module_name(path)
        if path.name != "__init__.py":
            package = package.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "genodiff")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1 packages
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "genodiff":
                continue
            submodules = {f"{base}.{a.name}" for a in node.names} if node.names else set()
            modules = {name for name in submodules if _is_module(name)}
            found.update(modules)
            if len(modules) < len(submodules):  # names defined in ``base`` itself
                found.add(base)
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {module_name(p): imported_modules(p) for p in sorted(PACKAGE.rglob("*.py"))}
    return {module: {m for m in targets if m != module} for module, targets in graph.items()}


def test_every_unit_has_a_layer():
    units = {unit_of(module) for module in import_graph()}
    assert units <= set(LAYERS), f"place these in LAYERS: {sorted(units - set(LAYERS))}"
    assert len(LAYERS) == len(set(LAYERS))


def test_no_module_imports_a_higher_layer():
    rank = {unit: i for i, unit in enumerate(LAYERS)}
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if rank[unit_of(target)] > rank[unit_of(module)]
    )
    assert not upward, "imports from a lower layer up to a higher one:\n" + "\n".join(upward)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of nodes (first repeated last), or None."""
    state: dict[str, int] = defaultdict(int)  # 0 unseen, 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            if state[nxt] == 0 and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state[node] == 0 and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize(
    ("graph", "has_cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, False),
        ({"a": {"a2"}, "a2": {"b"}, "b": {"a2"}}, True),
    ],
)
def test_find_cycle_finds_cycles_and_only_them(graph, has_cycle):
    cycle = find_cycle(graph)
    assert (cycle is not None) == has_cycle
    if cycle:
        assert cycle[0] == cycle[-1]
        assert all(b in graph[a] for a, b in zip(cycle, cycle[1:], strict=False))


def test_the_walker_sees_every_kind_of_import(tmp_path):
    """Module level, inside a function, under TYPE_CHECKING, relative, ``import a.b``, and a
    name defined by a package (the package itself is imported)."""
    source = tmp_path / "example.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import genodiff.errors\n"
        "from genodiff import registry, __version__\n"
        "from .request import SampleRequest\n"
        "from ..objectives import mdlm\n"
        "if TYPE_CHECKING:\n"
        "    from genodiff.tokenizers import Tokenizer\n"
        "def f():\n"
        "    from genodiff.checkpoints.load import load_model\n"
        "    import numpy\n"
    )
    assert imported_modules(source, "genodiff.samplers") == {
        "genodiff.errors",
        "genodiff.registry",
        "genodiff",  # __version__ is a name of the package itself
        "genodiff.samplers.request",
        "genodiff.objectives.mdlm",
        "genodiff.tokenizers",
        "genodiff.checkpoints.load",
    }
