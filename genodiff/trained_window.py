"""The warning when sampling or scoring asks a network to read longer sequences than it was
trained on, and the refusal when a backbone cannot read them at all (``check_backbone_length``).

A model learns from windows of ``data.max_length`` tokens. Sampling reads the whole sequence at
once (semi-ar: one ``block`` at a time), so a longer sequence is read at lengths the network
never saw, and nothing fails: the samples are simply not what the model learned. The
semi-autoregressive sampler makes long sequences from windows of the trained length. A
guidance classifier is likewise trained on windows of its data's length, and guides well only
sequences of about that length.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from torch import nn

from genodiff.backbones.capabilities import capabilities_of
from genodiff.errors import InputValueError, UserInputWarning
from genodiff.user_warnings import warn_user

SEMI_AR = "semi-ar"


def check_backbone_length(
    backbone: nn.Module, length: int | None, setting: str, training: bool = False
) -> None:
    """InputValueError, before any work, when ``backbone`` declares a longest input
    (``Capabilities.max_length``: HyenaDNA's filter length) below the ``length`` tokens that
    ``setting`` asks it to read. The refusal says to keep ``setting`` at most that long or,
    naming the ``model`` key that sets the longest input (``Capabilities.max_length_key``), to
    train with a larger one (``training``) or use a model trained with one."""
    declared = capabilities_of(backbone)
    longest, key = declared.max_length, declared.max_length_key
    if longest is None or length is None or length <= longest:
        return
    bound = f" (model.{key})" if key else ""
    retrain = "train with" if training else "use a model trained with"
    longer = f", or {retrain} a longer model.{key}" if key else ""
    raise InputValueError(
        f"{setting}={length}: the {type(backbone).__name__} backbone reads at most {longest} "
        f"tokens{bound}; keep {setting} at most {longest}{longer}",
        parameter=setting,
    )


def warn_beyond_trained_window(
    config: Mapping[str, Any],
    length: int,
    block: int | None,
    sampler: str,
    samplers: Iterable[str],
    unit: str,
    run_samples: bool = False,
) -> None:
    """``warnings.warn`` when the network would read more tokens at once than the windows of
    ``config``'s training data (``data.max_length``): ``length`` tokens, or with the semi-ar
    ``sampler`` a ``block``. ``samplers``: the model's sampler names; ``unit``: "bp", "tokens";
    ``run_samples``: the samples a training run draws as it ends (its ``samples.length``,
    which no semi-ar sampler draws: ``genodiff.training.fit_run.check_run_sampler``)."""
    trained = config.get("data", {}).get("max_length")
    window = block if sampler == SEMI_AR else length  # tokens the network reads at once
    if trained is None or window is None or window <= trained:
        return
    if run_samples:
        advice, parameter = f"keep samples.length at most {trained} {unit}", None
        if SEMI_AR in samplers:
            advice += f", and draw longer ones from the trained model with the {SEMI_AR} sampler"
    elif sampler == SEMI_AR:
        advice, parameter = f"use a block of at most {trained} {unit}", ("block",)
    elif SEMI_AR in samplers:
        advice = (
            f'to make long sequences, use the semi-autoregressive sampler (sampler="{SEMI_AR}" '
            f"with block={trained} and a smaller stride, such as stride={trained // 2}), which "
            f"extends a sequence window by window, each of the trained length; or keep the "
            f"length at most {trained} {unit}"
        )
        parameter = ("sampler", "block", "stride", "length")
    else:
        advice = f"keep the length at most {trained} {unit} (this model has no {SEMI_AR} sampler)"
        parameter = ("length",)
    what = f"a block of {window} {unit}" if sampler == SEMI_AR else f"{window} {unit}"
    message = (
        f"sampling {what} from a model trained on windows of {trained} {unit} (data.max_length): "
        f"the network never read sequences that long, so what it draws is not what it learned; "
        f"{advice}"
    )
    warn_user(UserInputWarning(message, parameter=parameter))


def warn_scoring_beyond_trained_window(
    config: Mapping[str, Any], longest: int, unit: str, windows: bool = False
) -> None:
    """``warnings.warn`` when scoring would read ``longest`` tokens at once, more than the
    windows of ``config``'s training data (``data.max_length``): a sequence (``Model.score``)
    or, with ``windows``, every window of ``evaluate_checkpoint``'s ``length``."""
    trained = config.get("data", {}).get("max_length")
    if trained is None or longest <= trained:
        return
    if windows:
        what = f"windows of {longest} {unit}"
        advice, parameter = f"give a length of at most {trained} {unit}, or none", "length"
    else:
        what = f"a sequence of {longest} {unit}"
        advice = (
            f"score pieces of at most {trained} {unit} (genodiff eval scores a file window by "
            "window)"
        )
        parameter = "sequences"
    message = (
        f"scoring {what} with a model trained on windows of {trained} {unit} "
        "(data.max_length): the network never read sequences that long, so the score is not "
        f"what it learned; {advice}"
    )
    warn_user(UserInputWarning(message, parameter=parameter))


def warn_beyond_classifier_window(trained: int | None, length: int, unit: str, source: str) -> None:
    """``warnings.warn`` when a guidance classifier (``source``) trained on windows of
    ``trained`` tokens (None: unknown) is to judge sequences of ``length`` tokens."""
    if trained is None or length <= trained:
        return
    message = (
        f"guiding {length} {unit} with {source}, a classifier trained on windows of {trained} "
        f"{unit} (its data.max_length): it never read sequences that long, so its verdicts, "
        f"and the guidance, are not what it learned; keep the length at most {trained} {unit}, "
        f"or train a classifier on windows of {length} {unit}"
    )
    warn_user(UserInputWarning(message, parameter="length"))
