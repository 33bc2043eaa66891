"""Claim 2's machinery: frozen failure sets, the single-block sweep that mines a bottleneck,
the sweep kept in the store, and attribution.

A failure set is frozen before it is swept; the sweep reads no other set.

Modules: ``failures``, ``miner``, ``sweep_results``, ``attribution``. Each loads on first
use, as an attribute of this package too.
"""

MODULES = ("failures", "miner", "sweep_results", "attribution")
"""This folder's modules."""
