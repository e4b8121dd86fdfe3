"""``GenerationConfig``: every sampling option, declared once.

Each field carries its type, default, allowed range or choices, help text and the
``genodiff sample`` flag that sets it (``dataclasses.field`` metadata, an ``Option``). From it
come the checks of ``Model.generate`` (``GenerationConfig.updated``), the flags of
``genodiff sample`` (``genodiff.cli``, a loop over ``options()``) and the option table of
docs/python_api.md (checked against it by tests/test_generation_config.py), so the command's
help, the API and the docs cannot disagree.

Where a value comes from, the first that sets it wins:

1. the call: ``Model.generate(..., steps=64)``, ``genodiff sample --steps 64``;
2. the model's generation config, ``Model.generation_config``: a ``generation_config`` passed
   to the call, else the one the model was saved with, built from its run's ``samples:``
   section (``from_run_config``: sampler, steps, seed, batch_size), which every checkpoint
   and export holds;
3. the defaults below.

This module imports nothing heavy (the CLI builds its parser from it before torch loads).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from genodiff import registry
from genodiff.config_values import Range
from genodiff.errors import InputImportError, InputValueError, did_you_mean

#: The most sampling steps a request may ask for: each is one pass of the sampler's loop, even
#: where no token changes (the MDLM paper samples with thousands); more is a typo, not a plan.
MAX_STEPS = 1_000_000

#: The schedules of gamma: "constant", or "ramp" (weak while the sequence is mostly masked,
#: full strength at the end; Rojas et al. 2025 find early guidance hurts and late guidance helps).
GUIDANCE_SCHEDULES = ("constant", "ramp")
#: The two forms of D-CBG: one classifier call per (position, value), or one forward and one
#: backward pass on the one-hot input (the first-order Taylor form).
CLASSIFIER_FORMS = ("first-order", "exact")
#: The forms of a guided masked-diffusion step (``genodiff.guidance``): "x0" guides the value
#: of an unmasking position and keeps the unguided unmasking rate (the reference code's D-CFG);
#: "transition" normalises the guided transition over every outcome, staying masked included
#: (the paper's equations).
GUIDANCE_FORMS = ("x0", "transition")
#: gamma above this is refused: the guided distribution is then a point mass in all but name.
MAX_GUIDANCE = 100.0

#: The run config section a model's saved generation config is read from.
RUN_SECTION = "samples"


@dataclass(frozen=True)
class Option:
    """What a ``GenerationConfig`` field is to its users (its ``field`` metadata).

    ``kind``: the type of its values, which the command line parses the flag's text as (int,
    float or str); ``paths``: a str field that also takes an ``os.PathLike``; ``range``: a
    ``genodiff.config_values`` range spec
    (``>=1``, ``(0, 1]``; after ``;`` a note for the error); ``choices``: the values it takes;
    ``aliases``: more flags besides ``--<name with dashes>``; ``default_text``: what the
    default means where it is None; ``run_key``: the key of the run's ``samples:`` section a
    saved model's value is read from; ``guide``: also takes a loaded classifier; ``check``: a
    further check of a value, against what is installed (the sampler: the objectives')."""

    help: str
    kind: type
    range: str | None = None
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    default_text: str | None = None
    run_key: str | None = None
    paths: bool = False
    guide: bool = False
    check: Callable[[Any], None] | None = None

    @property
    def rule(self) -> str | None:
        """The range as a value must be: ``>= 1``, ``in (0, 1]``; None without one."""
        if self.range is None:
            return None
        rule = self.range.partition(";")[0].strip()
        if rule[0] in "[(":
            return f"in {rule}"
        operator = rule.rstrip("0123456789.-+e ")
        return f"{operator} {rule[len(operator) :]}"


def installed_samplers(plugins: bool = True) -> list[str]:
    """The names of the installed objectives' samplers (``Objective.samplers``), sorted: the
    built-in objectives', and with ``plugins`` every objective plugin's too (each imported)."""
    objectives = registry.available("objective", plugins=plugins).values()
    return sorted({name for objective in objectives for name in getattr(objective, "samplers", {})})


def check_sampler(name: str) -> None:
    """InputValueError (parameter ``sampler``) for a ``name`` that no installed objective has
    as a sampler (a typo), naming the one spelled closest; which samplers a model takes (its
    objective's) is checked when it draws. The plugins are imported only for a name that no
    built-in objective has, and where one of them fails to import the name is left to that
    check: a broken plugin stands in the way of no other's samplers."""
    if name in installed_samplers(plugins=False):
        return
    try:
        known = installed_samplers()
    except InputImportError:  # a plugin that fails to import (said where it is used)
        return
    if name not in known:
        raise InputValueError(
            f"unknown sampler {name!r}{did_you_mean(name, known)}; the samplers: "
            f"{', '.join(known)} (which of them a model takes: its objective's)",
            parameter="sampler",
        )


def check_block_and_stride(block: int, stride: int) -> None:
    """InputValueError unless semi-ar windows of ``block`` tokens can advance by ``stride``:
    a block of at least 2 tokens, and consecutive windows sharing some (0 < stride < block)."""
    if block < 2:
        raise InputValueError(f"block must be >= 2 tokens, got {block}", parameter="block")
    if not 0 < stride < block:
        raise InputValueError(
            f"stride must be in [1, block - 1] = [1, {block - 1}] so that consecutive windows "
            f"share block - stride tokens, got stride {stride}",
            parameter=("stride", "block"),
        )


def _option(default: Any, help: str, kind: type, **details: Any) -> Any:
    return field(default=default, metadata={"option": Option(help, kind, **details)})


@dataclass(frozen=True)
class GenerationConfig:
    """How ``Model.generate`` and ``genodiff sample`` draw sequences (module doc: where each
    value comes from). Frozen: ``updated(**changes)`` returns a checked copy. InputValueError
    (``parameter``: the field) for a value of the wrong type, out of range or not a choice."""

    length: int | None = _option(
        None,
        "tokens, bp for DNA",
        int,
        range=">=1",
        default_text="the training window, or the infill template's",
    )
    steps: int = _option(
        1024,
        "steps T of ancestral and cached, per window of semi-ar, of SEDD's, UDLM's and "
        "Plaid's samplers; first-hitting and AR models take none (set in the call, it is "
        "refused; from a generation config, unused)",
        int,
        range=f"[1, {MAX_STEPS}]",
        run_key="steps",
    )
    sampler: str | None = _option(
        None,
        "MDLM/D3PM: ancestral, cached, first-hitting, semi-ar; SEDD: analytic, euler; "
        "UDLM, Plaid, AR: ancestral",
        str,
        default_text="the first named for the objective: ancestral (SEDD: analytic)",
        run_key="sampler",
        check=check_sampler,
    )
    temperature: float = _option(
        1.0, "divides the log-probabilities before every draw", float, range=">0"
    )
    top_p: float = _option(
        1.0,
        "nucleus sampling: the probability mass kept at every draw (1: all)",
        float,
        range="(0, 1]",
        aliases=("--nucleus",),
    )
    prefix: str | None = _option(
        None,
        "fixed start: bases for DNA (ACGTTG, either case), text for text; excludes infill",
        str,
        default_text="none",
    )
    infill: str | os.PathLike | None = _option(
        None,
        "template file; DNA: a FASTA whose first record fixes its upper-case ACGT and "
        "generates N / lower-case positions; text: a file whose first line is text with the "
        "mask token ([MASK]) at each token to generate. Sets the length",
        str,
        default_text="none",
        paths=True,
    )
    block: int | None = _option(
        None,
        "window length in tokens; semi-ar only, and required there",
        int,
        range=">=1",
        default_text="none",
    )
    stride: int | None = _option(
        None,
        "new tokens per window, < block; semi-ar only, and required there",
        int,
        range=">=1",
        default_text="none",
    )
    label: str | None = _option(
        None,
        "draw sequences of this class (a class name of the model's labelled data, or of the "
        "classifier's for an unconditional model). Guidance per objective: MDLM and D3PM "
        "(every sampler), UDLM (ancestral, at the transition level): classifier-free "
        "(guidance) and classifier (classifier); SEDD: classifier-free only; AR: "
        "classifier-free and FUDGE (classifier); Plaid: none",
        str,
        default_text="none, p(x)",
    )
    guidance: float | None = _option(
        None,
        "guidance strength gamma with a label: 0 = unconditional p(x), 1 = the conditional "
        "model p(x | label), > 1 extrapolates towards the class (stronger, less diverse; "
        "about 1-5 is useful)",
        float,
        # the note follows a value below the range as well as one above it
        range=f"[0, {MAX_GUIDANCE:g}]; 0 is p(x), 1 the conditional model p(x | label), and "
        f"above {MAX_GUIDANCE:g} the guided law is a point mass",
        default_text="1",
    )
    guidance_schedule: str | None = _option(
        None,
        "gamma over sampling: constant, or ramp (rising from 0 to gamma as sampling proceeds, "
        "gamma (1 - t) for diffusion: weak guidance on mostly noise, full at the end)",
        str,
        choices=GUIDANCE_SCHEDULES,
        default_text="constant",
    )
    # a path, or a classifier loaded by genodiff.load_classifier (a NoisyClassifierGuide: the
    # guidance layer's type, checked where it is used, genodiff.generate.plan)
    classifier: str | os.PathLike | Any | None = _option(
        None,
        "classifier-guided sampling with this noisy classifier checkpoint (genodiff "
        "classifier; from Python also one loaded with genodiff.load_classifier): D-CBG for "
        "MDLM/D3PM/UDLM, FUDGE for AR; needs a label",
        str,
        default_text="none: classifier-free guidance by the model's own null label",
        paths=True,
        guide=True,
    )
    classifier_form: str | None = _option(
        None,
        "D-CBG: first-order (one forward + backward pass per step) or exact (one classifier "
        "call per position and base: short sequences only)",
        str,
        choices=CLASSIFIER_FORMS,
        default_text="first-order",
    )
    guidance_form: str | None = _option(
        None,
        "how a guided diffusion step weighs the guidance: x0 (guide the value of each "
        "unmasking token, keep the unguided unmasking rate: the reference code's D-CFG) or "
        "transition (the paper's: the guided transition normalised over every outcome, "
        "staying masked included, so guidance also sets how fast tokens unmask). MDLM/D3PM: "
        "both (first-hitting: transition only with a constant guidance schedule and no time "
        "conditioning); UDLM: transition only; SEDD: x0 only; AR: the two are one",
        str,
        choices=GUIDANCE_FORMS,
        default_text="x0 for classifier-free, transition for classifier guidance",
    )
    seed: int = _option(
        0,
        "the same seed draws the same samples, whatever the batch size",
        int,
        range=">=0; there is no random seed: pick any number of your own",
        run_key="seed",
    )
    batch_size: int = _option(
        16, "sequences per network call", int, range=">=1", run_key="batch_size"
    )

    def __new__(cls, *args: Any, **options: Any) -> GenerationConfig:
        """InputValueError for a name that is no option, listing the options (before the
        dataclass's ``__init__`` would raise Python's TypeError)."""
        _refuse_unknown(options)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for f in fields(self):  # frozen: a NumPy number is kept as the Python one it equals
            object.__setattr__(self, f.name, check_option(f.name, getattr(self, f.name)))
        if self.block is not None and self.stride is not None:
            check_block_and_stride(self.block, self.stride)

    def updated(self, **changes: Any) -> GenerationConfig:
        """A copy with ``changes`` applied (a change of None leaves the value as it is);
        InputValueError for a name that is no option (listing the options) or a bad value."""
        _refuse_unknown(changes)  # a change of None to a name that is no option too
        given = {name: value for name, value in changes.items() if value is not None}
        return dataclasses.replace(self, **given)

    def to_dict(self) -> dict[str, Any]:
        """Every option by name, as transformers' ``GenerationConfig.to_dict``; ``from_dict``
        reads it back (JSON holds it where ``infill`` and ``classifier`` are paths as str)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> GenerationConfig:
        """The defaults with ``values`` applied (``to_dict``'s, a JSON object's): checked as
        ``updated`` checks them, so an unknown name is an InputValueError listing the options;
        a value of None leaves the default."""
        if not isinstance(values, Mapping):
            raise InputValueError(
                f"a generation config is read from a mapping of options, got "
                f"{type(values).__name__}",
                parameter="generation_config",
            )
        return cls().updated(**values)

    @classmethod
    def from_run_config(cls, config: Mapping[str, Any]) -> GenerationConfig:
        """The generation config a run's config (``Model.config``) saves: the defaults, with
        the values its ``samples:`` section sets (``Option.run_key``); the defaults alone for a
        config without one."""
        section = config.get(RUN_SECTION) or {}
        saved = {f.name: section.get(option.run_key) for f, option in options() if option.run_key}
        return cls().updated(**saved)

    def run_section(self) -> dict[str, Any]:
        """The run ``samples:`` section's values that ``from_run_config`` reads back as this
        config (``Option.run_key``: sampler, steps, seed, batch_size), what a saved model keeps
        (``Model.save_pretrained``). InputValueError (``parameter`` ``generation_config``)
        naming an option that a run section does not hold and that differs from its default:
        saved, it would be lost."""
        default = GenerationConfig()
        unsaved = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f, option in options()
            if not option.run_key and getattr(self, f.name) != getattr(default, f.name)
        ]
        if unsaved:
            kept = ", ".join(f.name for f, option in options() if option.run_key)
            raise InputValueError(
                f"the generation config sets {', '.join(unsaved)}, which a saved model does not "
                f"keep (it keeps {kept}): give it to generate instead, or reset it",
                parameter="generation_config",
            )
        return {option.run_key: getattr(self, f.name) for f, option in options() if option.run_key}


def options() -> Iterator[tuple[dataclasses.Field, Option]]:
    """Each field of ``GenerationConfig`` with its ``Option``, in declaration order."""
    for f in fields(GenerationConfig):
        yield f, f.metadata["option"]


def _refuse_unknown(options: Mapping[str, Any]) -> None:
    """InputValueError for the first name of ``options`` that is no generation option, listing
    the options."""
    unknown = [name for name in options if name not in option_names()]
    if unknown:
        raise InputValueError(
            f"unknown generation option {unknown[0]!r}; the options are: "
            f"{', '.join(option_names())}",
            parameter=unknown[0],
        )


def option_names() -> list[str]:
    """The options' names, in declaration order."""
    return [f.name for f in fields(GenerationConfig)]


def flag_of(name: str) -> str:
    """The ``genodiff sample`` flag of option ``name``: ``top_p`` -> ``--top-p``."""
    return "--" + name.replace("_", "-")


def check_option(name: str, value: Any) -> Any:
    """``value`` of option ``name``, a number as a Python int or float (a NumPy
    integer is an integer: ``seed=np.int64(3)``); InputValueError (``parameter`` ``name``)
    unless it fits: its type, a finite number in its range, one of its choices; None where the
    default is None."""
    f = next(f for f in fields(GenerationConfig) if f.name == name)
    option: Option = f.metadata["option"]
    if value is None and f.default is None:
        return value
    if not _is_kind(value, option):
        raise InputValueError(
            f"{name} must be {_KIND_WORDS[option.kind]}, got {value!r}", parameter=name
        )
    if option.kind in (int, float):
        value = option.kind(value)
    if option.kind is float and not math.isfinite(value):
        raise InputValueError(f"{name} must be a finite number, got {value}", parameter=name)
    if option.range is not None and value not in Range.parse(option.range):
        note = option.range.partition(";")[2].strip()
        note = f": {note}" if note else ""
        raise InputValueError(f"{name} must be {option.rule}, got {value}{note}", parameter=name)
    if option.choices and value not in option.choices:
        raise InputValueError(
            f"{name} must be one of: {', '.join(option.choices)}; got {value!r}"
            f"{did_you_mean(value, option.choices)}",
            parameter=name,
        )
    if option.check is not None:
        option.check(value)
    return value


_KIND_WORDS = {int: "an integer", float: "a number", str: "a string"}


def _is_kind(value: Any, option: Option) -> bool:
    if isinstance(value, bool):  # NumPy's bool is no numbers.Integral either
        return False
    if option.kind is float:
        return isinstance(value, numbers.Real)
    if option.kind is int:
        return isinstance(value, numbers.Integral)
    if option.paths and isinstance(value, os.PathLike):
        return True
    if option.guide and not isinstance(value, str):
        return True  # a loaded classifier: genodiff.generate.plan checks its type
    return isinstance(value, option.kind)
