"""Build configuration beyond pyproject.toml: the files the configs refer to, as package data.

The repository keeps one copy of the experiment configs, the demo genome, the demo Genomic
Benchmarks task and the models that load by name in its top-level folders (configs/, data/,
tests/data/, models/), where users edit them.
A wheel needs them inside the package, so at build time these folders are mapped into
``genodiff._bundle``, mirroring their repository paths: configs name files relative to the
project root (``data/chr22_20-21Mb.fa.gz``), and ``genodiff.resources`` points at the bundle in
an installed wheel and at the repository root in a checkout. Only the files matching the
patterns below are taken (not data/hg38, for instance); the text plugin ships its own configs
and corpus (plugins/genodiff-text).
"""

from pathlib import Path

from setuptools import find_packages, setup

# repository folder -> the file patterns shipped from it and its subfolders
BUNDLE = {
    "configs": ["*.yaml"],
    "data": ["README.md", "chr22_20-21Mb.fa.gz"],
    "data/species": ["*.fa.gz"],
    "data/templates": ["*.fa"],  # the infilling example of docs/generating.md
    "models": ["README.md", "*.json", "*.safetensors"],  # models by name (models/README.md)
    "tests/data/genomic_benchmarks": ["*.txt"],
}


def bundle_packages() -> tuple[dict[str, str], dict[str, list[str]]]:
    """package_dir and package_data for every folder of BUNDLE holding a matching file."""
    package_dir, package_data = {}, {}
    for folder, patterns in BUNDLE.items():
        for pattern in patterns:
            for path in sorted(Path(folder).rglob(pattern)):
                parent = path.parent.as_posix()
                name = "genodiff._bundle." + parent.replace("/", ".")
                package_dir[name] = parent
                package_data.setdefault(name, []).append(pattern)
    return package_dir, {name: sorted(set(files)) for name, files in package_data.items()}


package_dir, package_data = bundle_packages()
setup(
    packages=find_packages(include=["genodiff", "genodiff.*"]) + sorted(package_dir),
    package_dir=package_dir,
    package_data=package_data,
)
