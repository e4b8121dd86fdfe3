"""What loading a trained model and using it imports: ``genodiff.load`` (a run's .ckpt or an
export folder), ``Model.generate``, ``Model.score`` and ``Model.windows`` in one process import
none of the training stack (Lightning, Hydra) nor the sample-quality metrics' libraries
(scikit-learn, matplotlib, SciPy): those come with the commands that use them (training,
fine-tuning, ``evaluate-samples``, several processes). Each check runs in a fresh interpreter,
where nothing was imported before. (numba, which compiles the CPU selective scan, imports parts
of SciPy, its BLAS bindings among them, to compile anything: those modules are allowed, and
only those.)
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from genodiff.model import GenerativeModel
from genodiff.pipeline import Model
from tests.test_cli import ROOT
from tests.test_input_refusals import SMALL_BACKBONES
from tests.test_load_model import lightning_checkpoint

LENGTH = 16
RECORD = 1600  # bases of the FASTA's one record; its test split: the last tenth, 10 windows
# The training stack, then what the sample-quality metrics need; Lightning is one
# distribution imported under three names.
TRAINING = ("lightning", "lightning_fabric", "pytorch_lightning", "hydra")
METRICS = ("sklearn", "matplotlib", "scipy")
WATCHED = TRAINING + METRICS

# The modules of the WATCHED packages that were imported, printed as JSON.
REPORT_MODULES = f"sorted(name for name in sys.modules if name.split('.')[0] in {WATCHED!r})"

# In a fresh interpreter: load, draw, score, cut the data's windows; what came of it and the
# modules of the WATCHED packages imported meanwhile.
USE_A_MODEL = f"""
import json, sys
import genodiff

model = genodiff.load(sys.argv[1])
samples = model.generate(2, length={LENGTH}, steps=4, seed=0)
scores = model.score(list(samples), batch_size=2)
windows = model.windows("test")
print(json.dumps({{
    "samples": list(samples),
    "scores": scores,
    "windows": windows,
    "modules": {REPORT_MODULES},
    "compiler": "torch._dynamo" in sys.modules,
}}))
"""


def fresh_python(code: str, *args: str) -> str:
    """The last line ``code`` prints, run in a new interpreter from the repository root."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """A FASTA of one record of random bases, and the record."""
    bases = "".join(random.Random(0).choice("ACGT") for _ in range(RECORD))
    path = tmp_path_factory.mktemp("genome") / "genome.fa"
    path.write_text(f">chr1\n{bases}\n")
    return path, bases


@pytest.fixture(scope="module")
def config(genome) -> dict:
    return {
        "model": {"name": "caduceus", "d_model": 16, "n_layer": 1},
        "objective": {"name": "mdlm"},
        "data": {"name": "fasta", "fasta": str(genome[0]), "max_length": LENGTH},
        "ema": {"decay": 0.5},
    }


@pytest.fixture(scope="module", params=["checkpoint", "export folder"])
def used(request, config, tmp_path_factory) -> dict:
    """What ``USE_A_MODEL`` printed for a run's .ckpt (as a Lightning Trainer saves it) or an
    export folder (``save_pretrained``)."""
    folder = tmp_path_factory.mktemp("model")
    if request.param == "checkpoint":
        reference = folder / "last.ckpt"
        lightning_checkpoint(config, reference)
    else:
        reference = Model(GenerativeModel(config), "in memory").save_pretrained(folder / "m")
    return json.loads(fresh_python(USE_A_MODEL, str(reference)))


@pytest.fixture(scope="module")
def numba_imports() -> set[str]:
    """The modules of the WATCHED packages that numba imports to compile a function."""
    code = "import json, sys, numba\nnumba.njit(lambda x: x + 1)(1)\n"
    return set(json.loads(fresh_python(f"{code}print(json.dumps({REPORT_MODULES}))")))


def test_the_model_was_loaded_and_used(used, genome):
    """The run did what it was asked (so the imports below are those of real work)."""
    assert [len(sample) for sample in used["samples"]] == [LENGTH, LENGTH]
    assert set("".join(used["samples"])) <= set("ACGT")
    assert len(used["scores"]) == 2 and all(score > 0 for score in used["scores"])
    # the test split is the record's last tenth, tiled by windows of LENGTH bases
    test_split = genome[1][-RECORD // 10 :]
    assert "".join(used["windows"]) == test_split
    assert [len(window) for window in used["windows"]] == [LENGTH] * (len(test_split) // LENGTH)


def modules_of(package: str, modules: list[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] == package}


@pytest.mark.parametrize("package", TRAINING)
def test_no_training_package_is_imported(used, package):
    assert modules_of(package, used["modules"]) == set()


@pytest.mark.parametrize("package", METRICS)
def test_no_metrics_package_is_imported(used, numba_imports, package):
    """``evaluate_samples`` and the metrics live in ``genodiff.sample_quality``, which
    loading never imports; numba's own SciPy modules are allowed."""
    assert modules_of(package, used["modules"]) <= numba_imports


def test_torch_s_compiler_is_not_imported(used):
    """Nothing on the way compiles, so ``torch._dynamo`` (about 1.5 s to import) stays out: the
    memory check's build on the meta device skips the initialisers that would import it
    (``genodiff.model.SkipInPlaceOnMeta``)."""
    assert used["compiler"] is False


def test_one_process_asked_for_imports_no_lightning():
    """``--devices 1`` (sample, eval) with accelerator auto or cpu: the one process
    that no --devices gives, without importing Lightning (seconds) to start nothing; "cpu"
    named puts it on the CPU (was: on the caller's device, a GPU where there is one)."""
    code = (
        "import json, sys\n"
        "from genodiff.parallel import Workers, launch_workers\n"
        "asked = [{'accelerator': a, 'devices': 1, 'num_nodes': 1} for a in ('auto', 'cpu')]\n"
        "workers = [launch_workers(settings) for settings in asked]\n"
        "alone = [(w.rank, w.world_size, w.fabric is None, str(w.device)) for w in workers]\n"
        f"print(json.dumps([alone, {REPORT_MODULES}]))"
    )
    alone, modules = json.loads(fresh_python(code))
    assert alone == [[0, 1, True, "None"], [0, 1, True, "cpu"]]
    assert modules_of("lightning", modules) == set()
    assert modules_of("lightning_fabric", modules) == set()


def test_counting_the_weights_of_any_backbone_imports_no_compiler():
    """The memory check's meta build of every built-in backbone (``genodiff.model.backbone_size``)
    runs no Python reference kernel, each of which would import ``torch._dynamo``."""
    code = (
        "import json, sys\n"
        "from genodiff.model import backbone_size\n"
        "sizes = [backbone_size({**c, 'vocab_size': 16}) for c in json.loads(sys.argv[1])]\n"
        "print(json.dumps([sizes, 'torch._dynamo' in sys.modules]))"
    )
    sizes, compiler = json.loads(fresh_python(code, json.dumps(list(SMALL_BACKBONES.values()))))
    assert len(sizes) == len(SMALL_BACKBONES) and all(weights > 0 for _, weights in sizes)
    assert compiler is False


def refusals_in_a_fresh_python(command: str, config: str, refused: list[str], cwd: Path):
    """``genodiff COMMAND CONFIG OVERRIDE`` for each of ``refused`` in one fresh Python: the
    exit codes, the error lines, and the Lightning modules loaded by then."""
    code = (
        "import json, sys\nfrom genodiff import cli\n"
        "codes = [cli.main([sys.argv[1], sys.argv[2], given]) for given in sys.argv[3:]]\n"
        f"print(json.dumps([codes, {REPORT_MODULES}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, command, str(ROOT / "configs" / config), *refused],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    codes, modules = json.loads(done.stdout.strip().splitlines()[-1])
    lines = done.stderr.strip().splitlines()
    assert codes == [2] * len(refused) and len(lines) == len(refused), done.stderr
    lightning = ("lightning", "lightning_fabric", "pytorch_lightning")
    return lines, {package: modules_of(package, modules) for package in lightning}


def test_a_refused_training_config_is_said_before_lightning_is_imported(tmp_path):
    """`genodiff train CONFIG` with a mistyped key (trainer's too: its keys are read from
    Lightning's source), a wrong value or a missing data file says its one line without
    importing Lightning (was: 7 s on a 2-core machine, Lightning imported first; now 2-3 s)."""
    refused = [
        "trainer.max_step=3",  # trainer.max_steps
        "model.d_modle=32",  # model.d_model
        "trainer.precision=bf17",
        f"data.fasta={tmp_path / 'missing.fa'}",
    ]
    lines, lightning = refusals_in_a_fresh_python("train", "demo.yaml", refused, tmp_path)
    assert "did you mean 'trainer.max_steps'?" in lines[0]
    assert "did you mean 'model.d_model'?" in lines[1]
    assert lines[2].startswith("genodiff train: error: trainer.precision: expected one of")
    assert "'bf16-mixed'" in lines[2]
    assert "missing.fa" in lines[3]
    assert lightning == {package: set() for package in lightning}


def test_a_refused_fine_tuning_config_is_said_before_lightning_is_imported(tmp_path):
    """`genodiff finetune CONFIG` likewise (was: 9.5 s, Lightning imported first; now 3 s)."""
    refused = ["trainer.max_epoch=2", "optim.weight_decayy=0.1", "model.d_modle=32"]
    config = "genomic_benchmarks_demo.yaml"
    lines, lightning = refusals_in_a_fresh_python("finetune", config, refused, tmp_path)
    assert "did you mean 'trainer.max_epochs'?" in lines[0]
    assert "did you mean 'optim.weight_decay'?" in lines[1]
    assert "did you mean 'model.d_model'?" in lines[2]
    assert lightning == {package: set() for package in lightning}


def test_a_refused_classifier_config_is_said_before_lightning_is_imported(tmp_path):
    """`genodiff classifier CONFIG` likewise: a mistyped key, a wrong group option or value, a
    missing data folder or generator checkpoint (was: Lightning imported first, 8-14 s on a
    shared 2-core machine)."""
    refused = [
        "trainer.max_step=3",  # trainer.max_steps
        "model.d_modle=32",  # model.d_model
        "model=caduceus_tinyy",  # model=caduceus_tiny
        "kind=noisyy",
        f"data.root={tmp_path / 'missing'}",
        f"generator={tmp_path / 'missing.ckpt'}",
    ]
    lines, lightning = refusals_in_a_fresh_python(
        "classifier", "classifier_demo.yaml", refused, tmp_path
    )
    assert "did you mean 'trainer.max_steps'?" in lines[0]
    assert "did you mean 'model.d_model'?" in lines[1]
    assert "did you mean model=caduceus_tiny?" in lines[2]
    assert lines[3] == "genodiff classifier: error: kind='noisyy': use one of noisy, causal"
    assert f"no folder {tmp_path / 'missing' / 'human_vs_phage'}" in lines[4]
    # the classifier's keys (was: "point benchmark.root at it", fine-tuning's key)
    assert "point data.root at it" in lines[4] and "benchmark." not in lines[4]
    assert f"{tmp_path / 'missing.ckpt'}: not found" in lines[5]
    assert lightning == {package: set() for package in lightning}


def test_the_trainer_keys_read_from_lightning_s_source_are_the_imported_trainer_s():
    """``genodiff.trainer_spec`` reads lightning.Trainer's arguments without importing it:
    the same names and defaults as the imported class's, and every annotation takes and
    refuses the same config values."""
    import inspect

    import lightning

    from genodiff.config_values import fits
    from genodiff.trainer_spec import trainer_signature

    imported = dict(inspect.signature(lightning.Trainer.__init__).parameters)
    imported.pop("self")
    hints = typing.get_type_hints(lightning.Trainer.__init__)
    read = trainer_signature().parameters
    assert list(read) == list(imported)
    assert {n: p.default for n, p in read.items()} == {n: p.default for n, p in imported.items()}
    values = [None, True, 0, 2, -1, 0.5, "x", "auto", "warn", "bf16-mixed", "16", 64, [0, 1]]
    values += [{"hours": 1}, "00:01:00:00"]
    for name, parameter in read.items():
        for value in values:
            assert fits(value, parameter.annotation) == fits(value, hints[name]), (name, value)
