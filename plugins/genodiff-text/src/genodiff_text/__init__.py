"""genodiff-text: MDLM's text models (DiT, causal transformer), text tokenizers and LM1B data,
registered with genodiff through entry points (see pyproject.toml)."""

__version__ = "0.1.0"
