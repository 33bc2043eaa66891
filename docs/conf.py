"""Sphinx configuration of the rnr_lens docs.

Built in CI by tests/test_docs.py (and locally by ``bash scripts/build-docs``) with warnings
as errors: a broken cross-reference, a public name without a docstring or missing from the API
page, or a notebook cell that raises fails the build.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

import rnr_lens

ROOT = Path(__file__).resolve().parents[1]

project = "rnr_lens"
author = "the rnr_lens developers"
copyright = "2026, the rnr_lens developers"  # Sphinx reads this name
release = version = rnr_lens.__version__
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode", "sphinxarg.ext"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "jupyter_execute"]
html_theme = "furo"
html_title = f"rnr_lens {release}"
html_static_path = ["_static"]
html_css_files = ["rnr.css"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type"]  # widget views have no static rendering

# The API reference: Google-style docstrings, signatures with their types.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields of the class, not a second description of each dataclass field
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}

# Every reference to rnr_lens must resolve; names from other libraries (torch, pandas, plotly,
# transformers, jaxtyping: no network here for intersphinx) are left as plain text.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!rnr_lens\b).*")]
# internals that public signatures mention: the route KV cache (an HF cache subclass) and the
# structural type generation asks of a model (ModelLike; LensModel is documented)
nitpick_ignore = [
    ("py:class", "rnr_lens.model.adapters.RouteCache"),
    ("py:class", "rnr_lens.model.generation.ModelLike"),
    ("py:class", "rnr_lens.model.route_trace.TracedModel"),  # what a trace asks of a model (LensModel is documented)
    ("py:class", "rnr_lens.measure.probes.P"),  # register_probe's type variable: a Probe subclass, given back as itself
]

# Notebooks are executed at small sizes during the build (those of notebooks/small_sizes.json),
# each from its copy in docs/tutorials (docs/tutorial_copies.py); a cell that raises fails the
# build. RNR_DOCS_EXECUTED names a folder of copies already executed (the test suite's, issue
# 77): each whose cells are unchanged is rendered as it ran, not executed again.
# RNR_DOCS_EXECUTE=off skips executing them while writing.
nb_execution_mode = os.environ.get("RNR_DOCS_EXECUTE", "force")
nb_execution_raise_on_error = True
nb_execution_timeout = 1800

sys.path.insert(0, str(Path(__file__).parent))
from tutorial_copies import write_copies  # noqa: E402

executed = os.environ.get("RNR_DOCS_EXECUTED")
write_copies(ROOT / "docs" / "tutorials", Path(executed) if executed else None)


def _check_public_api(app, config) -> None:  # noqa: ANN001
    """Every name in ``rnr_lens.__all__`` has a docstring and appears on the API page."""
    from sphinx.util import logging

    log = logging.getLogger("rnr_lens.docs")
    page = (ROOT / "docs" / "api.md").read_text()
    for name in rnr_lens.__all__:
        obj = getattr(rnr_lens, name)
        if not isinstance(obj, (str, dict)) and not inspect.getdoc(obj):
            log.warning("rnr_lens.%s has no docstring", name)
        if f"`{name}`" not in page:
            log.warning("rnr_lens.%s is public but missing from docs/api.md", name)


def setup(app) -> None:  # noqa: ANN001
    app.connect("config-inited", _check_public_api)
