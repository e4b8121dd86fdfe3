"""Stand-in for ``mamba_ssm.ops``."""
