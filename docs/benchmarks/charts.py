"""The benchmark figures, drawn with matplotlib from series that render.py selects from the CSVs.

This module knows how to draw, not what to draw: every function takes plain series (a label and
its points) and returns the SVG as bytes. render.py decides which rows go in.

The SVG is written so that the same data gives the same bytes, which is what lets
`render.py --check` compare a committed figure with a fresh one: a fixed figure size, a fixed
`svg.hashsalt` (the ids of clip paths), no date and no version in the metadata, and text kept as
text (`svg.fonttype: none`) so that no glyph outlines from the font files enter the file. The
layout still measures text with matplotlib's DejaVu Sans, so another matplotlib version may place
things differently: render.py records the version that drew the figures and says so when it
differs.

Colours: one hue per step (its number picks it), lighter for a step's earlier variants (the
rungs of its ladder), greys for PyTorch; the same implementation has the same colour and marker
in every figure.
"""
import io
import math
import re

import matplotlib

matplotlib.use("svg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

RC = {
    "svg.hashsalt": "flashsteps",
    "svg.fonttype": "none",
    # Laid out with DejaVu Sans (matplotlib's own); a viewer without it falls back to a font of
    # similar widths, then to any sans-serif.
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Verdana", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.frameon": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4.5,
}
METADATA = {"Creator": "docs/benchmarks/render.py", "Date": None}

# Steps 01-05 in Okabe-Ito's colours (readable with the common colour-vision deficiencies), then
# Paul Tol's for later steps.
STEP_HUES = ["#D55E00", "#E69F00", "#CC79A7", "#0072B2", "#009E73", "#882255",
             "#44AA99", "#332288", "#999933", "#8C564B"]
# The peers, dashed: PyTorch's attention backends and the SMYRF authors' PyTorch module.
TORCH_STYLE = {"torch_math": ("#6e6e6e", "s"), "torch_efficient": ("#1a1a1a", "D"), "smyrf_authors": ("#AA4499", "X")}
VARIANT_MARKERS = ["o", "^", "v", "s", "P", "X", "h", "<", ">"]
CEILING_COLOUR = "#b2182b"
LEGEND_ENTRY_W = 2.9  # inches a legend entry may take: the widest labels ("05 recompute backward (deterministic)")
STEP_LABEL = re.compile(r"(\d+)_([^/ ]+)(?:/(\S+))?$")


def pretty(label):
    """'04_online_softmax/fa2' -> '04 online softmax (fa2)', 'torch_math' -> 'PyTorch math',
    '07_smyrf smyrf:8x32' -> '07 smyrf 8 × 32' (a clustering follows the implementation)."""
    label, _, mask = label.partition(" ")
    clustering = " " + mask[len("smyrf:"):].replace("x", " × ") if mask.startswith("smyrf:") else ""
    m = STEP_LABEL.match(label)
    if m:
        return f"{m[1]} {m[2].replace('_', ' ')}" + (f" ({m[3]})" if m[3] else "") + clustering
    if label.startswith("torch_"):
        return "PyTorch " + label[len("torch_"):] + clustering
    if label == "smyrf_authors":
        return "SMYRF authors' PyTorch" + clustering
    return label + clustering


def pretty_group(labels):
    """One legend entry for several implementations drawn as one line: ('03_tiled',
    '04_online_softmax/alg1', '04_online_softmax/fa2') -> '03 tiled ≈ 04 online softmax (alg1, fa2)'."""
    if isinstance(labels, str):
        return pretty(labels)
    steps = {}
    for lb in labels:
        m = STEP_LABEL.match(lb)
        steps.setdefault(f"{m[1]} {m[2].replace('_', ' ')}" if m else pretty(lb), []).append(m[3] if m else None)
    return " ≈ ".join(step + (f" ({', '.join(v for v in vs if v)})" if any(vs) else "") for step, vs in steps.items())


def _mix(colour, other, t):
    """colour moved a fraction t of the way towards other (both #rrggbb)."""
    a = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    b = [int(other[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


class Palette:
    """Colour, marker and line style of every implementation, from the list of all of them (in the
    order the CSVs first record them), so that a figure's styles do not depend on what else it
    shows."""

    def __init__(self, implementations):
        self.variants = {}
        for label in implementations:
            m = STEP_LABEL.match(label)
            if m:
                self.variants.setdefault(m[1] + "_" + m[2], [])
                if label not in self.variants[m[1] + "_" + m[2]]:
                    self.variants[m[1] + "_" + m[2]].append(label)

    def style(self, label):
        if isinstance(label, tuple):  # several implementations drawn as one line: the first step's style
            label = [lb for lb in label if lb.split("/")[0] == label[0].split("/")[0]][-1]
        label = label.partition(" ")[0]  # a clustering after the implementation does not change its style
        if label in TORCH_STYLE:
            colour, marker = TORCH_STYLE[label]
            return {"color": colour, "marker": marker, "linestyle": (0, (4, 2))}
        m = STEP_LABEL.match(label)
        if not m:
            return {"color": "#999999", "marker": "o", "linestyle": "-"}
        hue = STEP_HUES[(int(m[1]) - 1) % len(STEP_HUES)]
        rungs = self.variants.get(m[1] + "_" + m[2], [label])
        i = rungs.index(label) if label in rungs else 0
        # The last rung in the step's own colour, earlier ones lighter.
        lighten = 0.5 * (len(rungs) - 1 - i) / max(1, len(rungs) - 1)
        return {"color": _mix(hue, "#ffffff", lighten), "marker": VARIANT_MARKERS[i % len(VARIANT_MARKERS)],
                "linestyle": "-"}


def _svg(fig):
    out = io.BytesIO()
    fig.savefig(out, format="svg", metadata=METADATA)
    return out.getvalue()


def _n_label(n):
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def _log_ticks(ax, lo, hi, axis="y"):
    """Ticks 1-2-5 per decade over [lo, hi], written as plain numbers."""
    ticks = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            t = m * 10.0 ** e
            if lo <= t <= hi:
                ticks.append(t)
    _ticks(ax.yaxis if axis == "y" else ax.xaxis, ticks, [f"{t:g}" for t in ticks])


def _ticks(axis, ticks, labels):
    """Exactly these ticks (no minor ones), so a log axis reads in plain numbers."""
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_ticklabels(labels)


def _n_axis(ax, ns):
    ax.set_xscale("log", base=2)
    _ticks(ax.xaxis, ns, [_n_label(n) for n in ns])
    ax.set_xlim(min(ns) / 1.25, max(ns) * 1.25)
    ax.set_xlabel("sequence length N")


def _ceiling(ax, value, text):
    ax.axhline(value, color=CEILING_COLOUR, linestyle=(0, (1, 2)), linewidth=1.2, zorder=1)
    ax.text(0.01, value, text, transform=ax.get_yaxis_transform(), color=CEILING_COLOUR, fontsize=7.5,
            va="bottom", ha="left")


def _grid(title, grid, panel_w, panel_h, n_legend):
    """A figure with len(grid) rows × len(grid[0]) columns of panels and a row below them for a
    legend of n_legend entries (returned: figure, panels, legend axes, legend columns)."""
    rows, cols = len(grid), max(len(r) for r in grid)
    panel_w = max(panel_w, 6.0 / cols)  # room for the title over a single panel
    ncol = max(1, min(n_legend, int(panel_w * cols // LEGEND_ENTRY_W)))
    legend_h = 0.15 + 0.19 * math.ceil(n_legend / ncol)
    fig = Figure(figsize=(panel_w * cols, panel_h * rows + legend_h + 0.2 + 0.18 * title.count("\n")),
                 layout="constrained")
    gs = fig.add_gridspec(rows + 1, cols, height_ratios=[panel_h] * rows + [legend_h])
    axes = [[fig.add_subplot(gs[r, c]) for c in range(len(grid[r]))] for r in range(rows)]
    legend_ax = fig.add_subplot(gs[rows, :])
    legend_ax.axis("off")
    fig.suptitle(title, fontsize=10)
    return fig, axes, legend_ax, ncol


def _legend(legend_ax, handles, ncol):
    legend_ax.legend(handles=handles, loc="upper center", ncol=ncol, handlelength=2.6, columnspacing=1.6,
                     borderaxespad=0)


def _unique(items):
    return list(dict.fromkeys(items))


def lines_by_n(title, grid, ylabel, palette, order, ceilings=(), panel_w=4.4, panel_h=3.0):
    """Panels of value against N (log2 x, log y): grid[r][c] = (panel title, {label: [(N, value)]}),
    where a label may be a tuple of labels drawn as one line. ceilings: (value, text) drawn as
    horizontal lines; order: the legend's sort key of a label."""
    labels = sorted(_unique(lb for row in grid for _, series in row for lb in series), key=order)
    with matplotlib.rc_context(RC):
        fig, axes, legend_ax, ncol = _grid(title, grid, panel_w, panel_h, len(labels))
        values = [v for row in grid for _, s in row for pts in s.values() for _, v in pts]
        ns = sorted({n for row in grid for _, s in row for pts in s.values() for n, _ in pts})
        lo = min(values) / 1.6
        hi = max(values + [c[0] for c in ceilings]) * 1.5
        for r, row in enumerate(grid):
            for c, (panel_title, series) in enumerate(row):
                ax = axes[r][c]
                for label, pts in series.items():
                    pts = sorted(pts)
                    ax.plot([n for n, _ in pts], [v for _, v in pts], zorder=3, **palette.style(label))
                for value, text in ceilings:
                    _ceiling(ax, value, text)
                _n_axis(ax, ns)
                ax.set_yscale("log")
                ax.set_ylim(lo, hi)
                _log_ticks(ax, lo, hi)
                ax.set_title(panel_title)
                if c == 0:
                    ax.set_ylabel(ylabel)
        handles = [Line2D([], [], label=pretty_group(lb), **palette.style(lb)) for lb in labels]
        _legend(legend_ax, handles, ncol)
        return _svg(fig)


def density(title, panels, palette, target=1.3):
    """Block-sparse time against density (log2): above, as a fraction of the dense time, with the
    ideal (time ∝ density) and the target (target × density); below, the same points over the
    ideal, where the differences between patterns, variants and shapes can be seen.
    panels: [(panel title, [(label, pattern, shape, [(density, fraction)])])], one column each:
    colour by label (the implementation), marker by pattern, line style by shape."""
    patterns = sorted({p for _, ss in panels for _, p, _, _ in ss})
    shapes = _unique(s for _, ss in panels for _, _, s, _ in ss)
    labels = _unique(lb for _, ss in panels for lb, _, _, _ in ss)
    pattern_marker = {p: m for p, m in zip(patterns, ["o", "s", "^", "D", "v", "P"])}
    shape_style = {s: ls for s, ls in zip(shapes, ["-", (0, (5, 2)), (0, (1, 1.5)), (0, (5, 2, 1, 2))] * 3)}
    xs = [x for _, ss in panels for _, _, _, pts in ss for x, _ in pts]
    over = [y / x for _, ss in panels for _, _, _, pts in ss for x, y in pts]
    lo, hi = min(xs) / 1.5, 1.5
    ideal = {"color": "#1a1a1a", "linewidth": 1.0, "zorder": 2}
    goal = {"color": "#1a1a1a", "linewidth": 0.9, "linestyle": (0, (4, 3)), "zorder": 2}
    with matplotlib.rc_context(RC):
        legend_n = len(labels) + len(patterns) + len(shapes) + 2
        fig, axes, legend_ax, ncol = _grid(title, [panels, panels], 4.4, 2.7, legend_n)
        for c, (panel_title, ss) in enumerate(panels):
            top, bottom = axes[0][c], axes[1][c]
            top.plot([lo, hi], [lo, hi], **ideal)
            top.plot([lo, hi], [target * lo, target * hi], **goal)
            bottom.axhline(1, **ideal)
            bottom.axhline(target, **goal)
            for label, pattern, shape, pts in ss:
                pts = sorted(pts)
                style = {"color": palette.style(label)["color"], "marker": pattern_marker[pattern],
                         "linestyle": shape_style[shape], "zorder": 3, "markersize": 4,
                         "markerfacecolor": "white" if pattern != patterns[0] else None}
                top.plot([x for x, _ in pts], [y for _, y in pts], **style)
                bottom.plot([x for x, _ in pts], [y / x for x, y in pts], **style)
            ticks = sorted({x for _, _, _, pts in ss for x, _ in pts})
            for ax in (top, bottom):
                ax.set_xscale("log", base=2)
                ax.set_xlim(lo, hi)
                _ticks(ax.xaxis, ticks, [f"{t:.3g}" for t in ticks])
            top.set_yscale("log", base=2)
            top.set_ylim(lo, hi)
            _log_ticks(top, lo, hi, "y")
            bottom.set_ylim(min(0.95, min(over) - 0.02), max(target, max(over)) + 0.05)
            bottom.set_xlabel("density (fraction of blocks kept)")
            top.set_title(panel_title)
        axes[0][0].set_ylabel("time / dense time")
        axes[1][0].set_ylabel("time / (density × dense time)")
        handles = [Line2D([], [], label="ideal: time = density × dense time", **ideal),
                   Line2D([], [], label=f"target: {target:g} × that", **goal)]
        handles += [Line2D([], [], color=palette.style(lb)["color"], linewidth=2.5, label=pretty(lb)) for lb in labels]
        handles += [Line2D([], [], color="#555555", marker=pattern_marker[p], linestyle="none",
                           markerfacecolor="white" if p != patterns[0] else None, label=p) for p in patterns]
        handles += [Line2D([], [], color="#555555", linestyle=shape_style[s], label=s) for s in shapes]
        _legend(legend_ax, handles, ncol)
        return _svg(fig)


def ladder(title, grid, palette, ylabel="TFLOP/s", ceilings=(), panel_w=4.4, panel_h=3.0):
    """A step's variants (the rungs of its ladder) as bars, grouped by N.
    grid[r][c] = (panel title, rungs: [(label, {N: value})], references: [(label, {N: value})]):
    references (PyTorch, ...) are short lines across each group."""
    labels = _unique(lb for row in grid for _, rungs, _ in row for lb, _ in rungs)
    refs = _unique(lb for row in grid for _, _, references in row for lb, _ in references)
    with matplotlib.rc_context(RC):
        fig, axes, legend_ax, ncol = _grid(title, grid, panel_w, panel_h, len(labels) + len(refs))
        top = max([v for row in grid for _, rungs, rf in row for _, pts in rungs + rf for v in pts.values()]
                  + [c[0] for c in ceilings])
        for r, row in enumerate(grid):
            for c, (panel_title, rungs, references) in enumerate(row):
                ax = axes[r][c]
                ns = sorted({n for _, pts in rungs for n in pts})
                width = 0.8 / len(rungs)
                for i, (label, pts) in enumerate(rungs):
                    st = palette.style(label)
                    xs = [k - 0.4 + width * (i + 0.5) for k, n in enumerate(ns) if n in pts]
                    vs = [pts[n] for n in ns if n in pts]
                    ax.bar(xs, vs, width * 0.92, color=st["color"], zorder=3)
                    if len(ns) * len(rungs) <= 24:
                        for x, v in zip(xs, vs):
                            ax.text(x, v, f"{v:.1f}", ha="center", va="bottom", fontsize=6.5, color="#333333")
                for label, pts in references:
                    st = palette.style(label)
                    for k, n in enumerate(ns):
                        if n in pts:
                            ax.plot([k - 0.45, k + 0.45], [pts[n], pts[n]], color=st["color"],
                                    linestyle=st["linestyle"], linewidth=1.4, zorder=4)
                for value, text in ceilings:
                    _ceiling(ax, value, text)
                ax.set_xticks(range(len(ns)))
                ax.set_xticklabels([_n_label(n) for n in ns])
                ax.set_xlim(-0.6, len(ns) - 0.4)
                ax.set_ylim(0, top * 1.12)
                ax.grid(axis="x", visible=False)
                ax.set_xlabel("sequence length N")
                ax.set_title(panel_title)
                if c == 0:
                    ax.set_ylabel(ylabel)
        handles = [Patch(color=palette.style(lb)["color"], label=pretty(lb)) for lb in labels]
        handles += [Line2D([], [], color=palette.style(lb)["color"], linestyle=palette.style(lb)["linestyle"],
                           label=pretty(lb)) for lb in refs]
        _legend(legend_ax, handles, ncol)
        return _svg(fig)


def roofline(title, panels, palette, peak, bandwidth, peak_text, bandwidth_text):
    """Achieved TFLOP/s against arithmetic intensity (FLOPs per modelled HBM byte), under the roof
    min(peak, bandwidth × intensity). panels: [(panel title, {label: [(N, intensity, TFLOP/s)]})];
    peak in TFLOP/s, bandwidth in TB/s."""
    labels = _unique(lb for _, series in panels for lb in series)
    xs = [x for _, s in panels for pts in s.values() for _, x, _ in pts]
    ys = [y for _, s in panels for pts in s.values() for _, _, y in pts]
    xlo, xhi = min(xs + [peak / bandwidth]) / 3, max(xs) * 3
    ylo, yhi = min(ys) / 2, peak * 2
    with matplotlib.rc_context(RC):
        fig, axes, legend_ax, ncol = _grid(title, [panels], 4.4, 3.3, len(labels))
        for ax, (panel_title, series) in zip(axes[0], panels):
            ridge = peak / bandwidth
            ax.plot([xlo, ridge, xhi], [bandwidth * xlo, peak, peak], color=CEILING_COLOUR, linewidth=1.2,
                    linestyle=(0, (1, 2)), zorder=1)
            ax.text(xhi / 1.1, peak, peak_text, color=CEILING_COLOUR, fontsize=7.5, ha="right", va="bottom")
            x_text = xlo * 1.15
            ax.text(x_text, bandwidth * x_text / 1.3, bandwidth_text, color=CEILING_COLOUR, fontsize=7.5, ha="left",
                    va="top")
            for label, pts in series.items():
                pts = sorted(pts)
                ax.plot([x for _, x, _ in pts], [y for _, _, y in pts], zorder=3, **palette.style(label))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(xlo, xhi)
            ax.set_ylim(ylo, yhi)
            _log_ticks(ax, xlo, xhi, "x")
            _log_ticks(ax, ylo, yhi, "y")
            ax.set_xlabel("FLOPs per byte of modelled HBM traffic")
            ax.set_title(panel_title)
        axes[0][0].set_ylabel("TFLOP/s")
        handles = [Line2D([], [], label=pretty(lb), **palette.style(lb)) for lb in labels]
        _legend(legend_ax, handles, ncol)
        return _svg(fig)
