"""The audit: probes and their names, the selectors, the resumable audit loop, its results, the
run store and the evidence built from it, the executors that shard an audit, and the format
check.

A probe's name fixes its tries; every try is stored before it is counted.

Modules: ``probe_specs``, ``probes``, ``selectors``, ``audits``, ``results``, ``store``,
``evidence``, ``executors``, ``formats``. Each loads on first use, as an attribute of this
package too.
"""

MODULES = ("probe_specs", "probes", "selectors", "audits", "results", "store", "evidence", "executors", "formats")
"""This folder's modules."""
