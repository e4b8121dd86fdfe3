"""Pieces of the training loop with known answers: LR schedule, EMA, NaN guard, optimizer groups."""

import math

import pytest
import torch
from torch import nn

from genodiff.model import EMA
from genodiff.training.optim import cosine_with_warmup


def test_cosine_with_warmup_values():
    assert cosine_with_warmup(0, 10, 110, 0.1) == pytest.approx(0.1)
    assert cosine_with_warmup(9, 10, 110, 0.1) == pytest.approx(1.0)
    assert cosine_with_warmup(10, 10, 110, 0.1) == pytest.approx(1.0)
    assert cosine_with_warmup(60, 10, 110, 0.1) == pytest.approx(0.1 + 0.9 * 0.5)
    assert cosine_with_warmup(110, 10, 110, 0.1) == pytest.approx(0.1)
    assert cosine_with_warmup(500, 10, 110, 0.1) == pytest.approx(0.1)
    assert cosine_with_warmup(5, 0, 10, 0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))


def test_ema_constant_decay_matches_closed_form():
    model = nn.Linear(1, 1, bias=False)
    ema = EMA(model, decay=0.9, warmup=False)
    values = [1.0, 2.0, 3.0]
    expected = None
    for v in values:
        with torch.no_grad():
            model.weight.fill_(v)
        ema.update_parameters(model)
        # the first update copies; later ones blend with weight 1 - decay
        expected = v if expected is None else 0.9 * expected + 0.1 * v
    assert ema.module.weight.item() == pytest.approx(expected)
    assert not ema.module.weight.requires_grad


def test_ema_warmup_uses_smaller_decay_early():
    model = nn.Linear(1, 1, bias=False)
    ema = EMA(model, decay=0.9999, warmup=True)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ema.update_parameters(model)  # copy: n_averaged becomes 1
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update_parameters(model)  # k = 1: decay = 2 / 11
    assert ema.module.weight.item() == pytest.approx(1 - 2 / 11)
