"""Commands and Python examples printed in the documentation, read from its text, so that a test
runs what a reader copies. Shell: a code block found by a marker line, split into commands
(``\\`` continuations joined, ``#`` comments dropped), and each run through ``genodiff.cli.main``
with options the test appends (smaller sizes: Hydra overrides and flags given last win).
Python: every ```` ```python ```` block of a page, run in order in one namespace as a reader
pastes them into one session, with the sizes made smaller by exact text substitutions the test
lists (each must match the page: a changed example fails until the test follows it). A block
fenced ```` ```python signature ```` shows a signature, not code, and is not run."""

from __future__ import annotations

import glob
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from genodiff import cli

# A fenced Python block: its info string (```python, or ```python signature: not run) and body.
PYTHON_BLOCK = re.compile(
    r"^```python(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.DOTALL | re.MULTILINE
)

# VAR=$(ls PATTERN): a shell variable set to the one file a glob pattern matches.
ASSIGNMENT = re.compile(r"^(?P<name>[A-Z_]+)=\$\(ls (?P<pattern>\S+)\)$")


def code_block(path: Path, marker: str) -> str:
    """The fenced code block of ``path`` whose first line is ``marker``, to its closing fence."""
    text = path.read_text(encoding="utf-8")
    start = text.index(marker)
    assert text[:start].endswith(("```bash\n", "```\n")), f"{marker!r} opens no code block"
    return text[start : text.index("```", start)]


def commands(block: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comment lines and trailing
    comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    found = []
    for line in joined.splitlines():
        command = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]  # a comment starts at "#"
        if command.strip():
            found.append(" ".join(command.split()))
    return found


def run(command_lines: Sequence[str], extra: Callable[[list[str]], list[str]]) -> dict[str, str]:
    """Run each command in the working folder: ``genodiff ...`` through ``cli.main`` with
    ``extra(its words)`` appended (asserting exit status 0), and ``VAR=$(ls PATTERN)`` by
    matching the pattern (exactly one file); ``$VAR`` is replaced in later commands. Returns
    the variables set."""
    variables: dict[str, str] = {}
    for line in command_lines:
        assignment = ASSIGNMENT.match(line)
        if assignment:
            (found,) = glob.glob(assignment["pattern"])
            variables[assignment["name"]] = found
            continue
        words = [variables.get(w[1:], w) if w.startswith("$") else w for w in shlex.split(line)]
        assert words[0] == "genodiff", line
        code = cli.main([*words[1:], *extra(words)])
        assert code == 0, line
    return variables


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of ``path`` in order, those fenced ```python signature left out."""
    text = path.read_text(encoding="utf-8")
    found = PYTHON_BLOCK.finditer(text)
    return [block["body"] for block in found if block["info"].strip() != "signature"]


def run_python(blocks: Sequence[str], smaller: Mapping[str, str], name: str) -> dict:
    """Run ``blocks`` in order in one namespace, each with every key of ``smaller`` replaced by
    its value (smaller sizes); every key must occur in some block, so that an example that
    changed is looked at again. ``name`` labels the blocks in tracebacks. Returns the
    namespace."""
    unused = [old for old in smaller if not any(old in block for block in blocks)]
    assert not unused, f"{name}: no example holds {unused} any more: update the test"
    namespace: dict = {"__name__": "__doc_example__"}
    for index, block in enumerate(blocks):
        for old, new in smaller.items():
            block = block.replace(old, new)
        exec(compile(block, f"<{name}, python block {index + 1}>", "exec"), namespace)  # noqa: S102
    return namespace
