#!/usr/bin/env python3
"""Draws tpsim compare's data: predicted-vs-measured scatter with the identity line (left)
and per-op bars, predicted next to measured (right). Headless (Agg).

usage: plot_compare.py DATA.json OUT.png
DATA.json: {"mape_pct": float, "ops": [{"label": str, "predicted_us": float, "measured_us": float}]}
The PNG is 1400 x 600 pixels (14 x 6 inches at 100 dpi)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WIDTH_IN, HEIGHT_IN, DPI = 14, 6, 100


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
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
    fig.savefig(argv[2], dpi=DPI)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
