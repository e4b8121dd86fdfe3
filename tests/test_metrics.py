"""genodiff.metrics, one family at a time, on inputs whose answer is known by hand."""

import math
from itertools import product

import numpy as np
import pytest

from genodiff.data import FastaDataModule
from genodiff.domains import DNADomain
from genodiff.errors import InputValueError
from genodiff.metrics import (
    DistributionComparison,
    Memorisation,
    TrainingIndex,
    cpg_observed_expected,
    discriminator_auroc,
    duplicate_rate,
    dust_scores,
    gc_content,
    homopolymer_bases,
    js_divergence,
    kmer_js,
    kmer_profiles,
    kmer_spectrum,
    low_complexity_bases,
    nearest_neighbours,
    pairwise_kmer_distance,
    tile_windows,
)
from genodiff.metrics.composition import pooled_fraction
from genodiff.metrics.discriminator import (
    folds_keeping_groups_together,
    kmer_features,
    near_copy_groups,
)
from genodiff.metrics.report import markdown_table
from genodiff.metrics.sequences import base_codes, evenly_spaced, reverse_complement_codes
from genodiff.metrics.suite import QualitySettings, evaluate_samples, reference_windows

COMPLEMENT = str.maketrans("ACGT", "TGCA")
DNA = DNADomain.alphabet  # the letters DNA samples are made of


def random_dna(n: int, length: int, seed: int, p=(0.25, 0.25, 0.25, 0.25)) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), size=length, p=p)) for _ in range(n)]


def shuffled(seqs: list[str], seed: int) -> list[str]:
    """Per-sequence i.i.d. shuffles: the same bases, no order left."""
    rng = np.random.default_rng(seed)
    return ["".join(rng.permutation(list(s))) for s in seqs]


def de_bruijn_triplets() -> str:
    """A linear de Bruijn sequence B(4, 3): 66 bases holding each of the 64 triplets once."""
    a, out = [0] * 12, []

    def db(t: int, p: int) -> None:  # the standard recursive (FKM) construction
        if t > 3:
            if 3 % p == 0:
                out.extend(a[1 : p + 1])
        else:
            a[t] = a[t - p]
            db(t + 1, p)
            for j in range(a[t - p] + 1, 4):
                a[t] = j
                db(t + 1, t)

    db(1, 1)
    cyclic = "".join("ACGT"[i] for i in out)
    return cyclic + cyclic[:2]


@pytest.fixture(scope="module")
def demo_splits():
    """Windows of the bundled demo genome, split as FastaDataModule defines it."""
    datamodule = FastaDataModule(max_length=1024)
    return {split: datamodule.window_texts(split) for split in ("train", "valid", "test")}


# --------------------------------------------------------------------------- sequences


def test_base_codes_and_reverse_complement():
    assert base_codes("ACGTNacgt-R", DNA).tolist() == [0, 1, 2, 3, -1, 0, 1, 2, 3, -1, -1]
    assert reverse_complement_codes(base_codes("AACGN", DNA), DNA).tolist() == [-1, 1, 2, 3, 3]


def test_tile_windows_and_even_spread():
    assert tile_windows(["ACGTACGTAC", "TTG"], 4, DNA) == ["ACGT", "ACGT", "TTG"]  # tail dropped
    assert tile_windows(["ACNN" + "NNNA"], 4, DNA) == ["ACNN"]  # 3/4 N is over the 0.5 limit
    assert evenly_spaced(list("abcdefghij"), 4) == ["a", "d", "g", "j"]
    assert evenly_spaced(list("abc"), 5) == ["a", "b", "c"]


def test_reference_records_are_cut_to_the_sample_length():
    reference = ["ACGT" * 100, "ACGT" * 10]  # 400 bp and 40 bp
    windows = reference_windows(reference, ["A" * 50, "C" * 50, "G" * 60], QualitySettings(), DNA)
    assert [len(w) for w in windows] == [50] * 8 + [40]  # median sample length 50
    assert (
        len(reference_windows(reference, ["A" * 50] * 2, QualitySettings(max_reference=3), DNA))
        == 3
    )


# --------------------------------------------------------------------------- k-mers


def test_kmer_counts_skip_n_and_use_base4_indices():
    # 2-mers of ACGTNACG: AC CG GT (TN, NA skipped) AC CG; AC = 0*4+1, CG = 1*4+2, GT = 2*4+3
    counts = kmer_profiles(["ACGTNACG"], 2, DNA)[0]
    assert counts[1] == 2 and counts[6] == 2 and counts[11] == 1 and counts.sum() == 5
    assert kmer_spectrum(["TTT", "AAAN"], 3, DNA).tolist() == [0.5] + [0.0] * 62 + [0.5]


def test_js_divergence_by_hand():
    assert js_divergence(np.array([1, 0]), np.array([0, 1])) == pytest.approx(1.0)
    # p = (1/2, 1/2), q = (1, 0), m = (3/4, 1/4): JS = H(m) - (H(p) + H(q)) / 2
    h_m = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert js_divergence(np.array([1, 1]), np.array([5, 0])) == pytest.approx(h_m - 0.5)
    assert js_divergence(np.array([2, 3, 5]), np.array([4, 6, 10])) == pytest.approx(0.0)


def test_kmer_js_extremes():
    same = random_dna(3, 200, seed=1)
    assert all(v == pytest.approx(0.0, abs=1e-12) for v in kmer_js(same, same, DNA).values())
    assert list(kmer_js(same, same, DNA)) == [1, 2, 3, 4, 5, 6]
    disjoint = kmer_js(["A" * 50], ["C" * 50], DNA, ks=(1, 3, 6))
    assert disjoint == {1: pytest.approx(1.0), 3: pytest.approx(1.0), 6: pytest.approx(1.0)}


def test_markov_order_expectation_on_real_dna(demo_splits):
    """i.i.d. shuffles of held-out real DNA keep its base composition and nothing else: at
    k = 1 they score exactly as the real windows do, at every k >= 2 worse."""
    reference, heldout = demo_splits["test"], demo_splits["valid"]
    real = kmer_js(heldout, reference, DNA)
    iid = kmer_js(shuffled(heldout, seed=0), reference, DNA)
    assert iid[1] == pytest.approx(real[1], abs=1e-12)
    for k in range(2, 7):
        assert iid[k] > real[k], (k, iid[k], real[k])


# --------------------------------------------------------------------------- composition


def test_gc_content_and_cpg_observed_expected_by_hand():
    assert gc_content("GGCCAT", DNA) == pytest.approx(4 / 6)
    assert gc_content("GCNNat", DNA) == pytest.approx(2 / 4)
    assert math.isnan(gc_content("NNN", DNA))
    # CpG * n / (C * G)
    assert cpg_observed_expected("CGCG", DNA) == pytest.approx(2 * 4 / (2 * 2))
    assert cpg_observed_expected("ACGT", DNA) == pytest.approx(1 * 4 / (1 * 1))
    assert cpg_observed_expected("GCAT", DNA) == 0.0
    assert cpg_observed_expected("CGNCG", DNA) == pytest.approx(2 * 4 / (2 * 2))  # CN, NC: no pair
    assert math.isnan(cpg_observed_expected("AAAA", DNA))


def test_homopolymer_bases_by_hand():
    assert homopolymer_bases("AAAAAACGTTTTTTTN", DNA) == 6 + 7
    assert homopolymer_bases("AAAAACCCCC", DNA) == 0  # runs of 5 < 6
    assert homopolymer_bases("NNNNNNNN", DNA) == 0  # N runs are not homopolymers
    assert homopolymer_bases("AAAAACCCCC", DNA, min_run=5) == 10
    assert pooled_fraction(["AAAAAACG", "ACGT"], DNA, homopolymer_bases) == pytest.approx(6 / 12)


def test_dust_scores_by_hand():
    # 62 triplets of one kind: 62 * 61 / 2 / 61
    assert dust_scores("A" * 64, DNA).tolist() == [31.0]
    # ACGT repeated: ACG x16, CGT x16, GTA x15, TAC x15 among 62 triplets
    assert dust_scores("ACGT" * 16, DNA).tolist() == [pytest.approx((120 + 120 + 105 + 105) / 61)]
    de_bruijn = de_bruijn_triplets()
    assert len(de_bruijn) == 66 and len({de_bruijn[i : i + 3] for i in range(64)}) == 64
    assert dust_scores(de_bruijn, DNA).tolist() == [0.0, 0.0, 0.0]  # three windows, no repeat
    assert dust_scores("A" * 10, DNA).tolist() == [pytest.approx(8 * 7 / 2 / 7)]  # one short window


def test_low_complexity_bases_by_hand():
    assert low_complexity_bases("A" * 100, DNA) == 100
    assert low_complexity_bases(de_bruijn_triplets(), DNA) == 0
    # N breaks triplets: 28 + 31 AAA triplets (score 59 * 58 / 2 / 58 > 2); N is not counted
    assert low_complexity_bases("A" * 30 + "N" + "A" * 33, DNA) == 63
    masked = pooled_fraction(["A" * 64, de_bruijn_triplets()], DNA, low_complexity_bases)
    assert masked == pytest.approx(64 / 130)


def sliding_dust(seq: str, window: int) -> list[float]:
    """DUST scores by a sliding count: a dict of triplet counts updated one base at a time."""
    triplets = [
        seq[i : i + 3] if set(seq[i : i + 3]) <= set("ACGT") else None for i in range(len(seq) - 2)
    ]
    per_window = min(window, len(seq)) - 2
    counts: dict[str, int] = {}
    scores = []
    for end, triplet in enumerate(triplets):
        if triplet is not None:
            counts[triplet] = counts.get(triplet, 0) + 1
        if end >= per_window:
            leaving = triplets[end - per_window]
            if leaving is not None:
                counts[leaving] -= 1
        if end >= per_window - 1:
            total = sum(counts.values())
            pairs = sum(c * (c - 1) // 2 for c in counts.values())
            scores.append(pairs / (total - 1) if total > 1 else 0.0)
    return scores


def test_dust_scores_of_a_long_sequence_scored_in_blocks_match_a_sliding_count(monkeypatch):
    rng = np.random.default_rng(3)
    pieces = ["".join(rng.choice(list("ACGT"), size=90)), "N" * 5, "AC" * 40, "T" * 30]
    seq = "".join(pieces) + "".join(rng.choice(list("ACGTN"), size=200))
    monkeypatch.setattr("genodiff.metrics.composition.DUST_BLOCK", 7)  # many block edges
    assert dust_scores(seq, DNA) == pytest.approx(sliding_dust(seq, 64))
    assert dust_scores(seq[:40], DNA) == pytest.approx(sliding_dust(seq[:40], 64))


def test_dust_memory_does_not_grow_with_the_triplet_alphabet_times_the_length():
    """A 1-Mb sample (semi-autoregressive sampling draws any length) took 1.6 GB: a count of
    every triplet kind at every position. Now the windows are counted a block at a time."""
    import tracemalloc

    seq = random_dna(1, 1_000_000, seed=4)[0]
    tracemalloc.start()
    masked = low_complexity_bases(seq, DNA)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert 0 <= masked < len(seq)
    assert peak < 200 * len(seq)  # bytes: a few arrays of the sequence's length, not 64 of them


def test_distribution_comparison_by_hand():
    apart = DistributionComparison.of(np.array([0.0, 0.0, 0.0]), np.array([1.0, 1.0, np.nan]))
    assert (apart.wasserstein, apart.ks_statistic) == (pytest.approx(1.0), pytest.approx(1.0))
    assert (apart.samples_mean, apart.reference_mean) == (0.0, 1.0)
    same = DistributionComparison.of(np.array([0.1, 0.3]), np.array([0.3, 0.1]))
    assert (same.wasserstein, same.ks_statistic) == (0.0, 0.0)
    # two point masses 0.2 apart, each carrying half the mass in one set: W1 = 0.1
    half = DistributionComparison.of(np.array([0.1, 0.3]), np.array([0.1, 0.1]))
    assert half.wasserstein == pytest.approx(0.1) and half.ks_statistic == pytest.approx(0.5)


# --------------------------------------------------------------------------- diversity


def test_duplicates_and_pairwise_distance_by_hand():
    assert duplicate_rate(["ACG", "ACG", "TTT", "ACG"]) == pytest.approx(0.5)
    assert duplicate_rate(["ACG", "TTT"]) == 0.0
    # 2-mer sets: {AC, CG, GT}, {AC, CG, GA}, {AC, CG, GT}: Jaccard distances 1/2, 0, 1/2
    assert pairwise_kmer_distance(["ACGT", "ACGA", "ACGT"], DNA, k=2) == pytest.approx(1 / 3)
    assert pairwise_kmer_distance(["AAAA", "CCCC"], DNA, k=2) == pytest.approx(1.0)


def test_nearest_neighbour_finds_copies_on_either_strand_with_exact_identity():
    train = random_dna(2, 3000, seed=5)
    copy = train[1][1200:1400]
    reverse = train[0][500:700].translate(COMPLEMENT)[::-1]
    mutated = list(train[0][2000:2200])
    for i in range(0, 200, 20):  # 10 substitutions in 200 bp: identity 0.95
        mutated[i] = "A" if mutated[i] != "A" else "C"
    overhang = train[0][-50:] + "ACGT" * 5  # runs off the end of record 0 (20 bp)
    samples = [copy, reverse, "".join(mutated), overhang, *random_dna(2, 200, seed=6)]
    hits = nearest_neighbours(samples, TrainingIndex(train, DNA))
    assert (hits[0].identity, hits[0].record, hits[0].start, hits[0].strand) == (1.0, 1, 1200, "+")
    assert (hits[1].identity, hits[1].record, hits[1].start, hits[1].strand) == (1.0, 0, 500, "-")
    assert (hits[2].identity, hits[2].record, hits[2].start) == (pytest.approx(0.95), 0, 2000)
    # 50 matching bases of 70; past the record's end is a mismatch, not record 1's first bases
    assert (hits[3].identity, hits[3].start) == (pytest.approx(50 / 70), 2950)
    for novel in hits[4:]:
        assert novel.identity is None or novel.identity < 0.5
    summary = Memorisation.of(hits, threshold=0.95)
    assert summary.flagged_samples() == [0, 1, 2] and summary.flagged == 3
    assert summary.flagged_fraction == pytest.approx(3 / 6)


def test_copies_of_real_training_windows_are_flagged_and_shuffles_are_not(demo_splits):
    train = demo_splits["train"]
    index = TrainingIndex(train, DNA)
    copies = train[5::40]
    shuffles = shuffled(copies, seed=1)
    summary = Memorisation.of(nearest_neighbours(copies + shuffles, index))
    assert summary.flagged_samples() == list(range(len(copies)))
    assert summary.max_identity == 1.0
    assert all(n.identity is None or n.identity < 0.5 for n in summary.neighbours[len(copies) :])


def repetitive_genome(seed: int) -> tuple[list[str], list[tuple[int, int, int]]]:
    """Two 1.5-Mb records of random bases, each holding tandem repeats (a 40-bp unit 600
    times: every 12-mer of the unit occurs 600 times) and record 1 a second copy of record 0's
    first repeat; returns the records and the (record, start, end) of every repeat."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("ACGT"))
    records, repeats = [], []
    units = ["".join(rng.choice(letters, 40)) for _ in range(3)]
    for record, placed in enumerate(([0, 1], [2, 0])):
        pieces, position = [], 0
        for unit in placed:
            flank = "".join(rng.choice(letters, 500_000))
            pieces += [flank, units[unit] * 600]
            repeats.append((record, position + len(flank), position + len(flank) + 24_000))
            position += len(flank) + 24_000
        pieces.append("".join(rng.choice(letters, 1_500_000 - position)))
        records.append("".join(pieces))
    return records, repeats


def test_copies_from_repeats_of_a_multi_megabase_training_set_are_all_flagged():
    train, repeats = repetitive_genome(seed=3)
    assert sum(map(len, train)) == 3_000_000
    rng = np.random.default_rng(4)
    planted = []
    for record, start, end in repeats:
        for first in (start - 300, start + 5_000, end - 700):  # across an edge, inside, across
            copy = list(train[record][first : first + 1000])
            planted.append("".join(copy))
            for i in rng.choice(1000, 15, replace=False):  # 15 substitutions: identity 0.985
                copy[i] = "ACGT"[("ACGT".index(copy[i]) + 1) % 4]
            planted.append("".join(copy)[::-1].translate(COMPLEMENT))  # and the other strand
    novel = random_dna(6, 1000, seed=9)
    summary = Memorisation.of(nearest_neighbours(planted + novel, TrainingIndex(train, DNA)))
    assert summary.flagged_samples() == list(range(len(planted)))
    identities = [n.identity for n in summary.neighbours]
    assert identities[: len(planted) : 2] == [1.0] * (len(planted) // 2)
    assert identities[1 : len(planted) : 2] == [pytest.approx(0.985)] * (len(planted) // 2)
    assert all(i is None or i < 0.5 for i in identities[len(planted) :])
    assert summary.capped == 0
    edge = summary.neighbours[0]  # 300 unique bases then the repeat: one place only
    assert (edge.record, edge.start, edge.strand) == (0, repeats[0][1] - 300, "+")


def test_the_seed_hits_of_a_sample_are_capped_rarest_first_and_the_cap_is_reported():
    train, repeats = repetitive_genome(seed=3)
    record, start, _ = repeats[0]
    samples = [train[record][start - 300 : start + 700], *random_dna(1, 1000, seed=9)]
    capped = Memorisation.of(
        nearest_neighbours(samples, TrainingIndex(train, DNA, max_seed_hits=500))
    )
    edge = capped.neighbours[0]
    assert edge.seed_hits_dropped > 0 and capped.capped == 1
    # the unique flank's seeds are kept: the copy is still found, in its place
    assert (edge.identity, edge.record, edge.start) == (1.0, record, start - 300)
    assert capped.neighbours[1].seed_hits_dropped == 0


def test_a_sparser_index_keeps_every_stride_th_seed_and_still_finds_exact_copies():
    train = random_dna(1, 20_000, seed=11)
    for stride in (1, 6, 17):
        index = TrainingIndex(train, DNA, seed_stride=stride)
        assert len(index.seeds) == (20_000 - 12) // stride + 1
        positions = index.seeds & np.uint64((1 << index.position_bits) - 1)
        assert sorted(positions.tolist()) == list(range(0, 20_000 - 11, stride))
        run = stride + 12 - 1  # the shortest exact copy sure to hold a sampled seed
        copy = train[0][7_001 : 7_001 + run]
        hit = index.nearest(0, copy)
        assert (hit.identity, hit.start) == (1.0, 7_001)


# --------------------------------------------------------------------------- discriminator


def test_kmer_features_are_per_k_frequencies():
    features = kmer_features(["ACGT", "AAAA"], DNA, k=2)
    assert features.shape == (2, 4 + 16)
    assert features[0, :4].tolist() == [0.25] * 4
    assert features[0, [4 + 1, 4 + 6, 4 + 11]].tolist() == [pytest.approx(1 / 3)] * 3  # AC CG GT
    assert features[1, 0] == 1.0 and features[1, 4] == 1.0


def test_discriminator_separates_different_dna_and_not_the_same():
    gc_rich = random_dna(20, 300, seed=1, p=(0.15, 0.35, 0.35, 0.15))
    at_rich = random_dna(20, 300, seed=2, p=(0.35, 0.15, 0.15, 0.35))
    apart = discriminator_auroc(gc_rich, at_rich, DNA)
    assert apart.auroc == 1.0 and apart.auroc_sd == 0.0 and len(apart.fold_aurocs) == 5
    same = [discriminator_auroc(random_dna(30, 300, seed=s), random_dna(30, 300, seed=s + 100), DNA)
            for s in range(3)]  # fmt: skip
    assert 0.3 < np.mean([r.auroc for r in same]) < 0.7
    for r in same:
        assert r.auroc_min <= r.auroc <= r.auroc_max and r.auroc_sd > 0


def test_discriminator_folds_follow_the_smaller_set():
    result = discriminator_auroc(random_dna(3, 100, seed=1), random_dna(10, 100, seed=2), DNA)
    assert result.folds == 3 and len(result.fold_aurocs) == 3
    with pytest.raises(ValueError, match="at least 2"):
        discriminator_auroc(random_dna(1, 100, seed=1), random_dna(10, 100, seed=2), DNA)


def mutated(seq: str, rate: float, rng: np.random.Generator) -> str:
    """``seq`` with each base redrawn with probability ``rate``."""
    bases = np.array(list(seq))
    redrawn = rng.random(len(bases)) < rate
    bases[redrawn] = rng.choice(list("ACGT"), size=int(redrawn.sum()))
    return "".join(bases)


@pytest.mark.parametrize("rate", [0.0, 0.01])
def test_near_copies_of_a_sample_stay_in_one_fold_so_dna_of_one_law_is_not_told_apart(rate):
    # Samples and reference from one law: 25 sequences, each drawn 4 times (exact copies, or
    # differing in 1% of the bases), against 100 others. A fold that held out a sample whose
    # near-copy it trained on scored its memory of it: 0.97 and 0.98 here.
    rng = np.random.default_rng(7)
    copies = [mutated(s, rate, rng) for s in random_dna(25, 300, seed=7) for _ in range(4)]
    results = [
        discriminator_auroc(copies, random_dna(100, 300, seed=8 + s), DNA, seed=s) for s in range(3)
    ]
    assert 0.3 < np.mean([r.auroc for r in results]) < 0.7
    assert {(r.sample_groups, r.reference_groups) for r in results} == {(25, 100)}


def test_near_copy_groups_link_sequences_sharing_enough_of_their_12mers():
    rng = np.random.default_rng(11)
    a, b, c = random_dna(3, 400, seed=11)
    sequences = [a, b, mutated(a, 0.01, rng), c, a[:200] + b[200:], "ACGTAC", "ACGTAC", "ACGTAG"]
    groups = near_copy_groups(sequences, DNA)
    # a, its mutant, and the a|b chimera (sharing ~half the 12-mers of each) link a and b
    assert len(set(groups[[0, 1, 2, 4]])) == 1
    assert len({groups[0], groups[3], groups[5], groups[7]}) == 4  # c and short unequal ones apart
    assert groups[5] == groups[6]  # equal sequences without any 12-mer still go together


def test_folds_keep_groups_together_and_are_stratified_k_fold_without_groups():
    from sklearn.model_selection import StratifiedKFold

    groups = np.array([0, 0, 1, 1, 1, 2, 3, 4, 0, 5, 6, 7])
    labels = np.array([1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0])  # group 0 also once on the real side
    for train, test in folds_keeping_groups_together(groups, labels, 2, seed=0):
        assert sorted([*train, *test]) == list(range(len(groups)))
        held_out = {(groups[i], labels[i]) for i in test}
        assert not held_out & {(groups[i], labels[i]) for i in train}
    ours = folds_keeping_groups_together(np.arange(12), labels, 3, seed=5)
    theirs = StratifiedKFold(3, shuffle=True, random_state=5).split(np.zeros((12, 1)), labels)
    for (train, test), (their_train, their_test) in zip(ours, theirs, strict=True):
        assert train.tolist() == their_train.tolist() and test.tolist() == their_test.tolist()


def test_samples_all_one_sequence_get_no_auroc_and_a_warning():
    reference = random_dna(40, 60, seed=10)
    metrics = evaluate_samples(["ACGTTGCA" * 8] * 5, reference, DNA).metrics
    assert metrics["discriminator_auroc"] is None and metrics["discriminator"] is None
    assert any("got 1 among the samples" in w for w in metrics["warnings"])
    assert "| discriminator AUROC | - |" in markdown_table(metrics)
    with pytest.raises(ValueError, match="at least 2 groups"):
        discriminator_auroc(["ACGTTGCA" * 8] * 5, reference, DNA)


class StageNotes:
    """A ``Progress`` that keeps the stages it hears of."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def update(self, done: float, total: float | None, what: str) -> None:
        pass


@pytest.mark.parametrize(("records", "said"), [(1, "1 training record"), (2, "2 training records")])
def test_the_memorisation_stage_counts_the_training_records_in_words(records, said):
    """Was: "an index of 1 training records"."""
    heard = StageNotes()
    train = random_dna(records, 500, seed=3)
    evaluate_samples(
        random_dna(6, 64, seed=1), random_dna(20, 64, seed=2), DNA, train, progress=heard
    )
    assert f"nearest training stretches (an index of {said})" in heard.notes


def test_discriminator_fits_on_one_blas_thread(monkeypatch):
    # Spinning OpenBLAS threads made each fit ~10x slower on a busy machine (BENCHMARKS.md):
    # every fit of the cross-validation sees one thread in each BLAS pool, whatever the default.
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_info, threadpool_limits

    seen, fit = [], LogisticRegression.fit

    def watched(self, *args, **kwargs):
        seen.append({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(LogisticRegression, "fit", watched)
    with threadpool_limits(limits=2, user_api="blas"):  # a default of more than one
        discriminator_auroc(random_dna(10, 100, seed=1), random_dna(10, 100, seed=2), DNA)
        assert all(p["num_threads"] == 2 for p in threadpool_info() if p["user_api"] == "blas")
    assert seen == [{1}] * 5  # each fold's fit


def test_every_base4_index_is_its_kmer():
    kmers = ["".join(p) for p in product("ACGT", repeat=3)]
    profiles = kmer_profiles(kmers, 3, DNA)
    assert np.array_equal(profiles, np.eye(64))


def test_window_texts_refuses_a_split_a_run_does_not_have():
    with pytest.raises(InputValueError, match=r"split='bogus': a run's data has the splits train"):
        FastaDataModule(max_length=1024).window_texts("bogus")


def test_low_complexity_masks_whole_windows_flanks_included():
    """What the docs say sets the number apart from dustmasker's: every base of a window
    scoring above 2 is masked, flanks included (sdust masks 25 bases of this sequence, the run
    of A and the A its flanks add), and a 12-bp run scores no window above 2."""
    flank = de_bruijn_triplets()  # no triplet twice
    seq = flank + "A" * 20 + flank
    starts = [i for i, score in enumerate(sliding_dust(seq, 64)) if score > 2]
    by_hand = len({i for start in starts for i in range(start, start + 64)})
    assert low_complexity_bases(seq, DNA) == by_hand > 20 + 2 * 40
    assert low_complexity_bases(flank + "A" * 12 + flank, DNA) == 0
