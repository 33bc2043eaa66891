"""All three claims over a grid: the grid file, each setting's claims built from the store, the
report that runs and re-derives them, re-grading and the referee's spot-check.

A report re-derives from its evidence without a model.

Modules: ``grid``, ``setting_claims``, ``regrade``, ``reports``, ``spot_check``.
"""

MODULES = ("grid", "setting_claims", "regrade", "reports", "spot_check")
"""This folder's modules."""
