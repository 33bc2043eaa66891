"""Claim 3's machinery: DAPO's formulas, the resumable training folder, the training loop, and
the matched comparison of two audits.

Two audits are compared only under one config hash, task and probes.

Modules: ``dapo``, ``checkpoints``, ``training``, ``comparison``. Each loads on first use,
as an attribute of this package too.
"""

MODULES = ("dapo", "checkpoints", "training", "comparison")
"""This folder's modules."""
