"""The classification head: pooling, reverse complement, conjoining, PS, weight loading."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from genodiff import backbones
from genodiff.checkpoints import save_pretrained
from genodiff.errors import InputValueError
from genodiff.finetuning.classifier import SequenceClassifier, load_backbone, pool, rc_left_padded
from genodiff.tokenizers import DNATokenizer

TOK = DNATokenizer()
TINY = dict(name="caduceus", d_model=16, n_layer=1, vocab_size=12, pad_vocab_size_multiple=8)


def left_padded(seqs: list[str], length: int) -> torch.Tensor:
    return torch.tensor([[TOK.pad_id] * (length - len(s)) + TOK.encode(s) for s in seqs])


def random_seqs(n: int, lo: int, hi: int, seed: int) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
    return ["".join("ACGT"[i] for i in torch.randint(0, 4, (k,), generator=g)) for k in lengths]


def test_rc_left_padded_matches_string_reverse_complement():
    seqs = ["ACGTTN", "A", "GGGC", "ACGTACGTAC"]
    ids = left_padded(seqs, 10)
    rc = rc_left_padded(ids, TOK.pad_id, torch.tensor(TOK.complement_map))
    assert rc.tolist() == left_padded([TOK.reverse_complement(s) for s in seqs], 10).tolist()
    twice = rc_left_padded(rc, TOK.pad_id, torch.tensor(TOK.complement_map))
    assert torch.equal(twice, ids)


@pytest.mark.parametrize("how", ["mean", "max", "first", "last"])
def test_pooling_uses_real_positions_only(how):
    torch.manual_seed(0)
    hidden = torch.randn(3, 7, 5)
    real = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [0] * 6 + [1], [1] * 7]).bool()
    out = pool(hidden, real, how)
    for b in range(3):
        h = hidden[b][real[b]]  # (n_real, d), written by slicing
        expected = {"mean": h.mean(0), "max": h.max(0).values, "first": h[0], "last": h[-1]}[how]
        torch.testing.assert_close(out[b], expected)
    scrambled = hidden.clone()
    scrambled[~real] = 1e3 * torch.randn(int((~real).sum()), 5)  # change only padding positions
    torch.testing.assert_close(pool(scrambled, real, how), out)


def test_mean_pooled_classifier_ignores_padding_states():
    """logits = W mean(h over the real positions) + b, the pads' states left out."""
    torch.manual_seed(0)
    backbone = backbones.build(name="mamba", d_model=16, n_layer=1, vocab_size=12)
    clf = SequenceClassifier(backbone, 3, TOK, "mean").eval()
    padded = left_padded(["ACGTAC", "GGA"], 10)
    with torch.no_grad():
        hidden = backbone.hidden_states(padded)  # (2, 10, 16)
        expected = torch.stack([clf.score(hidden[0, 4:].mean(0)), clf.score(hidden[1, 7:].mean(0))])
        torch.testing.assert_close(clf(padded), expected)
        assert (clf.score(hidden.mean(1)) - expected).abs().max() > 1e-4  # pads would matter


def test_conjoined_predictions_are_rc_invariant():
    torch.manual_seed(0)
    clf = SequenceClassifier(backbones.build(**TINY), 2, TOK, "mean", conjoin_eval=True).eval()
    seqs = random_seqs(4, 5, 12, seed=1)
    x = left_padded(seqs, 12)
    rc = left_padded([TOK.reverse_complement(s) for s in seqs], 12)
    with torch.no_grad():
        torch.testing.assert_close(clf(x), clf(rc))
        clf.conjoin_eval = False  # power: without conjoining the two differ
        assert (clf(x) - clf(rc)).abs().max() > 1e-4


def test_a_vocabulary_without_complements_has_no_reverse_complement():
    no_complements = DNATokenizer()
    no_complements.complement_map = None  # as a text tokenizer
    with pytest.raises(InputValueError, match="conjoin_eval average over reverse complements"):
        SequenceClassifier(backbones.build(**TINY), 2, no_complements, conjoin_eval=True)
    clf = SequenceClassifier(backbones.build(**TINY), 2, no_complements)
    assert clf(left_padded(["ACGT"], 6)).shape == (1, 2)  # reads ids all the same
    with pytest.raises(InputValueError, match="rc_aug needs one"):
        clf.rc(left_padded(["ACGT"], 6))


def test_ps_classifier_combines_the_two_strands_like_caduceus():
    """logits(x) = (W a(x) + W a(rc x)) / 2 with a = the first d channels, rc x right-padded."""
    torch.manual_seed(0)
    backbone = backbones.build(**TINY, rcps=True, complement_map=TOK.complement_map)
    clf = SequenceClassifier(backbone, 3, TOK, "mean").eval()
    seqs = random_seqs(3, 6, 10, seed=2)
    x = left_padded(seqs, 10)
    rc_right = torch.tensor(
        [TOK.encode(TOK.reverse_complement(s)) + [TOK.pad_id] * (10 - len(s)) for s in seqs]
    )
    with torch.no_grad():
        d = 16
        expected = []
        for ids in (x, rc_right):
            a = backbone.hidden_states(ids)[..., :d]  # (B, L, d)
            real = (ids != TOK.pad_id).unsqueeze(-1)
            expected.append(clf.score((a * real).sum(1) / real.sum(1)))
        torch.testing.assert_close(clf(x), (expected[0] + expected[1]) / 2)
        # invariant to the reverse complement of the whole (padded) input ...
        torch.testing.assert_close(clf(x), clf(rc_right), atol=1e-5, rtol=1e-5)
        # ... so, without padding, to rc of the sequence
        full = left_padded(random_seqs(3, 10, 10, seed=3), 10)
        rc_full = rc_left_padded(full, TOK.pad_id, torch.tensor(TOK.complement_map))
        torch.testing.assert_close(clf(full), clf(rc_full), atol=1e-5, rtol=1e-5)


def test_backbone_from_training_checkpoint_is_the_ema_copy(tmp_path):
    from genodiff.training.module import GenerativeTrainingModule

    config = {"model": TINY, "objective": {"name": "mdlm"}, "ema": {"decay": 0.5}}
    module = GenerativeTrainingModule(config)
    with torch.no_grad():
        for p in module.ema.module.parameters():
            p.add_(1.0)  # EMA weights != raw weights
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    trainer.strategy.connect(module)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    loaded, tokenizer = load_backbone(str(tmp_path / "m.ckpt"))
    assert tokenizer.name == module.tokenizer.name == "dna"
    ema = module.ema.module.state_dict()
    assert all(torch.equal(v, ema[k]) for k, v in loaded.state_dict().items())
    assert all(p.requires_grad for p in loaded.parameters())

    folder = save_pretrained(module.backbone, tmp_path / "hf")
    from_folder, no_tokenizer = load_backbone(str(folder))
    assert no_tokenizer is None  # the folder holds no tokenizer.json
    raw = module.backbone.state_dict()
    assert all(torch.equal(v, raw[k]) for k, v in from_folder.state_dict().items())
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_backbone(str(tmp_path / "missing.ckpt"))


def test_a_pretrained_folder_of_no_kind_names_every_kind(tmp_path):
    folder = tmp_path / "downloaded"
    folder.mkdir()
    (folder / "pytorch_model.bin").write_bytes(b"")  # weights without their config.json
    with pytest.raises(FileNotFoundError) as err:
        load_backbone(str(folder))
    message = str(err.value)  # was: no genodiff.json and no *.ckpt, as if folders were not taken
    assert message.startswith(f"pretrained={folder} holds no genodiff.json")
    assert "nor config.json (a Hugging-Face-format folder); give a genodiff training" in message
