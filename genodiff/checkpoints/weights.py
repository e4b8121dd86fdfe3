"""Loading stored tensors into a module: ``load_weights``, strict, with one line for whatever
does not fit, and ``check_finite_weights``. Every loader of genodiff (a checkpoint folder, a
training checkpoint, a classifier, ``init_from=``) loads its weights here.

Tied tensors (one storage under several names, such as an LM head tied to the embedding) may be
stored once, under any of their names, and are re-tied; an upstream file's redundant copy of a
tied LM head the model does not have is dropped when it equals a tensor stored beside it, and so
are the copies a checkpoint layout names (``drop_tied_copies``: Caduceus' weight-tied reverse
projections).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import torch
from torch import nn

from genodiff.errors import InputValueError, listing

# Upstream files may store a tied LM head a second time; dropped on load when it equals a
# tensor already stored (the embedding).
TIED_HEAD_KEYS = ("lm_head.weight", "lm_head.lm_head.weight")


class CheckpointError(InputValueError):
    """Stored weights that do not fit the model built for them."""


def load_weights(module: nn.Module, state: Mapping[str, torch.Tensor], source: str | Path) -> None:
    """Load ``state`` into ``module`` strictly, then check the weights are finite.

    One-line ``CheckpointError`` naming ``source`` and the missing, unexpected, reshaped and
    retyped (integer for float, or the reverse) keys when ``state`` does not fit (tied
    tensors stored once are re-tied first, see the module doc); ``InputValueError`` from
    ``check_finite_weights`` for a NaN or an infinity.
    """
    expected = module.state_dict()
    state = _drop_tied_head_copies(dict(state), expected)
    for names in _alias_groups(expected):
        stored = [n for n in names if n in state]
        if stored and not all(torch.equal(state[stored[0]], state[n]) for n in stored):
            raise CheckpointError(f"{source}: tied tensors {stored} hold different values")
        for name in names:
            if stored and name not in state:
                state[name] = state[stored[0]]
    missing = sorted(expected.keys() - state.keys())
    unexpected = sorted(state.keys() - expected.keys())
    reshaped = [
        f"{name} {tuple(state[name].shape)} where the model has {tuple(tensor.shape)}"
        for name, tensor in expected.items()
        if name in state and state[name].shape != tensor.shape
    ]
    # an integer tensor where the model holds floats (or the reverse) is another tool's data,
    # not weights: load_state_dict would cast it silently
    retyped = [
        f"{name} {state[name].dtype} where the model has {tensor.dtype}"
        for name, tensor in expected.items()
        if name in state and state[name].is_floating_point() != tensor.is_floating_point()
    ]
    problems = [
        f"{label} ({len(names)}): {listing(names)}"
        for label, names in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("tensors of another shape", reshaped),
            ("tensors of another kind of number", retyped),
        )
        if names
    ]
    if problems:
        raise CheckpointError(
            f"{source}: the weights do not fit the {type(module).__name__} they are loaded into; "
            + "; ".join(problems)
        )
    module.load_state_dict(state, strict=True)
    check_finite_weights(module, source)


def drop_tied_copies(
    state: Mapping[str, torch.Tensor],
    expected: Collection[str],
    copy_of: Callable[[str], str | None],
    source: str | Path,
) -> dict[str, torch.Tensor]:
    """``state`` without the second copies of tied tensors that an upstream file stores and the
    module (whose state-dict names are ``expected``) holds once: a name the module lacks for
    which ``copy_of`` names the tensor it repeats (a layout's ``tied_copy_of``). A copy equal
    to that tensor is dropped (kept under that name when the file stores only the copy); a
    copy that differs is a one-line ``CheckpointError``: the module cannot hold both."""
    kept = dict(state)
    for name in list(kept):
        original = copy_of(name)
        if name in expected or original is None or original not in expected:
            continue
        copy = kept.pop(name)
        if original not in kept:
            kept[original] = copy
        elif not torch.equal(copy, kept[original]):
            raise CheckpointError(
                f"{source}: {name} holds other values than {original}, which the model ties it "
                "to (one tensor for both); the file was written for an untied model: build it "
                "without the weight tying (e.g. bidirectional_weight_tie=false)"
            )
    return kept


def check_finite_weights(module: nn.Module, source: str | Path) -> None:
    """InputValueError naming ``source`` and the first tensor of ``module`` that holds a NaN or
    an infinity: such weights give NaN scores and meaningless samples."""
    for name, tensor in module.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise InputValueError(
                f"{source}: the weights are not finite ({name} holds NaN or inf): the run "
                "diverged or the file is damaged; use another checkpoint, e.g. the previous one"
            )


def storage_key(tensor: torch.Tensor) -> tuple:
    """What tensors sharing one storage (tied) have in common."""
    return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))


def _drop_tied_head_copies(
    state: dict[str, torch.Tensor], expected: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Drop an LM head the model does not have when it repeats another stored tensor."""
    for name in TIED_HEAD_KEYS:
        head = state.get(name)
        if head is None or name in expected:
            continue
        others = (t for k, t in state.items() if k != name and t.shape == head.shape)
        if any(torch.equal(head, t) for t in others):
            del state[name]
    return state


def _alias_groups(state: Mapping[str, torch.Tensor]) -> list[list[str]]:
    """Names of the tensors that share storage, for each storage with more than one name."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for name, tensor in state.items():
        groups[storage_key(tensor)].append(name)
    return [names for names in groups.values() if len(names) > 1]
