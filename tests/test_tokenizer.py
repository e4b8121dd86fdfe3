import numpy as np
import pytest
import torch

from genodiff.tokenizers import DNATokenizer


@pytest.fixture
def tok():
    return DNATokenizer()


def test_ids_match_caduceus(tok):
    names = ["[CLS]", "[SEP]", "[BOS]", "[MASK]", "[PAD]", "[RESERVED]", "[UNK]", *"ACGTN"]
    assert tok.tokens == names
    assert (tok.cls_id, tok.eos_id, tok.bos_id, tok.mask_id, tok.pad_id) == (0, 1, 2, 3, 4)
    assert (tok.n_id, tok.base_ids) == (11, (7, 8, 9, 10))
    assert tok.vocab_size == len(tok) == 12
    assert tok.padded_vocab_size == 16


def test_encode_bases_lowercase_and_iupac(tok):
    assert tok.encode("ACGTN") == [7, 8, 9, 10, 11]
    assert tok.encode("acgtn") == [7, 8, 9, 10, 11]
    assert tok.encode("RYSWKMBDHVryswkmbdhv") == [11] * 20
    assert tok.encode("") == []


def test_encode_array_is_int64_and_agrees_with_encode(tok):
    seq = "ACGTNacgtnRYacgt" * 50
    arr = tok.encode_array(seq)
    assert arr.dtype == np.int64 and arr.shape == (len(seq),)
    assert arr.tolist() == tok.encode(seq)


@pytest.mark.parametrize(
    ("seq", "char", "pos"), [("ACGXT", "'X'", 3), ("-ACG", "'-'", 0), ("AC G", "' '", 2)]
)
def test_bad_character_error_names_char_and_position(tok, seq, char, pos):
    with pytest.raises(ValueError, match=f"character {char} at position {pos}"):
        tok.encode(seq)


def test_non_ascii_character_error(tok):
    with pytest.raises(ValueError, match="'é' at position 2"):
        tok.encode_array("ACé")


def test_decode_round_trip_and_specials(tok):
    assert tok.decode(tok.encode("ACGTNN")) == "ACGTNN"
    assert tok.decode(torch.tensor([3, 7, 4, 1])) == "[MASK]A[PAD][SEP]"
    assert tok.decode(np.array([0, 7, 10, 13])) == "[CLS]AT[UNK]"
    assert tok.decode([3, 7, 4, 11, 1], skip_special_tokens=True) == "AN"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([16])


def test_complement_map(tok):
    cmap = tok.complement_map
    assert len(cmap) == 16
    for i in tok.base_ids:
        assert cmap[i] == 17 - i
    assert cmap[tok.n_id] == tok.n_id
    assert all(cmap[i] == i for i in [*range(7), *range(12, 16)])
    assert [cmap[cmap[i]] for i in range(16)] == list(range(16))


def test_reverse_complement_ids_all_types(tok):
    seq = "AACGTNGT"
    expected = tok.encode("ACNACGTT")
    ids = tok.encode(seq)
    assert tok.reverse_complement_ids(ids) == expected
    assert tok.reverse_complement_ids(np.array(ids)).tolist() == expected
    rc_t = tok.reverse_complement_ids(torch.tensor([ids, ids[::-1]]))  # [2, 8], last axis
    assert rc_t.dtype == torch.long
    assert rc_t[0].tolist() == expected
    assert rc_t[1].tolist() == tok.reverse_complement_ids(ids[::-1])
    with_specials = torch.tensor([tok.mask_id, 7, tok.pad_id, 9])
    assert tok.reverse_complement_ids(with_specials).tolist() == [8, tok.pad_id, 10, tok.mask_id]


def test_reverse_complement_string(tok):
    assert tok.reverse_complement("AACGTn") == "nACGTT"
    assert tok.reverse_complement("acgTRYKMbvdhSW") == "WSdhbvKMRYAcgt"
    seq = "ACGTTGCAacgN"
    assert tok.reverse_complement(tok.reverse_complement(seq)) == seq
    assert tok.encode(tok.reverse_complement(seq)) == tok.reverse_complement_ids(tok.encode(seq))
    with pytest.raises(ValueError, match="'U' at position 1"):
        tok.reverse_complement("AU")
