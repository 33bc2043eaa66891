"""What numbers may say about each claim: verdicts (stored as decisions, worded when shown),
the sweep's records and the bottleneck rule, the claims' records, and claim 3 at large k
(the ceiling and its bounded pass@k models).

Reads only :mod:`rnr_lens.core`; decides from records, never from a model, and loads no
torch.

Modules: ``verdict_words``, ``verdicts``, ``sweeps``, ``claims``, ``ceiling``,
``passk_models``.
"""

MODULES = ("verdict_words", "verdicts", "sweeps", "claims", "ceiling", "passk_models")
"""This folder's modules."""
