"""Commands printed in the documentation, read from its text, so that a test runs what a reader
copies: a code block found by a marker line, split into commands (``\\`` continuations joined,
``#`` comments dropped), and each run through ``genodiff.cli.main`` with options the test
appends (smaller sizes: Hydra overrides and flags given last win)."""

from __future__ import annotations

import glob
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from genodiff import cli

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
