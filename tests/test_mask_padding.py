"""``mask_padding``: [PAD] corrupted like any token and never scored (upstream MDLM's text
convention), for MDLM, SEDD and D3PM, against values computed by hand on a 5-id toy."""

import math

import pytest
import torch
from torch import nn

from genodiff.objectives import D3PM, MDLM, SEDD
from genodiff.samplers.request import SampleRequest

# A toy vocabulary: [PAD]=0 [MASK]=1 [SEP]=2 a=3 b=4; sentences "a b [SEP]" or "a [SEP] [PAD]".
PAD, MASK, SEP, A, B = range(5)
IDS = {"mask_id": MASK, "pad_id": PAD, "sample_ids": [SEP, A, B]}
# Two fixed distributions over the 5 ids: the model predicts TABLE_HIDDEN at every position
# while the last position reads [MASK] (the length is hidden), TABLE_SEEN otherwise.
TABLE_HIDDEN = {PAD: 0.1, MASK: 0.0, SEP: 0.3, A: 0.4, B: 0.2}
TABLE_SEEN = {PAD: 0.05, MASK: 0.0, SEP: 0.15, A: 0.5, B: 0.3}


def log_table(table: dict[int, float]) -> torch.Tensor:
    return torch.tensor([math.log(table[i]) if table[i] else -1e9 for i in range(5)])


class LengthReader(nn.Module):
    """Predicts TABLE_HIDDEN everywhere when the last position is [MASK], else TABLE_SEEN."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Parameter(log_table(TABLE_HIDDEN))
        self.seen = nn.Parameter(log_table(TABLE_SEEN))
        self.inputs: list[torch.Tensor] = []

    def forward(self, input_ids, sigma=None):
        self.inputs.append(input_ids.clone())
        hidden = (input_ids[:, -1] == MASK)[:, None, None]  # (B, 1, 1)
        return torch.where(hidden, self.hidden, self.seen).expand(*input_ids.shape, -1)


def test_mdlm_loss_replayed_by_hand_masks_pad_but_never_scores_it():
    x0 = torch.tensor([[A, SEP, PAD], [A, B, SEP]])
    objective = MDLM(**IDS, low_discrepancy=False, mask_padding=True)
    model = LengthReader()
    nelbo, tokens = objective.loss(model, x0, generator=torch.Generator().manual_seed(4))

    g = torch.Generator().manual_seed(4)  # replay the draws: t (2,), then u (2, 3)
    t = (1 - 1e-3) * torch.rand(2, generator=g) + 1e-3
    u = torch.rand(2, 3, generator=g)
    masked = u < (1 - 1e-3) * t[:, None]
    expected = []
    for b in range(2):
        table = TABLE_HIDDEN if masked[b, 2] else TABLE_SEEN  # is the last position hidden?
        terms = [
            -math.log(table[int(x0[b, i])]) / t[b].item()  # the log-linear weight is 1/t
            for i in range(3)
            if masked[b, i] and x0[b, i] != PAD
        ]
        expected.append(sum(terms))
    assert tokens.tolist() == [2, 3]  # [PAD] is never counted
    assert masked[0, 2], "the seed must mask the [PAD] of the first sentence"
    assert model.inputs[0][0, 2] == MASK  # ... and the model saw it as [MASK]
    torch.testing.assert_close(nelbo, torch.tensor(expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("objective_class", [MDLM, SEDD, D3PM])
def test_pad_is_corrupted_only_with_mask_padding_and_never_scored(objective_class):
    x0 = torch.tensor([[A, SEP, PAD, PAD]] * 64)  # two [PAD] per sentence
    for mask_padding in (False, True):
        objective = objective_class(**IDS, mask_padding=mask_padding)
        objective.eval()  # D3PM: the NELBO alone
        model = LengthReader()
        nelbo, tokens = objective.loss(model, x0, generator=torch.Generator().manual_seed(0))
        pad_masked = torch.cat([x[:, 2:] == MASK for x in model.inputs]).any()
        assert bool(pad_masked) == mask_padding
        assert tokens.tolist() == [2] * 64
        # A model that differs from LengthReader only at the [PAD] positions gives the same
        # loss: those positions are never scored, masked or not.
        garbled, _ = objective.loss(
            GarbledAtPadding(), x0, generator=torch.Generator().manual_seed(0)
        )
        assert nelbo.sum() > 0
        torch.testing.assert_close(garbled, nelbo)


class GarbledAtPadding(LengthReader):
    """LengthReader with other predictions at positions 2 and 3 (where the sentences pad)."""

    def forward(self, input_ids, sigma=None):
        logits = super().forward(input_ids, sigma).clone()  # (B, L, V)
        logits[:, 2:] = torch.tensor([2.0, -1e9, -3.0, 1.0, 0.5])
        return logits


def test_samplers_draw_pad_only_with_mask_padding():
    request = SampleRequest(num_samples=64, length=3, steps=8)

    class PadLover(nn.Module):
        def forward(self, input_ids, sigma=None):
            logits = torch.full((*input_ids.shape, 5), -4.0)
            logits[..., PAD] = 0.0
            return logits

    for mask_padding, pad_drawn in ((False, False), (True, True)):
        objective = MDLM(**IDS, mask_padding=mask_padding)
        blocked = objective.process.undrawable(5, torch.device("cpu"))
        assert blocked.tolist() == [not mask_padding, True, False, False, False]
        model = PadLover()
        model.dummy = nn.Parameter(torch.zeros(1))
        x = objective.sample(model, request, torch.Generator().manual_seed(0))
        assert bool((x == PAD).any()) == pad_drawn
        assert not (x == MASK).any()
