"""Training objectives. Each is a small module behind one interface (see ``base.Objective``)."""

from genodiff.objectives.base import Objective
from genodiff.objectives.mdlm import MDLM

__all__ = ["MDLM", "Objective"]
