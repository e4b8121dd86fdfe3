import gzip
import inspect
import os
import pickle
import random
from pathlib import Path

import pytest
import torch

from genodiff import resources
from genodiff.data import genome as genome_mod
from genodiff.data.datamodule import DEMO_FASTA, FastaDataModule, Hg38DataModule
from genodiff.data.genome import Genome, bgzip_fasta, compression
from genodiff.data.hg38 import BedRow, Hg38Dataset, hg38_windows, read_bed
from genodiff.data.windows import FastaWindowDataset, fasta_split_windows, split_bounds
from genodiff.errors import InputValueError
from genodiff.registry import get
from genodiff.tokenizers import DNATokenizer

TOK = DNATokenizer()


def write_fasta(path, records, width=60, newline="\n"):
    """Write ``{name: seq}`` as a FASTA file with lines of ``width`` bases."""
    lines = []
    for name, seq in records.items():
        lines.append(f">{name} some description")
        lines += [seq[i : i + width] for i in range(0, len(seq), width)]
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    return path


def random_dna(n, seed):
    rng = random.Random(seed)
    return "".join(rng.choice("ACGT") for _ in range(n))


# ---------------------------------------------------------------- genome access


def test_fetch_preserves_case_and_lowercase_encodes_to_bases(tmp_path):
    seq = "ACGTacgtNNnnACGT" * 10
    fa = write_fasta(tmp_path / "g.fa", {"chr1": seq}, width=7)
    genome = Genome(fa)
    assert genome.names == ["chr1"] and genome.length("chr1") == len(seq)
    assert genome.fetch("chr1", 3, 40) == seq[3:40]
    ids = TOK.encode_array(genome.fetch("chr1", 0, 16))
    assert ids.tolist() == [7, 8, 9, 10, 7, 8, 9, 10, 11, 11, 11, 11, 7, 8, 9, 10]
    with pytest.raises(IndexError, match="outside 'chr1'"):
        genome.fetch("chr1", 100, len(seq) + 1)


def test_windows_line_endings(tmp_path):
    seqs = {"a": random_dna(250, 1), "b": random_dna(70, 2)}
    fa = write_fasta(tmp_path / "crlf.fa", seqs, width=60, newline="\r\n")
    genome = Genome(fa)
    assert genome.lengths == {"a": 250, "b": 70}
    assert genome.fetch("a", 0, 250) == seqs["a"]
    assert genome.fetch("a", 55, 185) == seqs["a"][55:185]  # crosses line breaks
    assert genome.fetch("b", 60, 70) == seqs["b"][60:]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.fa"):
        Genome(tmp_path / "nope.fa")


def test_unknown_chromosome_lists_names(tmp_path):
    fa = write_fasta(tmp_path / "g.fa", {f"chr{i}": "ACGT" * 5 for i in range(12)})
    genome = Genome(fa)
    with pytest.raises(KeyError, match=r"'chrZ'.*12 records: chr0, chr1, .*chr9, \.\.\."):
        genome.fetch("chrZ", 0, 1)


def test_empty_record_is_skipped_with_warning(tmp_path):
    fa = tmp_path / "g.fa"
    fa.write_text(">a\nACGT\n>empty\n>b\nGGCC\n")
    with pytest.warns(UserWarning, match="skipping 1 empty record.*empty"):
        genome = Genome(fa)
    assert genome.names == ["a", "b"]
    assert genome.fetch("b", 0, 4) == "GGCC"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("ACGT\n>a\nACGT\n", "malformed FASTA.*before the first sequence"),
        (">a\nACGT\n>a\nACGT\n", "malformed FASTA.*Duplicate.*must be unique"),
        ("", "malformed FASTA"),
        (">a\nACGT\nAC\nACGT\n", "malformed FASTA.*not consistent"),
        (">a\n>b\n", "every record is empty"),
    ],
)
@pytest.mark.filterwarnings("ignore:.*empty record")
def test_malformed_fasta(tmp_path, text, match):
    fa = tmp_path / "bad.fa"
    fa.write_text(text)
    with pytest.raises(ValueError, match=match):
        Genome(fa)


def test_bgzf_reads_and_plain_gzip_is_rejected(tmp_path):
    seq = random_dna(5000, 3)
    plain = write_fasta(tmp_path / "g.fa", {"c": seq})
    gz = tmp_path / "g.fa.gz"
    with open(plain, "rb") as fin, gzip.open(gz, "wb") as fout:
        fout.write(fin.read())
    assert compression(gz) == "gzip"
    with pytest.raises(ValueError, match=r"plain gzip.*gunzip .*g\.fa\.gz.*bgzip"):
        Genome(gz)
    bgz = bgzip_fasta(gz, tmp_path / "g.bgz.fa.gz")
    assert compression(bgz) == "bgzf" and compression(plain) == "none"
    genome = Genome(bgz)
    assert genome.fetch("c", 1234, 4321) == seq[1234:4321]
    assert (tmp_path / "g.bgz.fa.gz.fai").exists() and (tmp_path / "g.bgz.fa.gz.gzi").exists()


def test_bgzf_reads_starting_at_a_block_boundary(tmp_path):
    # A read that starts exactly where a BGZF block ends: pyfaidx fails on such a read in
    # blocks of 65,536 bytes (Biopython's default). Positions are computed by hand from the
    # layout: a 6-byte header line, then lines of 60 bases and a newline.
    rng = random.Random(0)
    seq = "".join(rng.choice("ACGT") for _ in range(200_000))
    lines = [seq[i : i + 60] for i in range(0, len(seq), 60)]
    (tmp_path / "g.fa").write_text(">chr1\n" + "\n".join(lines) + "\n")
    genome = Genome(bgzip_fasta(tmp_path / "g.fa", tmp_path / "g.fa.gz"))
    for block_end in (65_280, 65_536, 2 * 65_280, 2 * 65_536):
        start = next(p for p in range(len(seq)) if 6 + p + p // 60 >= block_end)
        assert genome.fetch("chr1", start, start + 500) == seq[start : start + 500]
        assert genome.fetch("chr1", start - 1, start + 1) == seq[start - 1 : start + 1]


def test_a_bgzf_file_with_full_blocks_reads_at_a_block_end(tmp_path):
    # Blocks of 65,536 bytes, as Biopython's writer fills them by default (and genodiff wrote
    # them before): pyfaidx itself fails on the read at the first block's end; Genome reads it.
    import pyfaidx
    from Bio import bgzf

    rng = random.Random(1)
    seq = "".join(rng.choice("ACGT") for _ in range(100_000))
    text = ">chr1\n" + "\n".join(seq[i : i + 60] for i in range(0, len(seq), 60)) + "\n"
    with bgzf.BgzfWriter(tmp_path / "full.fa.gz", "wb") as out:
        out.write(text.encode())
    start = next(p for p in range(len(seq)) if 6 + p + p // 60 >= 65_536)
    with pytest.raises(ValueError, match="within_block_offset"):
        pyfaidx.Fasta(str(tmp_path / "full.fa.gz"))["chr1"][start : start + 10]
    genome = Genome(tmp_path / "full.fa.gz")
    assert genome.fetch("chr1", start, start + 700) == seq[start : start + 700]
    assert genome.fetch("chr1", start - 5, start + 5) == seq[start - 5 : start + 5]


def test_bgzf_content_with_plain_name_is_rejected(tmp_path):
    plain = write_fasta(tmp_path / "g.fa", {"c": "ACGT" * 10})
    bgzip_fasta(plain, tmp_path / "x.fa")
    with pytest.raises(ValueError, match="rename it"):
        Genome(tmp_path / "x.fa")


@pytest.fixture
def gd_read_only_dir(tmp_path, monkeypatch):
    """A folder that cannot be written; as root (where chmod does not stop writes) the
    writability probe is patched so the cache-folder code path still runs."""
    folder = tmp_path / "ro"
    folder.mkdir()
    seq = random_dna(3000, 4)
    write_fasta(folder / "g.fa", {"c": seq})
    bgzip_fasta(folder / "g.fa", folder / "g.fa.gz")
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real = genome_mod._dir_is_writable
        monkeypatch.setattr(genome_mod, "_dir_is_writable", lambda p: p != folder and real(p))
    yield folder, seq
    folder.chmod(0o755)


@pytest.mark.parametrize("name", ["g.fa", "g.fa.gz"])
def test_read_only_folder_puts_index_in_cache(gd_read_only_dir, tmp_path, monkeypatch, name):
    folder, seq = gd_read_only_dir
    cache = tmp_path / "cache"
    genome = Genome(folder / name, cache_dir=cache)
    assert genome.fetch("c", 100, 2900) == seq[100:2900]
    assert sorted(p.name for p in folder.iterdir()) == ["g.fa", "g.fa.gz"]
    suffixes = sorted(p.suffix for p in cache.iterdir())
    assert suffixes == ([".fai", ".gzi"] if name.endswith(".gz") else [".fai"])
    # The environment variable is the default cache folder.
    env_cache = tmp_path / "env_cache"
    monkeypatch.setenv("GENODIFF_CACHE_DIR", str(env_cache))
    assert Genome(folder / name).fetch("c", 0, 10) == seq[:10]
    assert any(p.suffix == ".fai" for p in env_cache.iterdir())


def files_under(folder):
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", ["g.fa", "g.fa.gz"])
def test_a_genome_the_package_ships_gets_its_index_in_the_cache(tmp_path, monkeypatch, name):
    """A genome inside an installed wheel (genodiff/_bundle/data) gets no file written beside
    it, though its folder is writable (was: .fai/.gzi written into site-packages, left behind
    by `pip uninstall`): its index goes to the cache folder. The same file elsewhere, a user's
    own, is indexed beside itself."""
    bundle = tmp_path / "site-packages" / "genodiff" / "_bundle"  # what a wheel installs
    (bundle / "data").mkdir(parents=True)
    seq = random_dna(3000, 5)
    write_fasta(tmp_path / "g.fa", {"c": seq})
    bgzip_fasta(tmp_path / "g.fa", tmp_path / "g.fa.gz")
    shipped = bundle / "data" / name
    shipped.write_bytes((tmp_path / name).read_bytes())
    monkeypatch.setattr(resources, "BUNDLE", bundle)
    monkeypatch.delenv("GENODIFF_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    before = files_under(bundle)
    assert Genome(shipped).fetch("c", 100, 2900) == seq[100:2900]
    assert files_under(bundle) == before
    cached = sorted(p.suffix for p in (tmp_path / "xdg" / "genodiff" / "fai").iterdir())
    assert cached == ([".fai", ".gzi"] if name.endswith(".gz") else [".fai"])
    assert Genome(tmp_path / name).fetch("c", 0, 10) == seq[:10]  # a user's own file
    assert Path(f"{tmp_path / name}.fai").is_file()


def test_a_matching_index_beside_a_shipped_genome_is_read_and_a_stale_one_left(
    tmp_path, monkeypatch
):
    """An index already beside a shipped genome (written by an older genodiff) is used when it
    fits the file, and never rewritten or removed when it does not: the cache's serves then."""
    bundle = tmp_path / "genodiff" / "_bundle"
    (bundle / "data").mkdir(parents=True)
    seq = random_dna(2000, 6)
    fasta = write_fasta(bundle / "data" / "g.fa", {"c": seq})
    Genome(fasta).close()  # indexed beside it, as genodiff did before
    monkeypatch.setattr(resources, "BUNDLE", bundle)
    cache = tmp_path / "cache"
    assert Genome(fasta, cache_dir=cache).fetch("c", 7, 1500) == seq[7:1500]
    assert not cache.exists()  # the index beside it served
    stale = Path(f"{fasta}.fai")
    stale.write_text("c\t5\t3\t60\t61\n")  # another file's index
    before = files_under(bundle)
    assert Genome(fasta, cache_dir=cache).fetch("c", 7, 1500) == seq[7:1500]
    assert files_under(bundle) == before
    assert [p.suffix for p in cache.iterdir()] == [".fai"]


def test_genome_pickles_without_handle(tmp_path):
    fa = write_fasta(tmp_path / "g.fa", {"c": "ACGTTGCA" * 20})
    genome = Genome(fa)
    genome.fetch("c", 0, 4)  # opens the handle
    clone = pickle.loads(pickle.dumps(genome))
    assert clone._handle is None
    assert clone.fetch("c", 4, 12) == "TGCAACGT"


def test_bundled_demo_genome():
    assert compression(DEMO_FASTA) == "bgzf"
    assert DEMO_FASTA.stat().st_size < 400_000
    genome = Genome(DEMO_FASTA)
    assert genome.lengths == {"22:20000001-21000000": 1_000_000}


# ---------------------------------------------------------------- FASTA split windows


def test_split_bounds():
    assert split_bounds(1000, (0.8, 0.1, 0.1), "train") == (0, 800)
    assert split_bounds(1000, (0.8, 0.1, 0.1), "valid") == (800, 900)
    assert split_bounds(1000, (0.8, 0.1, 0.1), "test") == (900, 1000)
    assert split_bounds(7, (0.5, 0.25, 0.25), "valid") == (3, 5)
    with pytest.raises(ValueError, match="summing to 1"):
        split_bounds(10, (0.8, 0.3, 0.1), "train")
    with pytest.raises(InputValueError, match="summing to 1"):
        split_bounds(10, (float("nan"), 0.5, 0.5), "train")
    with pytest.raises(ValueError, match="split must be one of"):
        split_bounds(10, (0.8, 0.1, 0.1), "val")


def test_split_bounds_whole_boundaries_survive_float_rounding():
    # 29% of 100 bases is 29 and 29% + 61% is 90, though 100 * 0.29 == 28.999999999999996 and
    # 100 * (0.29 + 0.61) == 89.99999999999999 in floats
    fractions = (0.29, 0.61, 0.1)
    assert split_bounds(100, fractions, "train") == (0, 29)
    assert split_bounds(100, fractions, "valid") == (29, 90)
    assert split_bounds(100, fractions, "test") == (90, 100)


@pytest.fixture
def gd_two_records(tmp_path):
    # chr1: 1000 bp with an N run filling [100, 180); chr2: 450 bp.
    chr1 = random_dna(1000, 5)
    chr1 = chr1[:100] + "N" * 80 + chr1[180:]
    chr2 = random_dna(450, 6).lower()
    return write_fasta(tmp_path / "two.fa", {"chr1": chr1, "chr2": chr2}), chr1, chr2


def test_fasta_split_windows_are_disjoint_tiles(gd_two_records):
    fa, _, _ = gd_two_records
    genome = Genome(fa)
    by_split = {s: fasta_split_windows(genome, s, 40) for s in ("train", "valid", "test")}
    # chr1 train [0, 800): 20 windows, those in [80,120),[120,160),[160,200) hold > 50% N
    # except [80,120) (20 N of 40) and [160,200) (20 N) -> only [120,160) is dropped.
    train_starts = [s for c, s, _ in by_split["train"] if c == "chr1"]
    assert train_starts == [s for s in range(0, 800, 40) if s != 120]
    # chr1 valid [800, 900): 2 windows, tail of 20 dropped; chr2 valid [360, 405): 1 window.
    assert by_split["valid"] == [("chr1", 800, 840), ("chr1", 840, 880), ("chr2", 360, 400)]
    assert by_split["test"] == [("chr1", 900, 940), ("chr1", 940, 980), ("chr2", 405, 445)]
    spans = {s: {(c, i) for c, a, b in w for i in range(a, b)} for s, w in by_split.items()}
    assert not spans["train"] & spans["valid"] and not spans["valid"] & spans["test"]
    assert not spans["train"] & spans["test"]
    assert all(b - a == 40 for w in by_split.values() for _, a, b in w)
    assert fasta_split_windows(genome, "train", 40) == by_split["train"]  # deterministic
    strict = fasta_split_windows(genome, "train", 40, max_n_fraction=0.0)
    assert [s for c, s, _ in strict if c == "chr1"][:4] == [0, 40, 200, 240]


def test_fasta_dataset_items_pad_n_and_eos(gd_two_records):
    fa, chr1, chr2 = gd_two_records
    ds = FastaWindowDataset(fa, "train", max_length=40)
    item = ds[2]["input_ids"]  # chr1 [80, 120): 20 bases then 20 N
    assert item.dtype == torch.long and item.shape == (40,)
    assert item.tolist() == TOK.encode(chr1[80:100]) + [TOK.pad_id] * 20
    last = ds[len(ds) - 1]["input_ids"]  # chr2 is lowercase: still bases, no [UNK]
    assert last.tolist() == TOK.encode(chr2[320:360]) and TOK.unk_id not in last.tolist()
    eos = FastaWindowDataset(fa, "valid", max_length=40, add_eos=True)
    item = eos[0]["input_ids"]
    assert item.shape == (40,) and item[-1] == TOK.eos_id
    assert item[:-1].tolist() == TOK.encode(chr1[800:839])


def test_rc_aug_is_reproducible_and_per_epoch(gd_two_records):
    fa, _, _ = gd_two_records
    plain = FastaWindowDataset(fa, "train", max_length=40)
    aug = FastaWindowDataset(fa, "train", max_length=40, rc_aug=True, seed=7)
    aug2 = FastaWindowDataset(fa, "train", max_length=40, rc_aug=True, seed=7)

    def flips(ds):
        out = []
        for i in range(len(ds)):
            x, ref = ds[i]["input_ids"], plain[i]["input_ids"]
            assert x.tolist() in (ref.tolist(), TOK.reverse_complement_ids(ref).tolist())
            out.append(not torch.equal(x, ref))
        return out

    epoch0 = flips(aug)
    assert epoch0 == flips(aug2) and 0 < sum(epoch0) < len(epoch0)
    aug.set_epoch(1)
    assert flips(aug) != epoch0


# ---------------------------------------------------------------- hg38 windows


def test_hg38_windows_hand_computed():
    L = 2**18  # 4 windows per 2**20 row
    lengths = {"chr1": 1_572_864, "chr2": 2_000_000}
    rows = [
        BedRow("chr1", 0, 131_072, "train"),
        BedRow("chr1", 1_000_000, 1_131_072, "train"),  # crosses the end of chr1
        BedRow("chr2", 5, 131_077, "train"),
    ]
    assert hg38_windows(rows, lengths, L) == [
        ("chr1", 0, 262_144),
        ("chr1", 262_144, 524_288),
        ("chr1", 524_288, 786_432),
        ("chr1", 786_432, 1_048_576),
        ("chr1", 1_000_000, 1_262_144),
        ("chr1", 1_262_144, 1_524_288),
        ("chr1", 1_310_720, 1_572_864),  # [1_524_288, 1_786_432) shifted back inside
        ("chr1", 1_310_720, 1_572_864),  # duplicates kept, as in the reference
        ("chr2", 5, 262_149),
        ("chr2", 262_149, 524_293),
        ("chr2", 524_293, 786_437),
        ("chr2", 786_437, 1_048_581),
    ]
    assert len(hg38_windows(rows[:1], lengths, 2**20)) == 1
    with pytest.raises(ValueError, match="power of two"):
        hg38_windows(rows, lengths, 1000)


@pytest.fixture
def gd_hg38(tmp_path):
    chroms = {"chrA": random_dna(5000, 8), "chrB": random_dna(3000, 9)}
    chroms["chrA"] = chroms["chrA"][:40] + "NNNN" + chroms["chrA"][44:]
    fa = write_fasta(tmp_path / "hg.fa", chroms)
    bed = tmp_path / "seq.bed"
    bed.write_text("chrA\t0\t100\ttrain\nchrB\t2000\t2100\tvalid\nchrA\t100\t200\ttest\n")
    return fa, bed, chroms


def test_hg38_dataset_reads_reference_windows(gd_hg38):
    fa, bed, chroms = gd_hg38
    ds = Hg38Dataset(fa, bed, "train", max_length=1024)
    assert len(ds) == 1024  # one row x 2**20 / 1024 shifts
    assert ds.window(0) == ("chrA", 0, 1024) and ds.window(3) == ("chrA", 3072, 4096)
    assert ds.window(4) == ds.window(1023) == ("chrA", 3976, 5000)
    first = ds[0]["input_ids"].tolist()
    assert first[40:44] == [TOK.pad_id] * 4
    assert first[:40] == TOK.encode(chroms["chrA"][:40])
    assert ds[4]["input_ids"].tolist() == TOK.encode(chroms["chrA"][3976:5000])
    valid = Hg38Dataset(fa, bed, "valid", max_length=1024, add_eos=True, limit_windows=3)
    assert len(valid) == 3 and valid.window(0) == ("chrB", 1976, 3000)
    item = valid[0]["input_ids"]
    assert item.shape == (1024,) and item[-1] == TOK.eos_id
    assert item[:-1].tolist() == TOK.encode(chroms["chrB"][1976:2999])


def brute_force_overlaps(dataset, chrom, start, end):
    windows = (dataset.window(i) for i in range(len(dataset)))
    return any(c == chrom and s < end and start < e for c, s, e in windows)


def probes(dataset, lengths, step, widths=(1, 7, 300)):
    """Stretches of every width starting at every ``step`` bases, the bases just outside each
    window, and a chromosome without windows."""
    for chrom, length in lengths.items():
        for start in range(0, length, step):
            for width in widths:
                yield chrom, start, min(start + width, length)
    for chrom, start, end in (dataset.window(i) for i in range(len(dataset))):
        yield chrom, max(start - 1, 0), start
        yield chrom, end, end + 1
    yield "chrZ", 0, 10


def test_coverage_answers_as_every_window_would(gd_two_records, gd_hg38):
    fasta = FastaWindowDataset(gd_two_records[0], "train", max_length=32, max_n_fraction=0.1)
    fa, bed, chroms = gd_hg38
    lengths = {name: len(seq) for name, seq in chroms.items()}
    datasets = [
        (fasta, fasta.genome.lengths, 13),
        (Hg38Dataset(fa, bed, "train", max_length=1024), lengths, 61),  # windows overlap at the end
        (Hg38Dataset(fa, bed, "valid", max_length=1024, limit_windows=2), lengths, 61),
    ]
    for dataset, record_lengths, step in datasets:
        coverage = dataset.coverage()
        answers = [
            (probe, coverage.overlaps(*probe), brute_force_overlaps(dataset, *probe))
            for probe in probes(dataset, record_lengths, step)
        ]
        assert [a for a in answers if a[1] != a[2]] == []
        assert {a[1] for a in answers} == {True, False}  # both answers are exercised


def test_hg38_bed_errors(tmp_path, gd_hg38):
    fa, _, _ = gd_hg38
    bad = tmp_path / "bad.bed"
    bad.write_text("chrA\t0\t100\ttrain\nchrA\t0\t100\n")
    with pytest.raises(ValueError, match="line 2: expected 4 columns"):
        read_bed(bad)
    bad.write_text("chrA\t0\t100\tval\n")
    with pytest.raises(ValueError, match="line 1: split must be one of"):
        read_bed(bad)
    bad.write_text("chrQ\t0\t100\ttrain\n")
    with pytest.raises(KeyError, match="chrQ"):
        Hg38Dataset(fa, bad, "train", max_length=1024)
    bad.write_text("chrB\t0\t100\ttrain\n")
    with pytest.raises(ValueError, match="shorter than max_length"):
        Hg38Dataset(fa, bad, "train", max_length=4096)


# ---------------------------------------------------------------- data modules


def test_datamodules_are_registered_with_explicit_kwargs():
    assert get("data", "fasta") is FastaDataModule
    assert get("data", "hg38") is Hg38DataModule
    params = inspect.signature(Hg38DataModule).parameters
    assert {"fasta", "bed", "max_length", "rc_aug", "add_eos", "limit_windows"} <= set(params)
    with pytest.raises(TypeError):
        FastaDataModule(fasta="x.fa", max_len=10)


def test_fasta_datamodule_batches(gd_two_records):
    fa, chr1, _ = gd_two_records
    dm = FastaDataModule(fasta=str(fa), max_length=40, batch_size=4, eval_batch_size=2, seed=3)
    dm.setup()
    batch = next(iter(dm.train_dataloader()))["input_ids"]
    assert batch.shape == (4, 40) and batch.dtype == torch.long
    val = [b["input_ids"] for b in dm.val_dataloader()]
    assert [b.shape for b in val] == [(2, 40), (1, 40)]  # not shuffled, no RC
    assert val[0][0].tolist() == TOK.encode(chr1[800:840])
    train = dm.datasets["train"]
    assert train.rc_aug and not dm.datasets["valid"].rc_aug
    with_n = dm.train_dataloader().dataset[2]["input_ids"]
    assert (with_n == TOK.pad_id).sum() == 20

    def epoch_batches(module, epoch):
        loader = module.train_dataloader()
        loader.sampler.set_epoch(epoch)
        return torch.cat([b["input_ids"] for b in loader])

    again = FastaDataModule(fasta=str(fa), max_length=40, batch_size=4, seed=3)
    assert torch.equal(epoch_batches(dm, 0), epoch_batches(again, 0))
    assert not torch.equal(epoch_batches(dm, 0), epoch_batches(dm, 1))


def test_fasta_datamodule_with_workers(gd_two_records):
    fa, _, _ = gd_two_records
    kwargs = {"fasta": str(fa), "max_length": 40, "batch_size": 5, "seed": 1}
    serial = torch.cat([b["input_ids"] for b in FastaDataModule(**kwargs).train_dataloader()])
    workers = FastaDataModule(**kwargs, num_workers=2).train_dataloader()
    assert torch.equal(serial, torch.cat([b["input_ids"] for b in workers]))


def test_missing_files_fail_fast(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.fa"):
        FastaDataModule(fasta=str(tmp_path / "nope.fa")).check_files()
    dm = Hg38DataModule(fasta=str(tmp_path / "hg38" / "hg38.ml.fa"))
    with pytest.raises(FileNotFoundError, match=r"hg38\.ml\.fa.*genodiff data hg38 --dest .*hg38"):
        dm.check_files()
    with pytest.raises(FileNotFoundError, match="genodiff data hg38"):
        dm.setup("fit")


@pytest.mark.parametrize(
    "name", ["chr22_20-21Mb.fa.gz", "species/e_coli_536.fa.gz", "species/s_aureus_n315.fa.gz"]
)
def test_bundled_fastas_have_no_full_bgzf_block(name):
    # pyfaidx cannot start a read at the end of a full 65,536-byte block (the tests above)
    from Bio import bgzf

    with open(DEMO_FASTA.parent / name, "rb") as handle:
        sizes = [block[3] for block in bgzf.BgzfBlocks(handle)]
    assert len(sizes) > 1 and max(sizes) < 65_536
