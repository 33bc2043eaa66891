"""What every floor reads: files written whole and faults, bounded reading of files from
outside, provenance and timing, plain-text views of results, the statistics, the typed
records, shards, and the ablation methods' registry.

It imports nothing of rnr_lens but :mod:`rnr_lens.errors`, and loads no torch.

Modules: ``faults``, ``files``, ``untrusted``, ``phases``, ``provenance``, ``display``,
``stats``, ``records``, ``shards``, ``ablation_methods``. Each loads on first use, as an
attribute of this package too.
"""

MODULES = ("faults", "files", "untrusted", "phases", "provenance", "display", "stats", "records", "shards", "ablation_methods")
"""This folder's modules."""
