"""genodiff: masked diffusion language models for DNA on Caduceus / Mamba backbones."""

__version__ = "0.1.0"
