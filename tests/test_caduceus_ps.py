"""Caduceus-PS (rcps=True): RC equivariance, upstream's fused ordering, names; Ph conjoining."""

import pytest
import torch

from genodiff.backbones import build
from genodiff.backbones.caduceus import Caduceus, conjoin_logits
from genodiff.backbones.rcps import rc_ids
from genodiff.config import with_tokenizer_fields
from genodiff.ops import rms_norm
from genodiff.tokenizers import DNATokenizer, Tokenizer

CMAP = torch.tensor(DNATokenizer().complement_map)  # (16,)
PS_MAP = {"complement_map": CMAP.tolist()}


def small(**kwargs):
    torch.manual_seed(0)
    model = Caduceus(
        **{"d_model": 8, "n_layer": 2, "vocab_size": 12, "rcps": True, **PS_MAP, **kwargs}
    ).double()
    with torch.no_grad():  # non-trivial norm weights, so that the orderings can differ
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def ids(L=24, batch=2, seed=1):
    return torch.randint(0, 12, (batch, L), generator=torch.Generator().manual_seed(seed))


def rc_permute(logits):
    """Logits for rc(x), re-indexed as predictions for x: flip the sequence, complement."""
    return logits.flip(1)[..., CMAP]


def fused_reference(model, x):
    """Upstream's fused path written out: in every block the "fwd" kernel call reads the second
    half and the "rc" call the flipped first half; the final norm keeps the halves in order."""
    emb = model.backbone.embeddings.word_embeddings.embedding.weight
    d = emb.shape[1]
    flip = lambda t: t.flip(-2, -1)  # noqa: E731
    hidden = torch.cat([emb[x], flip(emb[rc_ids(x, CMAP)])], dim=-1)
    residual = None
    for layer in model.backbone.layers:
        norm = lambda t: rms_norm(t, layer.norm.weight)  # noqa: E731, B023
        h2, h1 = hidden[..., d:], flip(hidden[..., :d])
        r2 = h2 if residual is None else h2 + residual[..., d:]
        r1 = h1 if residual is None else h1 + flip(residual[..., :d])
        hidden = torch.cat([norm(r2), flip(norm(r1))], dim=-1)
        residual = torch.cat([r2, flip(r1)], dim=-1)
        mixer = layer.mixer.submodule
        hidden = torch.cat([mixer(hidden[..., :d]), flip(mixer(flip(hidden[..., d:])))], dim=-1)
    s = hidden + residual
    w = model.backbone.norm_f.weight
    out = torch.cat([rms_norm(s[..., :d], w), flip(rms_norm(flip(s[..., d:]), w))], dim=-1)
    return out[..., :d] @ emb.T + out[..., d:].flip(-1) @ emb[CMAP].T


@pytest.mark.parametrize("fused", [True, False])
def test_rc_equivariant(fused):
    model = small(fused_add_norm=fused)
    x = ids()
    logits = model(x)
    assert logits.shape == (2, 24, 16) and logits.dtype == torch.float32
    torch.testing.assert_close(model(rc_ids(x, CMAP)), rc_permute(logits), rtol=1e-6, atol=1e-6)
    hidden = model.hidden_states(x)  # (B, L, 2d), equivariant under flip(seq, channels)
    assert hidden.shape == (2, 24, 16)
    torch.testing.assert_close(model.hidden_states(rc_ids(x, CMAP)), hidden.flip(-2, -1))


def test_fused_ordering_matches_upstream_and_differs_from_unfused():
    fused, plain = small(fused_add_norm=True), small(fused_add_norm=False)
    sd = fused.state_dict()
    rename = {k.replace(".norm.", ".norm.submodule.").replace("norm_f.", "norm_f.submodule."): v
              for k, v in sd.items()}  # fmt: skip
    plain.load_state_dict(rename)
    x = ids()
    expected = fused_reference(fused, x).float()
    torch.testing.assert_close(fused(x), expected, rtol=1e-6, atol=1e-6)
    assert (plain(x) - fused(x)).abs().max() > 1e-3


def test_state_dict_keys_match_hf_ps_layout():
    fwd = ["A_log", "D", "conv1d.weight", "conv1d.bias", "dt_proj.weight", "dt_proj.bias"]
    fwd += ["in_proj.weight", "out_proj.weight", "x_proj.weight"]
    rev = ["A_log", "D", "conv1d.weight", "conv1d.bias", "dt_proj.weight", "dt_proj.bias"]
    rev += ["x_proj.weight"]
    for fused, norm in [(True, "norm.weight"), (False, "norm.submodule.weight")]:
        model = small(fused_add_norm=fused)
        expected = {
            "backbone.embeddings.word_embeddings.embedding.weight",
            "backbone.embeddings.word_embeddings.complement_map",
            f"backbone.{norm.replace('norm', 'norm_f', 1)}",
            "lm_head.complement_map",
            "lm_head.lm_head.weight",
        }
        for i in range(2):
            expected.add(f"backbone.layers.{i}.{norm}")
            expected |= {f"backbone.layers.{i}.mixer.submodule.mamba_fwd.{k}" for k in fwd}
            expected |= {f"backbone.layers.{i}.mixer.submodule.mamba_rev.{k}" for k in rev}
        sd = model.state_dict()
        assert set(sd) == expected
        head, emb = (
            sd["lm_head.lm_head.weight"],
            sd["backbone.embeddings.word_embeddings.embedding.weight"],
        )
        assert head.data_ptr() == emb.data_ptr()  # tied: one tensor under both names
        assert torch.equal(sd["lm_head.complement_map"], CMAP)


def test_parameter_count_equals_ph():
    ph = Caduceus(d_model=118, n_layer=4, vocab_size=12)
    ps = Caduceus(
        d_model=118, n_layer=4, vocab_size=12, rcps=True, complement_map=CMAP.tolist()
    )  # configs/model/caduceus_ps.yaml
    shapes = lambda m: sorted(tuple(p.shape) for p in m.parameters())  # noqa: E731
    assert shapes(ps) == shapes(ph)
    assert sum(p.numel() for p in ps.parameters()) == 470_702


def test_ph_conjoining_is_rc_invariant():
    torch.manual_seed(0)
    ph = Caduceus(d_model=8, n_layer=2, vocab_size=12, complement_map=CMAP.tolist()).double()
    x = ids()
    conjoined = conjoin_logits(ph, x)
    assert not torch.allclose(ph(rc_ids(x, CMAP)), rc_permute(ph(x)), atol=1e-3)
    torch.testing.assert_close(rc_permute(conjoin_logits(ph, rc_ids(x, CMAP))), conjoined)
    torch.testing.assert_close(conjoined, (ph(x) + rc_permute(ph(rc_ids(x, CMAP)))) / 2)


class PairedTokenizer(Tokenizer):
    """A toy 8-id vocabulary whose complement pairs are not DNA's: 2<->5, 3<->4, 6<->7 (0 and 1
    are their own)."""

    name = "paired_toy"
    domain = "paired"
    vocab_size, mask_id, pad_id, bos_id, eos_id = 8, 0, 1, None, None
    sample_ids = (2, 3, 4, 5, 6, 7)
    complement_map = (0, 1, 5, 4, 3, 2, 7, 6)

    def encode(self, text: str) -> list[int]:
        return [int(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(str(i) for i in ids)


def test_ps_takes_the_complement_map_of_its_tokenizer():
    tok = PairedTokenizer()
    section = {"name": "caduceus", "d_model": 8, "n_layer": 2, "rcps": True}
    torch.manual_seed(0)
    model = build(**with_tokenizer_fields("model", Caduceus, section, tok)).double().eval()
    assert model.lm_head.complement_map.tolist() == [0, 1, 5, 4, 3, 2, 7, 6]
    x = torch.randint(0, 8, (2, 16), generator=torch.Generator().manual_seed(3))
    # rc by hand: read backwards, complement each id through the pairs above
    pairs = {0: 0, 1: 1, 2: 5, 5: 2, 3: 4, 4: 3, 6: 7, 7: 6}
    rc_x = torch.tensor([[pairs[int(i)] for i in reversed(row)] for row in x])
    logits, logits_rc = model(x), model(rc_x)  # (B, L, 8)
    column = [pairs[v] for v in range(8)]
    torch.testing.assert_close(logits_rc, logits.flip(1)[..., column])
    # reversal without the complement is no symmetry of it: the map matters
    reversed_x = torch.tensor([[int(i) for i in reversed(row)] for row in x])
    assert not torch.allclose(model(reversed_x), logits.flip(1)[..., column], atol=1e-3)


def test_ps_on_a_tokenizer_without_a_complement_is_refused():
    tok = PairedTokenizer()
    tok.complement_map = None  # a vocabulary without reverse complement (text)
    section = {"name": "caduceus", "d_model": 8, "n_layer": 1, "rcps": True}
    kwargs = with_tokenizer_fields("model", Caduceus, section, tok)
    assert kwargs["complement_map"] is None
    with pytest.raises(ValueError, match="rcps=true .* needs a complement_map"):
        build(**kwargs)
    ph = build(**{**kwargs, "rcps": False})  # Ph keeps working without one
    with pytest.raises(ValueError, match="conjoining needs the model's complement_map"):
        conjoin_logits(ph, torch.zeros(1, 4, dtype=torch.long))
