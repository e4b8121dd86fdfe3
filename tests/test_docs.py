"""The documentation holds together: every relative link in README.md, BENCHMARKS.md, docs/*.md
and the text plugin's README.md names a file of this repository and, with a ``#anchor``, a
heading of that file (GitHub's anchor rule), README.md stays a short entry page, a printed
variant of a quick start's training trains into a folder of its own, and what the docs quote of
a shipped config is what it holds."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "BENCHMARKS.md",
        *(ROOT / "docs").glob("*.md"),
        ROOT / "plugins" / "genodiff-text" / "README.md",
    ]
)
README_MAX_LINES = 300

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown file outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: its text (links and code spans as their text), lower-case,
    every character that is not a letter, digit, space, '-' or '_' dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = _CODE_SPAN.sub(lambda m: m.group(2), text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        anchor = github_anchor(match.group(2))
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    """The link targets of a Markdown file that are neither URLs nor e-mail addresses."""
    targets = []
    for line in prose_lines(path.read_text(encoding="utf-8")):
        line = _CODE_SPAN.sub("", line)
        for target in _LINK.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:
                targets.append(target)
    return targets


def test_the_anchor_rule_is_githubs():
    assert github_anchor("Quick start (two commands)") == "quick-start-two-commands"
    assert github_anchor("Did it work? An oracle") == "did-it-work-an-oracle"
    assert github_anchor("Evaluating: `genodiff eval`") == "evaluating-genodiff-eval"
    assert github_anchor("MDLM + tiny DiT") == "mdlm--tiny-dit"
    assert github_anchor("`init_from=DIR` or a Hub id") == "init_fromdir-or-a-hub-id"
    assert github_anchor("6. Backbone facts") == "6-backbone-facts"


def test_the_documents_exist():
    missing = [str(p.relative_to(ROOT)) for p in DOCS if not p.is_file()]
    assert not missing, missing
    assert len(DOCS) >= 8  # README, BENCHMARKS, the plugin's README and the docs/ pages


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = []
    for target in relative_links(doc):
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
            continue
        try:
            linked.relative_to(ROOT)
        except ValueError:
            broken.append(f"{target}: outside the repository")
            continue
        if anchor:
            if linked.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(linked):
                broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_names_a_path_outside_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    outside = re.findall(r"(?<![\w.])/(?:work|home|Users|shared|mnt|scratch)/[^\s`)]*", text)
    assert not outside, f"{doc.relative_to(ROOT)}: {outside}"


def test_the_readme_is_a_short_entry_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines"
    # ... and it maps the docs: every page under docs/ is linked from it.
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in relative_links(ROOT / "README.md")}
    unmapped = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unmapped, f"docs/ pages missing from README.md's map: {unmapped}"


# A repository path in a code block: configs/..., data/..., notebooks/..., bench/..., tests/...
_REPOSITORY_PATH = re.compile(r"(?<![\w/.$-])((?:configs|data|notebooks|bench|tests)/[\w./-]*\w)")
# Paths the commands printed beside them create, or a reader writes: not in the repository.
CREATED_BY_THE_EXAMPLE = {"data/hg38", "configs/model/bigru.yaml"}
PLUGIN_CONFIGS = ROOT / "plugins" / "genodiff-text" / "src" / "genodiff_text" / "configs"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_code_block_names_exists(doc):
    """An example runs as printed only if the files it names exist (the text plugin's configs
    are found under its configs/, as `genodiff train text_demo` finds them)."""
    fenced, missing = False, []
    for line in doc.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif fenced:
            for path in _REPOSITORY_PATH.findall(line):
                shipped = PLUGIN_CONFIGS / path.removeprefix("configs/")
                if not ((ROOT / path).exists() or shipped.exists()):
                    missing.append(path)
    assert set(missing) <= CREATED_BY_THE_EXAMPLE, f"{doc.relative_to(ROOT)}: {missing}"


# What an example writes: `--out FILE` of a command, `.save("FILE")` in Python.
_WRITTEN = re.compile(r"--out\s+(\S+)|\.save\(\"([^\"]+)\"\)")


def test_the_readme_examples_run_in_order_without_refusing_their_own_files():
    """A reader runs README.md's examples top to bottom in one folder; genodiff refuses to
    overwrite a sample file, so no two examples may write the same one."""
    fenced, written = False, []
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif fenced:
            written += [out or saved for out, saved in _WRITTEN.findall(line)]
    twice = sorted({path for path in written if written.count(path) > 1})
    assert written and not twice, f"README.md examples write {twice} more than once"


# The experiments the quick starts train (README.md, docs/guidance.md, the text plugin's
# README) into their config's output_dir: a printed variant of one (any override) names a
# folder of its own or resumes that run; else, after the quick start, it is refused (the folder
# holds a run: genodiff/checkpoints/run_folder.py, check_output_dir).
QUICK_START_CONFIGS = {"demo", "demo_quick", "conditional_demo", "text_demo"}
_TRAIN = re.compile(r"genodiff train (?:configs/)?(\w+)(?:\.yaml)?((?: [\w.]+=[^\s`]+)*)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_printed_variant_of_a_quick_start_trains_into_a_folder_of_its_own(doc):
    text = re.sub(r"\s*\\\n\s*", " ", doc.read_text(encoding="utf-8"))  # continuation lines
    into_the_quick_start = [
        match[0]
        for match in _TRAIN.finditer(text)
        if match[1] in QUICK_START_CONFIGS
        and match[2]
        and not re.search(r" (output_dir|ckpt_path)=", match[2])
    ]
    assert not into_the_quick_start, "add output_dir=outputs/<a name of its own> to each"


def test_the_walkthrough_quotes_the_steps_its_generator_saved():
    """docs/guidance.md's "Steps" note: left out, --steps is the run's saved ``samples.steps``
    (genodiff/generation_config.py), so the number it quotes, and the network calls at two a
    step under D-CFG, must be those of configs/conditional_demo.yaml. Was: 1,024 steps and
    2,048 calls, the default of a run that saves none."""
    from genodiff.config import load_config

    text = " ".join((ROOT / "docs" / "guidance.md").read_text(encoding="utf-8").split())
    note = re.search(
        r"Leave out `--sampler` and `--steps` and the ancestral sampler takes\D*?(\d[\d,]*)"
        r".*?under D-CFG.*?(\d[\d,]*) calls for a batch",
        text,
    )
    assert note, "docs/guidance.md: the walkthrough's note on the steps is gone"
    steps, calls = (int(number.replace(",", "")) for number in note.groups())
    saved = load_config("configs/conditional_demo.yaml").samples.steps
    assert (steps, calls) == (saved, 2 * saved)
