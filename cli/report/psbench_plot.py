#!/usr/bin/env python3
"""Draws the plots of `psbench report --html` from the plot data psbench writes.

usage: psbench_plot.py PLOTS.json OUTDIR

PLOTS.json ({"format": "psbench-plot/1", "series": [...], "plots": [...]}) holds exactly what
to draw: psbench (cli/report/report_data.cc) chose the series, the points, the axes and
the labels, and tests them. This script only draws: one SVG per plot into OUTDIR, each
series (and each variant of one, e.g. its PS count) in a colour and marker of its own, the
same in every plot, p99 dashed with hollow markers. Exit status: 0, 3 when matplotlib is
missing, 1 on anything else, with one line on stderr saying why.
"""
import json
import sys


def fail(message, code=1):
    print(f"psbench_plot.py: {message}", file=sys.stderr)
    sys.exit(code)


try:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogFormatter, MaxNLocator
except ImportError as e:
    fail(f"matplotlib is not available to {sys.executable} ({e}); install python3-matplotlib "
         "(deploy/install-deps.sh)", 3)


def bytes_label(value, _pos=None):
    """1, 2, ..., 512, 1K, ..., 1M: binary units, as the sizes were given (--sizes=1:4M)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            v = value / scale
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.3g}{unit}"
    return f"{value:.0f}" if value == int(value) else f"{value:.3g}"


def rate_label(value, _pos=None):
    """1000, 2k, ..., 1.5M: decimal units, as rates are given (--load-sweep=poisson:1000..64000*2)."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.0f}"


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def key_of(line):
    """A line's colour and marker: its series and variant (p50 and p99 share theirs)."""
    return (line["series"], line.get("variant", ""))


def draw(plot, styles, outdir):
    panels = plot["panels"]
    # Full page width whatever the panel count: a figure is read at a glance, not squinted at.
    fig, axes = plt.subplots(1, len(panels), figsize=(12.0, 4.8), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for line in panel["lines"]:
            color, marker = styles[key_of(line)]
            dashed = line["style"] == "dashed"
            # A series of one point is a marker alone: large enough to see.
            ax.plot(line["x"], line["y"], label=line["label"], color=color,
                    linestyle="--" if dashed else "-", marker=marker,
                    markersize=7 if len(line["x"]) == 1 else 5,
                    markerfacecolor="none" if dashed else color, linewidth=1.8)
        if "reference" in panel:
            ax.axhline(panel["reference"], color="0.35", linewidth=0.9, linestyle=":")
        for mark in panel.get("marks", []):
            ax.axvline(mark["x"], color="0.35", linewidth=0.9, linestyle=":")
            ax.annotate(mark["label"], (mark["x"], 1), xycoords=("data", "axes fraction"),
                        xytext=(3, -12), textcoords="offset points", fontsize="small", color="0.35")
        if plot["xaxis"] in ("bytes", "rate"):
            # Sizes in powers of two, rates in powers of ten (as they are given).
            ax.set_xscale("log", base=2 if plot["xaxis"] == "bytes" else 10)
            ax.xaxis.set_major_formatter(FuncFormatter(bytes_label if plot["xaxis"] == "bytes" else rate_label))
            ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if panel["ylog"]:
            ax.set_yscale("log")
            # Plain numbers (40, 60, 100), with the minor ticks labelled on short ranges.
            ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
            ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel(plot["xlabel"])
        ax.set_ylabel(panel["ylabel"])
        ax.grid(True, which="major", linewidth=0.5, alpha=0.6)
        ax.grid(True, which="minor", linewidth=0.3, alpha=0.3)
        if panel["lines"]:
            ax.legend(fontsize="small", framealpha=0.9)
    fig.suptitle(plot["title"], fontsize="medium")
    fig.tight_layout()
    fig.savefig(f"{outdir}/{plot['file']}", format="svg")
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        fail("usage: psbench_plot.py PLOTS.json OUTDIR", 1)
    try:
        with open(argv[1]) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{argv[1]}: {e}")
    if data.get("format") != "psbench-plot/1":
        fail(f"{argv[1]}: not psbench plot data (format {data.get('format')!r})")
    # One colour and marker per (series, variant), the same in every plot: series first, in
    # their order, then the variants as they come.
    palette = plt.get_cmap("tab10").colors
    keys = [(s, "") for s in data["series"]]
    for plot in data["plots"]:
        for panel in plot["panels"]:
            for line in panel["lines"]:
                if key_of(line) not in keys:
                    keys.append(key_of(line))
    styles = {k: (palette[i % len(palette)], MARKERS[i % len(MARKERS)]) for i, k in enumerate(keys)}
    plt.rcParams.update({"svg.fonttype": "path", "font.size": 10})  # no font needed to view
    for plot in data["plots"]:
        try:
            draw(plot, styles, argv[2])
        except (OSError, KeyError, ValueError) as e:
            fail(f"{plot.get('file', '?')}: {e}")


if __name__ == "__main__":
    main(sys.argv)
