"""Figures as files: print layouts at a paper's sizes, and PDF, SVG, PNG or HTML written whole.

:func:`print_layout` lays a figure out at a print size (a paper's column or full width) with
every font at least :data:`MIN_FONT_PT` points there; :func:`save` writes it atomically, images
through kaleido and the system Chromium (started once per process). :mod:`rnr_lens.present.viz` makes
the figures and re-exports :func:`save` and :func:`print_layout`, so ``viz.save`` is the call
users know.
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings
from pathlib import Path

import plotly.graph_objects as go

from rnr_lens.errors import RnrLensError

SIZES: dict[str, tuple[float, float]] = {"column": (3.5, 2.8), "full": (7.0, 3.6)}
"""Print sizes in inches: a paper's single column and its full text width."""
MIN_FONT_PT = 8.0
_PX_PER_PT = 4 / 3  # Chromium lays pages out at 96 px per inch, 72 pt per inch


def print_layout(
    fig: go.Figure, size: str | tuple[float, float], *, min_font_pt: float = MIN_FONT_PT, title: bool = False
) -> tuple[go.Figure, int, int]:
    """A copy of ``fig`` laid out for print at ``size`` (a name in :data:`SIZES` or
    ``(width, height)`` in inches), every font at least ``min_font_pt`` points at that size.
    The in-figure title is dropped unless ``title``: a paper gives the figure a caption
    (:func:`rnr_lens.present.viz.caption`) instead.

    Returns the figure and its width and height in CSS pixels (at scale 1, one pixel is 0.75 pt).
    """
    if isinstance(size, str):
        if size not in SIZES:
            raise RnrLensError(f"unknown figure size {size!r}; use one of {', '.join(SIZES)} or (width, height) in inches")
        size = SIZES[size]
    width_in, height_in = size
    # taller figures (several panels) keep their aspect ratio within the preset's width
    natural = (fig.layout.height or 450) / (fig.layout.width or 700)
    height_in = max(height_in, min(width_in * natural, 9.0))
    width, height = round(width_in * 72 * _PX_PER_PT), round(height_in * 72 * _PX_PER_PT)
    # 12 px = 9 pt nominal: a capital-to-descender glyph box of 8.5 pt, so text measures >= 8 pt
    base = max(12, math.ceil(min_font_pt * _PX_PER_PT / 0.94))
    out = go.Figure(fig)
    if not title:
        out.update_layout(title_text="")
    # plotly never wraps text: break long titles at spaces to the width they have
    chars = int(width / (0.56 * base))
    if out.layout.title and out.layout.title.text:
        out.layout.title.text = _wrap(out.layout.title.text, int(chars / 1.2))
    for axis in [a for a in out.layout if a.startswith(("xaxis", "yaxis"))]:
        ax = out.layout[axis]
        if ax.title and ax.title.text:
            ax.title.text = _wrap(ax.title.text, chars if axis.startswith("x") else int(height / (0.56 * base)))
    # room, top down: the title's lines; at the bottom, tick labels, the x-axis title, then the legend
    # in rows under everything (a column has no room beside the plot, and plotly's automargin does
    # not stack the legend below the axis title, so we do)
    title_lines = str(out.layout.title.text or "").count("<br>") + 1 if out.layout.title and out.layout.title.text else 0
    bottom_axis = out.layout[
        min((a for a in out.layout if a.startswith("xaxis")), key=lambda a: out.layout[a].domain[0] if out.layout[a].domain else 0, default="xaxis")
    ]
    x_title_lines = str(bottom_axis.title.text).count("<br>") + 1 if bottom_axis.title and bottom_axis.title.text else 0
    legend_h = _legend_rows(out, width, base) * round(1.7 * base)
    top = round(1.35 * (base + 2) * title_lines) + 16
    if any(a.yref == "paper" and a.y is not None and a.y >= 0.99 and a.yanchor == "bottom" for a in out.layout.annotations):
        top += round(1.5 * base)  # a subplot title sits above the top panel
    bottom = round(1.6 * base + 1.3 * base * x_title_lines + legend_h + 8)
    height += legend_h + round(1.3 * base * max(0, x_title_lines - 1))  # the plot keeps its share of the preset
    # plotly anchors a multi-line title by its last line: shift by the lines above it
    title_y = 1 - (6 + 1.3 * (base + 2) * max(0, title_lines - 1)) / height
    out.update_layout(
        font=dict(size=base),
        title=dict(font=dict(size=base + 2), x=0.01, xanchor="left", y=title_y, yref="container", yanchor="top"),
        legend=dict(font=dict(size=base), orientation="h", x=0, xanchor="left", y=0, yref="container", yanchor="bottom"),
        margin=dict(l=10, r=10, t=top, b=bottom),
        width=width,
        height=height,
    )
    out.update_xaxes(automargin=True, tickfont=dict(size=base), title=dict(font=dict(size=base)))
    out.update_yaxes(automargin=True, tickfont=dict(size=base), title=dict(font=dict(size=base)))
    for axis in [a for a in out.layout if a.startswith("xaxis")]:
        # named ticks (one per question, say) that cannot stand side by side at print size would
        # overprint one another: leave them to the interactive figure's hover
        ax = out.layout[axis]
        span = (ax.domain[1] - ax.domain[0]) if ax.domain else 1.0
        if ax.ticktext is not None and len(ax.ticktext) * 1.25 * base > span * (width - 80):
            ax.update(showticklabels=False)
    for note in out.layout.annotations:  # subplot titles and labels: the base size, no larger than the title
        note.update(font=dict(size=base))
    for trace in out.data:
        if getattr(trace, "textfont", None) is not None and trace.type in ("bar", "scatter", "heatmap"):
            trace.update(textfont=dict(size=base))
        if trace.type == "heatmap":
            trace.update(colorbar=dict(tickfont=dict(size=base), title=dict(font=dict(size=base))))
    return out, width, height


def _legend_rows(fig: go.Figure, width: int, base: int) -> int:
    """How many rows a horizontal legend of ``fig`` takes at ``width`` pixels (an estimate)."""
    names = [t.name for t in fig.data if t.name and t.showlegend is not False and fig.layout.showlegend is not False]
    if not names or (len(names) == 1 and fig.layout.showlegend is None):
        return 0
    rows, used = 1, 0.0
    for name in dict.fromkeys(names):
        item = 0.56 * base * len(name) + 45
        if used and used + item > width - 20:
            rows, used = rows + 1, 0.0
        used += item
    return rows


def _wrap(text: str, width: int) -> str:
    """Insert ``<br>`` at spaces so no line of ``text`` is much longer than ``width`` characters."""
    out = []
    for line in str(text).split("<br>"):
        words, current = line.split(" "), ""
        for word in words:
            if current and len(current) + 1 + len(word) > max(12, width):
                out.append(current)
                current = word
            else:
                current = f"{current} {word}" if current else word
        out.append(current)
    return "<br>".join(out)


class _KaleidoServer:
    """kaleido's Chromium, started once per process on the first image written (5-7 s a figure
    without it, 0.5 s with) and stopped at exit; this object is the one place that state lives."""

    def __init__(self) -> None:
        self.started = False

    def start(self) -> None:
        if self.started:
            return
        try:
            import atexit

            import kaleido

            kaleido.start_sync_server(silence_warnings=True)
            atexit.register(kaleido.stop_sync_server, silence_warnings=True)
        except Exception:  # an older kaleido: every write_image starts its own Chromium, as before
            pass
        self.started = True


_KALEIDO = _KaleidoServer()


def _pdf_metadata(path: str, title: str) -> None:
    """Replace kaleido's PDF metadata (title "Kaleido-fier") with the figure's own."""
    from importlib.metadata import version

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(path))
    writer.add_metadata({"/Title": title, "/Creator": f"rnr_lens {version('rnr-lens')} (plotly, kaleido)", "/Producer": "rnr_lens"})
    with open(path, "wb") as f:
        writer.write(f)


def _figure_title(fig: go.Figure, path: Path) -> str:
    text = fig.layout.title.text if fig.layout.title and fig.layout.title.text else path.stem.replace("_", " ")
    return text.split("<br>")[0].replace("<sup>", "").replace("</sup>", "")


def save(
    fig: go.Figure,
    path: str | Path,
    *,
    size: str | tuple[float, float] | None = None,
    width: int = 800,
    height: int | None = None,
    scale: float | None = None,
    title: bool | None = None,
) -> Path:
    """Write ``fig`` as PDF, SVG, PNG (kaleido + system Chromium) or standalone HTML, atomically,
    with the usual file permissions (0644 under a 022 umask) and, for PDF, the figure's title
    as the document title.

    Args:
        fig: The figure.
        path: Where to write; the suffix picks the format.
        size: A print preset, ``"column"`` (3.5 in wide) or ``"full"`` (7 in), or
            ``(width, height)`` in inches: the figure is laid out at that size with every font at
            least 8 pt when printed there (PDF and SVG at scale 1, PNG at 300 dpi).
        width, height, scale: Screen sizes in pixels, used without ``size``.
        title: Keep the in-figure title (default: on screen, yes; at a print ``size``, no, since
            a paper captions its figures: :func:`rnr_lens.present.viz.caption` gives the text).

    Example:
        >>> save(viz.repair_break(sweep), "bottleneck.pdf", size="column")  # doctest: +SKIP
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".pdf", ".svg", ".png", ".html"):
        raise RnrLensError(f"cannot save a figure as {suffix or 'a file without extension'}; use .pdf, .svg, .png or .html")
    if not path.parent.exists():
        raise RnrLensError(f"folder {path.parent} does not exist")
    document_title = _figure_title(fig, path)
    if size is not None:
        fig, width, height = print_layout(fig, size, title=bool(title))
        scale = scale or (300 / 96 if suffix == ".png" else 1.0)
    scale = scale or 2.0
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a figure is for sharing
    try:
        if suffix == ".html":
            fig.write_html(tmp, include_plotlyjs=True, full_html=True)
        else:
            _KALEIDO.start()
            try:
                with warnings.catch_warnings():  # plotly warns that the server ignores per-call Chromium options
                    warnings.filterwarnings("ignore", message="The kopts argument is ignored")
                    fig.write_image(tmp, width=width, height=height or fig.layout.height or 500, scale=scale)
            except Exception as exc:
                raise RnrLensError(
                    f"could not export {suffix} ({type(exc).__name__}: {str(exc).splitlines()[0][:150]}); "
                    "install kaleido>=1 and Chromium (Debian: apt-get install chromium; or bash scripts/dev-setup)"
                ) from exc
            if suffix == ".pdf":
                _pdf_metadata(tmp, document_title)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
