"""bf16 on CPU as a proxy for GPU training: bf16-mixed runs end to end, residual_in_fp32 holds,
and the loss stays close to fp32.

Tolerance: on the same batch and noise draw, the bf16-autocast mean NELBO is within 5e-3
(relative) of the fp32 one; measured at most 5.2e-4 for these models (Caduceus-Ph and -PS,
d_model 64 x 2 layers, embeddings N(0, 0.3) so that predictions are peaked, 4 x 128 bp).
"""

from __future__ import annotations

import contextlib
import math
import warnings

import pytest
import torch

import genodiff
from genodiff.backbones.caduceus import Caduceus
from genodiff.backbones.mamba_lm import MambaLM
from genodiff.ops import upstream_kernels_on_cpu
from genodiff.tokenizers import DNATokenizer
from genodiff.training.module import GenerativeTrainingModule
from tests.dna_objectives import mdlm
from tests.test_cli import DEMO, TINY, read_metrics

BF16_LOSS_RTOL = 5e-3


def overridden(overrides: list[str], **values: object) -> list[str]:
    """``overrides`` with the keys in ``values`` replaced (Hydra refuses a key given twice)."""
    keep = [o for o in overrides if o.split("=")[0] not in values]
    return keep + [f"{key}={value}" for key, value in values.items()]


def test_train_in_bf16_mixed_on_cpu(tmp_path, monkeypatch):
    seen = []
    original = GenerativeTrainingModule.training_step

    def recording_step(self, batch, batch_idx):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GenerativeTrainingModule, "training_step", recording_step)
    args = overridden(
        TINY,
        **{
            "trainer.precision": "bf16-mixed",
            "data.max_length": 64,
            "data.batch_size": 2,
            "data.eval_batch_size": 2,
            "trainer.max_steps": 2,
            "trainer.val_check_interval": 2,
            "trainer.limit_val_batches": 1,
            "trainer.limit_test_batches": 1,
            "samples.num_samples": 1,
            "samples.length": 32,
            "samples.steps": 4,
            "output_dir": tmp_path,
        },
    )
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        genodiff.train(DEMO, args)
    assert seen == [(True, torch.bfloat16)] * 2
    # the model summary's "Precision bf16-mixed is not supported" (its float32 size is right)
    assert not [w for w in warned if "model summary" in str(w.message)]
    (val,) = [float(r["val/nelbo"]) for r in read_metrics(tmp_path) if r.get("val/nelbo")]
    assert math.isfinite(val) and 0 < val < 10
    assert (tmp_path / "samples.fa").is_file()


def residual_dtypes(model: torch.nn.Module, ids: torch.Tensor) -> set[torch.dtype]:
    """The dtypes of the residual stream every block hands to the next."""
    seen = set()

    def hook(module, args, output):
        seen.add(output[1].dtype)

    handles = [layer.register_forward_hook(hook) for layer in model.backbone.layers]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for handle in handles:
            handle.remove()
    return seen


MODELS = {
    "caduceus-ph": lambda **kw: Caduceus(d_model=16, n_layer=2, vocab_size=12, **kw),
    "caduceus-ps": lambda **kw: Caduceus(
        d_model=16,
        n_layer=2,
        vocab_size=12,
        rcps=True,
        complement_map=DNATokenizer().complement_map,
        **kw,
    ),
    "mamba": lambda **kw: MambaLM(d_model=16, n_layer=2, vocab_size=12, **kw),
}


@pytest.mark.parametrize("kernels", [False, True], ids=["exact", "kernel-path"])
@pytest.mark.parametrize("name", MODELS)
def test_residual_in_fp32_is_honoured(name, kernels, upstream_fakes):
    ids = torch.randint(7, 11, (2, 16), generator=torch.Generator().manual_seed(0))
    for residual_in_fp32, expected in ((True, torch.float32), (False, torch.bfloat16)):
        torch.manual_seed(0)
        model = MODELS[name](residual_in_fp32=residual_in_fp32).to(torch.bfloat16).eval()
        with upstream_kernels_on_cpu() if kernels else contextlib.nullcontext():
            assert residual_dtypes(model, ids) == {expected}
        # mixed precision (fp32 weights, bf16 compute): the sum with the fp32 embedding stays fp32
        model = model.float()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert residual_dtypes(model, ids) == {torch.float32}
    assert (sum(upstream_fakes.values()) > 0) == kernels


@pytest.mark.parametrize("rcps", [False, True])
def test_bf16_loss_within_tolerance_of_fp32(rcps):
    torch.manual_seed(0)
    model = Caduceus(
        d_model=64,
        n_layer=2,
        vocab_size=12,
        rcps=rcps,
        complement_map=DNATokenizer().complement_map,
        initializer_cfg={"initializer_range": 0.3},
    )
    objective = mdlm()
    ids = torch.randint(7, 11, (4, 128), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        nelbo, tokens = objective.loss(model, ids, torch.Generator().manual_seed(1))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nelbo16, _ = objective.loss(model, ids, torch.Generator().manual_seed(1))
    loss, loss16 = nelbo.sum() / tokens.sum(), nelbo16.sum() / tokens.sum()
    assert loss > 1.0  # peaked predictions: errors are not hidden by a uniform output
    assert loss16 != loss  # bf16 did run
    assert abs(loss16 - loss) / loss < BF16_LOSS_RTOL
