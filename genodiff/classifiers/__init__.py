"""Classifiers for classifier-based guidance (Schiff et al. 2025; docs/architecture.md §3.6):

- ``model``: ``GuidanceClassifier``, a backbone with a pooling + linear head, of kind noisy
  (reads a diffusion generator's noisy states z_t, masked or uniform; D-CBG) or causal
  (log p(y | x_<=i) per position; FUDGE);
- ``one_hot``: backbone inputs from one-hot rows, for the gradient of the first-order form;
- ``guide``: ``ClassifierGuide``, the object samplers use (``tilt``, ``next_token_scores``);
- ``noise``: the noisy inputs, drawn by the generator's forward process (masked or uniform);
- ``config``, ``training``, ``run``: ``genodiff classifier CONFIG``, which trains one;
- ``checkpoint``: what a classifier checkpoint stores, and ``load_classifier``.
"""

from genodiff.classifiers.checkpoint import load_classifier
from genodiff.classifiers.guide import ClassifierGuide
from genodiff.classifiers.model import GuidanceClassifier

__all__ = ["ClassifierGuide", "GuidanceClassifier", "load_classifier"]
