"""Library errors say what is wrong in the library's terms; the CLI adds the option names.

A message raised (or warned) outside ``genodiff/cli.py`` names no command-line option: it
names the argument at fault (``num_windows must be >= 1``) and passes it as ``parameter=``,
which ``genodiff.cli.error_line`` turns into the option (``(--num-windows)``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from genodiff import cli

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "genodiff", ROOT / "plugins" / "genodiff-text" / "src" / "genodiff_text")
# Command lines of their own, whose messages name their own options.
OWN_COMMAND_LINES = {
    ROOT / "genodiff" / "cli.py",
    ROOT / "plugins" / "genodiff-text" / "src" / "genodiff_text" / "convert.py",
}
OPTION = re.compile(r"--[A-Za-z]")
# Parameters that are no option of the CLI: a positional argument, a Python-only argument.
# Arguments of library calls that no command takes (download's retries: `genodiff data hg38`
# keeps the default).
NOT_OPTIONS = {
    "samples",
    "sequences",
    "generation_config",
    "generator",
    "progress",
    "data_source",
    "retries",
}


def library_modules() -> list[Path]:
    modules = [path for root in SOURCES for path in sorted(root.rglob("*.py"))]
    assert len(modules) > 50  # the walk found the packages
    return [path for path in modules if path not in OWN_COMMAND_LINES]


def is_warning(node: ast.AST) -> bool:
    """``warnings.warn(...)``, ``warn(...)`` or ``warn_user(...)`` (genodiff's warnings for
    the user, ``genodiff/user_warnings.py``)."""
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    return name in ("warn", "warn_user")


def options_in_messages(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal (f-string parts included) of ``source`` that holds
    ``--`` followed by a letter and is part of a message: inside a ``raise`` or a ``warn(...)``
    call, or assigned in the same function to a variable that flows into one (directly or
    through other variables: ``advice = "... --length"; warn(f"...; {advice}")``)."""
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    messages = [n for n in ast.walk(tree) if isinstance(n, ast.Raise) or is_warning(n)]
    for function in functions:
        messages += assignments_into_messages(function)
    found = {
        (inner.lineno, inner.value)
        for node in messages
        for inner in ast.walk(node)
        if isinstance(inner, ast.Constant)
        and isinstance(inner.value, str)
        and OPTION.search(inner.value)
    }
    return sorted(found)


def assignments_into_messages(function: ast.AST) -> list[ast.AST]:
    """The values assigned in ``function`` to the variables its ``raise`` statements and
    ``warn(...)`` calls read, and to the variables those values read, and so on."""
    own = list(walk_own(function))
    messages = [n for n in own if isinstance(n, ast.Raise) or is_warning(n)]
    read = {n.id for m in messages for n in ast.walk(m) if isinstance(n, ast.Name)}
    assignments = [
        (names_assigned(n), n.value)
        for n in own
        if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign) and n.value is not None
    ]
    values: list[ast.AST] = []
    while True:
        new = [v for names, v in assignments if names & read and v not in values]
        if not new:
            return values
        values += new
        read |= {n.id for v in new for n in ast.walk(v) if isinstance(n, ast.Name)}


def walk_own(function: ast.AST):
    """The nodes of ``function``'s body, not those of the functions defined in it."""
    for child in ast.iter_child_nodes(function):
        yield child
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from walk_own(child)


def names_assigned(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def literal_parameters(source: str) -> list[tuple[int, str]]:
    """(line, name) of every literal name given as ``parameter=`` in ``source`` (a string or a
    tuple of strings)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "parameter":
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            found += [
                (v.lineno, v.value)
                for v in values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            ]
    return found


def test_the_check_finds_an_option_in_a_raise_or_a_warning():
    source = """
import warnings
def f(n):
    if n < 1:
        raise ValueError(f"--num-windows must be >= 1, got {n}")
    warnings.warn("pass --length 8")
    raise ValueError("num_windows must be >= 1")  # no option: not found
def g(n, unit):
    advice = f"pass --length {n}" if n else "pass --block"
    what = f"{n} {unit}; {advice}"
    warnings.warn(f"too long: {what}")
    hint = "see --help"  # read by no message: not found
    def inner():
        return "--nested"  # another function's: not found
"""
    assert options_in_messages(source) == [
        (5, "--num-windows must be >= 1, got "),
        (6, "pass --length 8"),
        (9, "pass --block"),
        (9, "pass --length "),
    ]


def test_no_library_error_or_warning_names_a_command_line_option():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in library_modules()
        for line, text in options_in_messages(path.read_text())
    ]
    assert not offenders, "name the argument and pass parameter= instead:\n" + "\n".join(offenders)


def test_every_parameter_named_in_the_library_is_an_option_of_the_cli():
    options = cli.option_names(cli.build_parser())
    unknown = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path in library_modules()
        for line, name in literal_parameters(path.read_text())
        if name not in options and name not in NOT_OPTIONS
    ]
    assert not unknown, "no CLI option has this name (the argparse dest):\n" + "\n".join(unknown)


def test_the_cli_names_each_parameter_by_its_first_long_option():
    options = cli.option_names(cli.build_parser())
    assert options["top_p"] == "--top-p"  # not its alias --nucleus
    assert options["data_file"] == "--file"  # genodiff eval's --file (aliases --fasta, --text)
    assert options["test_fraction"] == "--oracle-test-fraction"
    assert options["help"] == "--help"  # not -h
