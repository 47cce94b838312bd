#!/usr/bin/env python3
"""Draws tpsim compare's data: predicted-vs-measured scatter with the identity line (left)
and per-op bars, predicted next to measured (right). Headless (Agg).

usage: plot_compare.py DATA.json OUT.png
DATA.json: {"mape_pct": float, "ops": [{"label": str, "predicted_us": float, "measured_us": float}]}
The PNG is 1400 x 600 pixels (14 x 6 inches at 100 dpi). OUT's extension picks the format:
.png, .svg or .pdf (another: exit 2); the same data gives the same bytes. OUT is written to a
temporary file beside it and renamed over it (a device such as /dev/null is written in place);
a failed write prints `cannot write OUT: REASON` and exits 1, never a traceback."""
import json
import os
import stat
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WIDTH_IN, HEIGHT_IN, DPI = 14, 6, 100

plt.rcParams["svg.hashsalt"] = "tpsim"

# The picture formats and the temporary-file writer of `tpsim plot` (traces/plot/plot_common.py):
# per format the metadata that keeps the bytes the same from run to run, and a write that
# leaves no partial file.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "traces", "plot"))
from plot_common import FORMATS, WriteError, write_output  # noqa: E402


class PlotError(Exception):
    """A one-line error and its exit status: 2 for a bad OUT name, 1 for a failed write."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def check_out(out):
    """OUT's format by its extension; another than .png, .svg or .pdf is PlotError 2 (no
    extension: only a device or a folder)."""
    ext = os.path.splitext(out)[1][1:]
    if not ext:  # a device (/dev/null) takes the PNG; a folder is the write's error
        try:
            if not stat.S_ISREG(os.stat(out).st_mode):
                return "png"
        except OSError:
            pass
    if ext.lower() not in FORMATS:
        raise PlotError(f"{out}: {'.' + ext if ext else 'no extension'}: not a picture format; "
                        "name a .png, .svg or .pdf file", 2)
    return ext.lower()


def save(fig, out):
    """Writes fig to out (see check_out) through plot_common.write_output: a temporary file in
    its folder renamed over it, so a failure leaves no partial file; a device or FIFO is
    written in place."""
    fmt = check_out(out)
    try:
        write_output(out, lambda f: fig.savefig(f, format=fmt, dpi=DPI, metadata=FORMATS[fmt]))
    except WriteError as e:
        raise PlotError(str(e), 1)


def run(draw, argv):
    """main() of a plot script: draw(data, out) with the usage, one-line errors and exit
    statuses of the docstring above."""
    if len(argv) != 3:
        sys.stderr.write(sys.modules["__main__"].__doc__ or "")
        return 2
    try:
        check_out(argv[2])
        with open(argv[1]) as f:
            data = json.load(f)
        draw(data, argv[2])
    except PlotError as e:
        print(e, file=sys.stderr)
        return e.code
    except Exception as e:  # the data file is tpsim's own: a bug, said in one line
        print(f"{argv[1]}: cannot draw: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


def draw(data, out):
    ops = data.get("ops", [])
    labels = [o["label"] for o in ops]
    pred = [o["predicted_us"] for o in ops]
    meas = [o["measured_us"] for o in ops]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    if ops:
        ax1.scatter(meas, pred, s=18, color="tab:blue", zorder=3)
        lo = min(min(pred), min(meas))
        hi = max(max(pred), max(meas))
        lo = lo * 0.8 if lo > 0 else 1e-3
        hi = hi * 1.25 if hi > 0 else 1.0
        ax1.plot([lo, hi], [lo, hi], color="black", linewidth=1, label="identity")
        ax1.set_xscale("log")
        ax1.set_yscale("log")
        ax1.set_xlim(lo, hi)
        ax1.set_ylim(lo, hi)
        ax1.legend(loc="upper left")
    else:
        ax1.text(0.5, 0.5, "no op was compared", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_xlabel("measured (us)")
    ax1.set_ylabel("predicted (us)")
    ax1.set_title("per op, MAPE %.1f %%" % data.get("mape_pct", 0.0))
    ax1.grid(True, which="both", alpha=0.3)

    x = range(len(ops))
    w = 0.4
    ax2.bar([i - w / 2 for i in x], pred, width=w, label="predicted", color="tab:blue")
    ax2.bar([i + w / 2 for i in x], meas, width=w, label="measured", color="tab:orange")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels(labels, rotation=90, fontsize=max(3, min(8, int(400 / max(1, len(ops))))))
    ax2.set_ylabel("time (us)")
    ax2.set_title("per op")
    ax2.legend()
    fig.tight_layout()
    save(fig, out)


if __name__ == "__main__":
    sys.exit(run(draw, sys.argv))
