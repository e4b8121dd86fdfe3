"""Training objectives. Each is a small module behind one interface (see ``base.Objective``)."""

from genodiff.objectives.ar import AR
from genodiff.objectives.base import Objective
from genodiff.objectives.d3pm import D3PM
from genodiff.objectives.mdlm import MDLM
from genodiff.objectives.plaid import Plaid
from genodiff.objectives.sedd import SEDD
from genodiff.objectives.udlm import UDLM

__all__ = ["AR", "D3PM", "MDLM", "Objective", "Plaid", "SEDD", "UDLM"]
