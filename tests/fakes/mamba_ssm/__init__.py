"""Stand-in for the ``mamba_ssm`` package (only the submodules genodiff imports)."""
