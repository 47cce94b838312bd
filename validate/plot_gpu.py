#!/usr/bin/env python3
"""Draws `tpsim compare`'s GPU microbenchmark data (validate/compare_gpu.h). Headless (Agg).

usage: plot_gpu.py DATA.json OUT.png
DATA.json: {"kind": "collective" | "gemm", "title": str,
            "tables": [{"name": str, "x": [...], "measured_us": [...], "predicted_us": [...],
                        "measured_rate": [...], "predicted_rate": [...]}]}
collective: one panel per table, bus bandwidth (GB/s) over size (log2), measured points and the
            predicted line. Optional per table: "measured_x" (the sizes measured_rate belongs to,
            when not every size was measured), "predicted_label", and "extra": [{"label", "x",
            "rate"}] more predicted lines (dashed), e.g. each algorithm forced.
gemm:       a predicted-vs-measured time scatter of every row (left, log-log, identity line) and
            time over M for up to 12 shapes (evenly picked from the file's order).
The PNG is at most 1200 x 800 pixels (12 x 8 inches at 100 dpi). OUT's extension, errors
and exit statuses as in plot_compare.py, whose save() this uses."""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_compare import run, save  # noqa: E402

DPI = 100


def fmt_size(b):
    for unit, s in (("G", 30), ("M", 20), ("K", 10)):
        if b >= (1 << s):
            return "%g%s" % (b / (1 << s), unit)
    return "%d" % b


def collective(data, out):
    tables = data["tables"]
    n = max(1, len(tables))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows + 0.6), dpi=DPI, squeeze=False)
    for i, t in enumerate(tables):
        ax = axes[i // cols][i % cols]
        ax.plot(t["x"], t["predicted_rate"], "-", color="tab:blue",
                label=t.get("predicted_label", "predicted"))
        for j, e in enumerate(t.get("extra", [])):
            ax.plot(e["x"], e["rate"], "--", lw=1, color=("tab:green", "tab:purple", "tab:gray")[j % 3],
                    label=e["label"])
        mx = t.get("measured_x", t["x"])
        if t["measured_rate"]:
            ax.plot(mx, t["measured_rate"], "o", color="tab:orange", markersize=4, label="measured")
        else:
            ax.text(0.5, 0.04, "not measured: predictions only", transform=ax.transAxes, ha="center",
                    fontsize=7, color="gray")
        ax.set_xscale("log", base=2)
        ticks = [x for x in t["x"] if int(math.log2(x)) % 4 == 0] if t["x"] else []
        if ticks:
            ax.set_xticks(ticks)
            ax.set_xticklabels([fmt_size(x) for x in ticks])
        ax.set_xlabel("size (B)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(t["name"], fontsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for j in range(len(tables), rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle(data["title"], fontsize=9)
    fig.tight_layout()
    save(fig, out)


def gemm(data, out):
    tables = data["tables"]
    fig = plt.figure(figsize=(12, 8), dpi=DPI)
    ax = fig.add_axes([0.05, 0.1, 0.36, 0.8])
    meas = [v for t in tables for v in t["measured_us"]]
    pred = [v for t in tables for v in t["predicted_us"]]
    ms = [v for t in tables for v in t["x"]]
    if meas:
        sc = ax.scatter(meas, pred, c=[math.log2(m) for m in ms], s=6, cmap="viridis")
        lo, hi = min(meas + pred) * 0.8, max(meas + pred) * 1.25
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=1)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        fig.colorbar(sc, ax=ax, label="log2 m")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("predicted (us)")
    ax.set_title("every row", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    pick = tables
    if len(tables) > 12:
        step = len(tables) / 12.0
        pick = [tables[int(i * step)] for i in range(12)]
    for i, t in enumerate(pick):
        sub = fig.add_axes([0.5 + (i % 3) * 0.165, 0.72 - (i // 3) * 0.21, 0.13, 0.15])
        sub.plot(t["x"], t["predicted_us"], "-", color="tab:blue", linewidth=1)
        sub.plot(t["x"], t["measured_us"], "o", color="tab:orange", markersize=2)
        sub.set_xscale("log", base=2)
        sub.set_yscale("log")
        sub.set_title(t["name"], fontsize=6)
        sub.tick_params(labelsize=5)
        sub.grid(True, which="both", alpha=0.2)
    fig.suptitle(data["title"] + "  -  right: time (us) over m, line predicted, dots measured", fontsize=9)
    save(fig, out)


def draw(data, out):
    if data.get("kind") == "gemm":
        gemm(data, out)
    else:
        collective(data, out)


if __name__ == "__main__":
    sys.exit(run(draw, sys.argv))
