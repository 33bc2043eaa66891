"""How results are shown: figures and their export, widgets, the report page, and the claims as
Markdown, with one chooser of a claim's columns.

Renders records and decides nothing.

Modules: ``viz``, ``viz_export``, ``widgets``, ``claim_columns``, ``report_page``,
``claims_markdown``, ``claims_compared``. Each loads on first use, as an attribute of this
package too.
"""

MODULES = ("viz", "viz_export", "widgets", "claim_columns", "report_page", "claims_markdown", "claims_compared")
"""This folder's modules."""
