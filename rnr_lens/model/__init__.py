"""A model and what runs through it: the architecture's block layout, the engine that runs a
route, generation and scoring, interventions and ablations, reuse of computed state under
its check, loading (the cache, folders, GGUF), the tiny models, routes and prompts.

Reads only :mod:`rnr_lens.core` beneath it; a route is one value
(:class:`~rnr_lens.model.routes.Route`).

Modules: ``adapters``, ``engine``, ``prefix_states``, ``reuse``, ``reuse_check``,
``generation``, ``interventions``, ``route_trace``, ``lens``, ``model_cache``, ``models``,
``tiny``, ``routes``, ``prompts``, ``gguf_header``, ``model_folder``.
"""

MODULES = (
    "adapters",
    "engine",
    "prefix_states",
    "reuse",
    "reuse_check",
    "generation",
    "interventions",
    "route_trace",
    "lens",
    "model_cache",
    "models",
    "tiny",
    "routes",
    "prompts",
    "gguf_header",
    "model_folder",
)
"""This folder's modules."""
