"""Data-parallel noise: N processes x batch b draw exactly the noise of one process x batch
N*b. Each objective's loss on a whole batch equals, row for row, its losses on the batch's
halves computed as the two shards of it (each from a generator in the same starting state)."""

import pytest
import torch

from genodiff import backbones
from genodiff.batch_shard import BatchShard, shard_rows
from tests.dna_objectives import DNA, ar, d3pm, mdlm, plaid, sedd

BATCH, HALF, LENGTH = 6, 3, 24


def tiny(name: str, **kwargs) -> torch.nn.Module:
    torch.manual_seed(0)
    return backbones.build(name=name, d_model=16, n_layer=1, vocab_size=12, **kwargs)


CASES = {
    "mdlm": (mdlm, lambda: tiny("caduceus")),
    "mdlm-iid-t": (lambda: mdlm(low_discrepancy=False), lambda: tiny("caduceus")),
    "sedd": (sedd, lambda: tiny("caduceus")),
    "d3pm": (lambda: d3pm(num_steps=100), lambda: tiny("caduceus")),
    "plaid": (lambda: plaid(d_model=16, schedule_hidden=16), lambda: tiny("caduceus")),
    "ar": (ar, lambda: tiny("mamba")),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("training", [True, False])
def test_two_shards_draw_the_noise_of_the_whole_batch(name, training):
    make_objective, make_model = CASES[name]
    torch.manual_seed(1)
    objective, model = make_objective().train(training), make_model()
    ids = torch.randint(7, 11, (BATCH, LENGTH))  # A/C/G/T
    ids[1, -5:] = DNA.pad_id  # padding is neither noised nor scored in either path

    def losses(rows: slice, shard: BatchShard | None) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(7)  # the same state on every "process"
        with torch.no_grad():
            return objective.loss(model, ids[rows], generator, shard)

    whole_nelbo, whole_tokens = losses(slice(None), None)
    first = losses(slice(0, HALF), BatchShard(0, BATCH))
    second = losses(slice(HALF, BATCH), BatchShard(HALF, BATCH))
    torch.testing.assert_close(torch.cat([first[0], second[0]]), whole_nelbo)
    assert torch.equal(torch.cat([first[1], second[1]]), whole_tokens)
    if name != "ar":  # a half drawn as a batch of its own gets other noise
        alone = losses(slice(HALF, BATCH), None)[0]
        assert not torch.allclose(alone, second[0])


def test_shard_rows():
    assert shard_rows(None, 4) == (4, slice(0, 4))
    assert shard_rows(BatchShard(4, 8), 4) == (8, slice(4, 8))
    with pytest.raises(ValueError, match="outside"):
        shard_rows(BatchShard(6, 8), 4)
