"""Packaging that survives a wheel: what the wheel holds, and a non-editable install into a fresh
virtual environment that trains the demo from another folder.

The wheel is built from the files a clean checkout of this tree would have (git's tracked and
untracked-but-not-ignored files), copied elsewhere so the build leaves nothing here. The install
test (marker ``wheel_install``; deselect with ``-m "not wheel_install"``) installs the wheel
with --no-deps into a new venv whose site-packages also sees this environment's (so torch and
the other dependencies are not installed again) and runs ``genodiff train configs/demo.yaml``
from an empty folder, where no configs/ or data/ exist. The text plugin is packaged the same
way: its wheel carries its configs and corpus, and installed beside the core's it composes
``text_demo`` from another folder.
"""

import email.parser
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import genodiff
from genodiff import cli, resources
from genodiff.config import load_config, resolve_config_path
from genodiff.config_values import ConfigError
from genodiff.data.benchmarks import load_task
from genodiff.data.training_files import locate_data
from genodiff.errors import InputFileNotFoundError
from genodiff.finetuning import load_finetune_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = "genodiff/_bundle/"
DEMO_NAME = "chr22_20-21Mb.fa.gz"
PLUGIN = "plugins/genodiff-text/"


def checkout_files() -> list[str]:
    """The files a build from a clean checkout sees, relative to ROOT."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know the source files")
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted(f for f in listing.split("\0") if f and (ROOT / f).is_file())


def run(command: list, cwd: Path | None = None) -> str:
    return completed(command, cwd).stdout


def completed(command: list, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done


def build_wheel(project: Path, dist: Path, pattern: str) -> Path:
    """The wheel of the project folder, built as pip builds it; setuptools' deprecation
    warnings fail the build here, since each is a packaging rule a later setuptools enforces
    (a data folder outside `packages` stops being shipped, for one)."""
    done = completed([sys.executable, "-m", "pip", "wheel", ".", "--no-deps",
                      "--no-build-isolation", "-q", "-w", str(dist)], cwd=project)  # fmt: skip
    warnings = [line.strip() for line in done.stderr.splitlines() if "Warning" in line]
    assert not warnings, f"building {project.name} warned:\n" + "\n".join(warnings)
    (built,) = dist.glob(pattern)
    return built


@pytest.fixture(scope="module")
def sources() -> list[str]:
    return checkout_files()


@pytest.fixture(scope="module")
def wheel(sources, tmp_path_factory) -> Path:
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in sources:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    return build_wheel(src, dist, "genodiff-*.whl")


@pytest.fixture(scope="module")
def plugin_wheel(sources, tmp_path_factory) -> Path:
    src, dist = tmp_path_factory.mktemp("plugin_src"), tmp_path_factory.mktemp("plugin_dist")
    for name in sources:
        if name.startswith(PLUGIN):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    return build_wheel(src / PLUGIN, dist, "genodiff_text-*.whl")


def fresh_venv(folder: Path) -> tuple[Path, Path]:
    """A virtual environment that also sees this one's packages (no dependency is installed
    again); returns its python and its site-packages."""
    run([sys.executable, "-m", "venv", "--without-pip", str(folder)])
    python = folder / "bin" / "python"
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    site = Path(site.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_genodiff_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python, site


def test_version_names_the_install(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    where = Path(genodiff.__file__).parent
    assert capsys.readouterr().out.startswith(f"genodiff {genodiff.__version__} from {where} ")


def test_wheel_holds_the_code_configs_and_demo_data(wheel, sources):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        read = archive.read
        code = {n for n in sources if n.startswith("genodiff/") and n.endswith(".py")}
        assert code <= names
        shipped = [
            n
            for n in sources
            if (n.startswith("configs/") and n.endswith(".yaml"))
            or n.startswith("tests/data/genomic_benchmarks/human_vs_phage/")
            or n in (f"data/{DEMO_NAME}", "data/README.md")
            or (n.startswith("data/species/") and n.endswith(".fa.gz"))  # conditional_species
            or (n.startswith("data/templates/") and n.endswith(".fa"))  # --infill's example
            or (n.startswith("models/") and n.endswith(("README.md", ".json", ".safetensors")))
        ]
        assert len([n for n in shipped if n.endswith(".txt")]) >= 100  # the demo task
        for name in shipped:  # the same bytes as the repository's one copy
            assert read(BUNDLE + name) == (ROOT / name).read_bytes(), name
        bundled = {n.removeprefix(BUNDLE) for n in names if n.startswith(BUNDLE)}
        assert bundled == set(shipped)  # nothing else: no hg38, no tests/*.py
        assert not [n for n in names if "text_demo" in n or "lm1b" in n or n.endswith(".txt.gz")]
        dist_info = f"genodiff-{genodiff.__version__}.dist-info/"
        outside = {n for n in names if not n.startswith(("genodiff/", dist_info))}
        assert outside == set()
        metadata = email.parser.Parser().parsestr(read(dist_info + "METADATA").decode())
        entry_points = read(dist_info + "entry_points.txt").decode()
    assert metadata["Version"] == genodiff.__version__
    assert any(r.startswith("huggingface_hub") for r in metadata.get_all("Requires-Dist"))
    assert "genodiff = genodiff.cli:main" in entry_points


@pytest.fixture
def bundle(wheel, tmp_path, monkeypatch) -> Path:
    """The wheel's genodiff/_bundle, extracted under tmp_path/wheel, as this process's resource
    root (what an installed wheel resolves)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "wheel", [n for n in archive.namelist() if BUNDLE in n])
    monkeypatch.setattr(resources, "BUNDLE", tmp_path / "wheel" / BUNDLE)
    return tmp_path / "wheel" / BUNDLE


def test_the_bundle_serves_configs_and_data_from_any_folder(bundle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ or data/ here
    assert resolve_config_path("demo") == bundle / "configs" / "demo.yaml"
    assert resolve_config_path("configs/hg38.yaml") == bundle / "configs" / "hg38.yaml"
    assert load_config("configs/demo.yaml").data.fasta == str(bundle / "data" / DEMO_NAME)
    finetune = load_finetune_config("configs/genomic_benchmarks_demo.yaml")
    task = load_task(finetune.benchmark.root, "human_vs_phage", download=False)
    assert Path(finetune.benchmark.root) == bundle / "tests" / "data" / "genomic_benchmarks"
    assert set(task.classes) == {"human", "phage"}


def test_the_docs_file_arguments_name_the_shipped_data_from_any_folder(
    bundle, tmp_path, monkeypatch
):
    # docs/evaluating.md and docs/generating.md write the shipped files as from a checkout's
    # root (data/...); from another folder, with a wheel, they name the wheel's copies.
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    parse = cli.build_parser().parse_args
    e_coli, demo = "data/species/e_coli_536.fa.gz", f"data/{DEMO_NAME}"
    template = "data/templates/infill_demo.fa"
    assert parse(["eval", "--checkpoint", "x", "--file", e_coli]).data_file == str(bundle / e_coli)
    sample = parse(["sample", "--checkpoint", "x", "--out", "o.fa", "--infill", template])
    assert sample.infill == str(bundle / template)
    assert parse(["gen-ppl", "s.fa", "--reference", demo]).reference == str(bundle / demo)
    quality = parse(["evaluate-samples", "s.fa", "--reference", demo, "--train", demo])
    assert quality.reference == [str(bundle / demo)] and quality.train == str(bundle / demo)
    # a file of that spelling here wins; a path genodiff does not ship is kept as given
    (here / "data" / "species").mkdir(parents=True)
    (here / e_coli).write_bytes(b"")
    assert parse(["eval", "--checkpoint", "x", "--file", e_coli]).data_file == e_coli
    (tmp_path / "wheel" / "outside.fa").write_bytes(b"")  # beside genodiff/, not in its data/
    for kept in ("data/nothing.fa", "data/README.md/x", "data/../../../outside.fa"):
        assert parse(["gen-ppl", "s.fa", "--reference", kept]).reference == kept


def test_a_shipped_experiment_takes_config_options_of_the_working_folder(
    bundle, tmp_path, monkeypatch
):
    # docs/plugins.md: `configs/model/bigru.yaml` beside the user, then `genodiff train
    # configs/demo.yaml model=bigru`; with a wheel, configs/demo.yaml is the shipped one.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs" / "model").mkdir(parents=True)
    (tmp_path / "configs" / "model" / "narrow.yaml").write_text(
        "defaults:\n  - caduceus_ph\n  - _self_\nd_model: 40\nn_layer: 3\n"
    )
    (tmp_path / "configs" / "pretrained").mkdir()  # a folder of no config group: not one
    cfg = load_config("configs/demo.yaml", ["model=narrow"])
    assert (cfg.model.name, cfg.model.d_model, cfg.model.n_layer) == ("caduceus", 40, 3)
    assert str(bundle) in cfg.data.fasta  # the rest is the shipped demo
    with pytest.raises(ConfigError, match="model=wide: no such option.*caduceus_tiny.*, narrow"):
        load_config("configs/demo.yaml", ["model=wide"])


def test_a_run_of_an_install_since_gone_finds_the_shipped_data_in_this_one(bundle, tmp_path):
    # A demo run trained with a wheel records the bundled genome's absolute path in that
    # virtual environment; made anew (another Python, another machine), this one's copy serves.
    gone = tmp_path / "old-venv" / "lib" / "python3.10" / "site-packages" / BUNDLE
    data = {**load_config("demo").data, "fasta": str(gone / "data" / DEMO_NAME)}
    assert locate_data(data)["fasta"] == str(bundle / "data" / DEMO_NAME)
    for missing in (gone / "data" / "hg38" / "hg38.ml.fa", tmp_path / "data" / DEMO_NAME):
        with pytest.raises(InputFileNotFoundError, match=f"which is not at {missing}"):
            locate_data({**data, "fasta": str(missing)})


def test_plugin_wheel_holds_its_configs_corpus_and_entry_points(plugin_wheel, sources):
    package = PLUGIN + "src/"
    with zipfile.ZipFile(plugin_wheel) as archive:
        names = set(archive.namelist())
        data = [n for n in sources if n.startswith(package) and not n.endswith(".py")]
        assert {package + "genodiff_text/corpus/austen.txt.gz"} < set(data)
        configs = ROOT / package / "genodiff_text" / "configs"
        on_disk = sorted(str(p.relative_to(ROOT)) for p in configs.rglob("*.yaml"))
        assert sorted(n for n in data if n.endswith(".yaml")) == on_disk  # all tracked, all shipped
        assert len(on_disk) >= 11  # the experiments and the model/, data/, objective/ groups
        for name in data:  # the same bytes as the repository's
            assert archive.read(name.removeprefix(package)) == (ROOT / name).read_bytes(), name
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(entry_points).decode()
    assert "[genodiff.configs]\ntext = genodiff_text.resources:CONFIGS" in entry_points
    assert "[genodiff.domains]\ntext = genodiff_text.domain:TextDomain" in entry_points


def written_into(site: Path, package: str) -> list[str]:
    """The files under ``site/package`` that its install did not write (not in the RECORD of
    its dist-info) and ``pip uninstall`` would therefore leave behind; bytecode aside, which pip
    removes with its source."""
    (record,) = site.glob(f"{package}-*.dist-info/RECORD")
    installed = {line.split(",")[0] for line in record.read_text().splitlines()}
    on_disk = (p.relative_to(site).as_posix() for p in (site / package).rglob("*") if p.is_file())
    return sorted(n for n in on_disk if n not in installed and not n.endswith(".pyc"))


@pytest.mark.wheel_install
def test_installed_wheel_trains_the_demo_from_another_folder(wheel, tmp_path, monkeypatch):
    for name in ("GENODIFF_CACHE_DIR", "NUMBA_CACHE_DIR"):  # genodiff's own choice of caches
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    venv = tmp_path / "venv"
    python, site = fresh_venv(venv)
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         str(wheel)])  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    tiny = [
        "trainer.max_steps=5",
        "data.max_length=128",
        "data.batch_size=4",
        "trainer.val_check_interval=5",
        "trainer.limit_val_batches=1",
        "trainer.limit_test_batches=1",
        "trainer.enable_progress_bar=false",
        "samples.num_samples=2",
        "samples.length=64",
        "samples.steps=4",
        "output_dir=out",
    ]
    run([venv / "bin" / "genodiff", "train", "configs/demo.yaml", *tiny], cwd=elsewhere)
    out = elsewhere / "out"
    assert (out / "checkpoints" / "last.ckpt").is_file()
    assert (out / "samples.fa").read_text().count(">") == 2
    # the installed package ran, and read its own copy of the demo genome
    assert f"fasta: {site / 'genodiff' / '_bundle' / 'data'}" in (out / "config.yaml").read_text()
    # the shipped models come with the wheel and load by name from anywhere
    listed = run([venv / "bin" / "genodiff", "models"], cwd=elsewhere)
    names = {line.split()[0] for line in listed.splitlines()}
    assert {"ar-chrx", "mdlm-chrx", "species-conditional"} <= names
    probe = "import genodiff; print(*genodiff.load('mdlm-chrx').generate(1, 32, steps=8, seed=0))"
    (sample,) = run([python, "-c", probe], cwd=elsewhere).split()
    assert len(sample) == 32 and set(sample) <= set("ACGT")
    # The demo genome's index and the compiled CPU kernels went to the user's cache, not into
    # the package (was: .fai/.gzi beside the genome, .nbi/.nbc in ops/__pycache__)
    assert written_into(site, "genodiff") == []
    cached = {p.suffix for p in (tmp_path / "cache" / "genodiff").rglob("*")}
    assert {".fai", ".gzi", ".nbi", ".nbc"} <= cached
    # so uninstalling leaves no genodiff/ folder to hide a later install as a namespace package
    run([sys.executable, "-m", "pip", "--python", str(python), "uninstall", "-y", "-q",
         "genodiff"])  # fmt: skip
    assert not (site / "genodiff").exists()


# conda-forge names of packages that PyPI names otherwise.
CONDA_TO_PYPI = {"pytorch-gpu": "torch", "matplotlib-base": "matplotlib"}


def test_conda_environment_installs_what_pyproject_declares():
    """environment.yml against pyproject.toml: conda installs only declared dependencies (under
    their PyPI names), among them CUDA torch and the prebuilt kernels of the ``cuda`` extra,
    which pip would build from source; pip installs the project, so every other dependency; the
    Python is one the project supports."""
    import yaml

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {Requirement(r).name for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    cuda = {Requirement(r).name for r in extras["cuda"]}

    # One channel: PyTorch's own conda channel stopped at 2.5 and mixing channels breaks
    # solves; pyfaidx is on bioconda only, so pip installs it.
    assert env["channels"] == ["conda-forge", "nodefaults"]
    conda = dict(d.partition("=")[::2] for d in env["dependencies"] if isinstance(d, str))
    python = conda.pop("python")
    assert Version(python) in SpecifierSet(project["requires-python"])
    conda.pop("pip")
    from_conda = {CONDA_TO_PYPI.get(name, name) for name in conda}
    assert from_conda <= runtime | cuda, from_conda - runtime - cuda
    assert {"torch", *cuda} <= from_conda
    assert "pyfaidx" not in conda

    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    (install,) = pip
    assert install.startswith("-e .[") and install.endswith("]")
    wanted = set(install[len("-e .[") : -1].split(","))
    assert wanted <= set(extras) and "cuda" not in wanted  # conda brings the kernels


def test_the_torch_ci_installs_is_one_pyproject_allows():
    """CI pins a torch inside pyproject.toml's range, whose lower bound is the one README states;
    README's install takes PyTorch's CPU build from PyTorch's own index."""
    readme = (ROOT / "README.md").read_text()
    (pin,) = re.findall(r"pip install --quiet torch==([\d.]+)", (ROOT / ".ci" / "run").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (torch,) = [Requirement(r) for r in project["dependencies"] if Requirement(r).name == "torch"]
    assert pin in torch.specifier
    (minimum,) = re.findall(r"Any torch >= ([\d.]+)", readme)
    assert str(torch.specifier) == f">={minimum}"
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme


@pytest.mark.wheel_install
def test_installed_plugin_wheel_composes_text_demo_from_another_folder(
    wheel, plugin_wheel, tmp_path
):
    python, site = fresh_venv(tmp_path / "venv")
    # The plugin's own dependencies (tokenizers) come from the registry when this environment
    # lacks them (the core-only test pass); everything else is already there.
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
         str(wheel), str(plugin_wheel)])  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "from genodiff.config import load_config, resolve_config_path\n"
        "from genodiff.data.build import build_datamodule\n"
        "cfg = load_config('text_demo')\n"
        "print(resolve_config_path('configs/text_demo.yaml'))\n"
        "print(build_datamodule(dict(cfg.data)).path)\n"
        "print(cfg.objective.name, cfg.objective.padding, cfg.model.name, "
        "cfg.trainer.accelerator)\n"
    )
    config, corpus, picked = run([python, "-c", probe], cwd=elsewhere).splitlines()
    installed = site / "genodiff_text"
    assert config == str(installed / "configs" / "text_demo.yaml")
    assert corpus == str(installed / "corpus" / "austen.txt.gz")
    # the core's objective/ and trainer/ groups composed in, with the plugin's objective/mdlm_text
    assert picked == "mdlm bound dit cpu"
