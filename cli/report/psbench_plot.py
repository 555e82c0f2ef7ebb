#!/usr/bin/env python3
"""Draws the plots of `psbench report --html` from the plot data psbench writes.

usage: psbench_plot.py PLOTS.json OUTDIR

PLOTS.json ({"format": "psbench-plot/1", "series": [...], "plots": [...]}) holds exactly what
to draw: psbench (cli/report/report_data.cc) chose the series, the points, the axes and
the labels, and tests them. This script only draws: one SVG per plot into OUTDIR, each
series in the same colour in every plot, p99 dashed. Exit status: 0, 3 when matplotlib is
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


def draw(plot, colors, outdir):
    panels = plot["panels"]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.0 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for line in panel["lines"]:
            ax.plot(line["x"], line["y"], label=line["label"], color=colors[line["series"]],
                    linestyle="--" if line["style"] == "dashed" else "-",
                    marker="s" if line["style"] == "dashed" else "o", markersize=4, linewidth=1.6)
        if "reference" in panel:
            ax.axhline(panel["reference"], color="0.35", linewidth=0.9, linestyle=":")
        if plot["xaxis"] == "bytes":
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
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
    palette = plt.get_cmap("tab10").colors
    colors = {s: palette[i % len(palette)] for i, s in enumerate(data["series"])}
    plt.rcParams.update({"svg.fonttype": "path", "font.size": 10})  # no font needed to view
    for plot in data["plots"]:
        try:
            draw(plot, colors, argv[2])
        except (OSError, KeyError, ValueError) as e:
            fail(f"{plot.get('file', '?')}: {e}")


if __name__ == "__main__":
    main(sys.argv)
