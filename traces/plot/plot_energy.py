"""`tpsim plot energy`: the energy breakdown of one or more results (sim/energy.h)."""

from plot_common import DPI, FIGSIZE, OUT_HELP, UsageError, dump_json, finite, load_result, nonneg, plt_module, save

HELP = """The energy of one or more results (tpsim run --out RESULT.json), side by side.

Top: a stacked bar per result of its energy by event (summary.compute_energy_j,
sram_energy_j, network_energy_j, memory_energy_j, static_energy_j), in joules, with the
energy per token and the average power above it. Bottom: the dynamic energy of each op
name (ops[].energy_j summed over layers and decode steps), the --top N largest of the
first result, one bar per result. A result whose chip has no energy block
(summary.energy_modelled false) is refused.
"""

PARTS = (("compute", "compute_energy_j", "tab:blue"), ("SRAM", "sram_energy_j", "tab:orange"),
         ("network", "network_energy_j", "tab:green"), ("memory", "memory_energy_j", "tab:red"),
         ("static", "static_energy_j", "tab:gray"))


def add_arguments(p):
    p.add_argument("results", nargs="+", metavar="RESULT.json")
    p.add_argument("--out", required=True, metavar="PNG", help=OUT_HELP)
    p.add_argument("--top", type=int, default=12, help="op names drawn in the bottom panel (default 12)")
    p.add_argument("--dump-series", metavar="FILE", help="also write what was drawn as JSON")


def label_of(path, r):
    return f"{r.get('experiment') or path} ({r.get('engine', '?')})"


def cmd_energy(args):
    if args.top < 1:
        raise UsageError(f"--top {args.top}: must be at least 1")
    rows = []
    for path in args.results:
        r = load_result(path)
        s = r.get("summary", {})  # proto3 JSON may omit an all-default summary
        if not isinstance(s, dict):
            raise UsageError(f"{path}: not a tpsim result (no summary)")
        if not s.get("energy_modelled"):
            raise UsageError(f"{path}: no energy in this result (its chip has no energy block, or an fp32 workload meets no mac_fp32_pj; README, Energy)")
        parts = {name: nonneg(s.get(key, 0), f"{path}: summary.{key}") for name, key, _ in PARTS}
        ops = {}
        if not isinstance(r.get("ops", []), list):
            raise UsageError(f"{path}: ops must be a list")
        for i, op in enumerate(r.get("ops", [])):
            if not isinstance(op, dict):
                raise UsageError(f"{path}: ops[{i}] is not an object")
            name = str(op.get("op", "?"))
            ops[name] = ops.get(name, 0.0) + nonneg(op.get("energy_j", 0), f"{path}: ops[{i}].energy_j")
        finite(sum(parts.values()), f"{path}: summary: the sum of the parts (compute_energy_j ... static_energy_j)")
        rows.append({"label": label_of(path, r), "parts": parts, "ops": ops,
                     "energy_j": nonneg(s.get("energy_j", 0), f"{path}: summary.energy_j"),
                     "per_token_j": nonneg(s.get("energy_per_token_j", 0), f"{path}: summary.energy_per_token_j"),
                     "power_w": nonneg(s.get("average_power_w", 0), f"{path}: summary.average_power_w")})
    matplotlib, plt = plt_module()
    fig = plt.figure(figsize=FIGSIZE, dpi=DPI)
    ax = fig.add_subplot(2, 1, 1)
    xs = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for name, _, colour in PARTS:
        vals = [row["parts"][name] for row in rows]
        ax.bar(xs, vals, bottom=bottom, color=colour, label=name, width=0.6)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for x, row in zip(xs, rows):
        ax.text(x, row["energy_j"], f"{row['per_token_j'] * 1e3:.3g} mJ/token, {row['power_w']:.3g} W",
                ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottom) * 1.12 if max(bottom) > 0 else 1)  # room for the labels above the bars
    ax.set_xticks(xs)
    ax.set_xticklabels([row["label"] for row in rows], fontsize=8)
    ax.set_ylabel("energy (J)")
    ax.set_title("energy by event (dynamic: compute, SRAM, network, memory; static power x time)")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(True, axis="y", alpha=0.3)
    first = rows[0]["ops"]
    names = sorted(first, key=lambda n: (-first[n], n))[: args.top]
    bx = fig.add_subplot(2, 1, 2)
    width = 0.8 / len(rows)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    for k, row in enumerate(rows):
        bx.bar([i + (k - (len(rows) - 1) / 2) * width for i in range(len(names))],
               [row["ops"].get(n, 0.0) for n in names], width=width, color=colours[k % len(colours)],
               label=row["label"])
    bx.set_xticks(list(range(len(names))))
    bx.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    bx.set_ylabel("dynamic energy (J)")
    bx.set_title(f"dynamic energy per op (summed over layers and steps; the {len(names)} largest)")
    if len(rows) > 1:
        bx.legend(fontsize=8, loc="upper right")
    bx.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    save(fig, args.out)
    dump_json(args.dump_series, {"results": [{"label": row["label"], "parts_j": row["parts"],
                                              "ops_j": {n: row["ops"].get(n, 0.0) for n in names}}
                                             for row in rows]})
