#!/usr/bin/env python3
"""tpsim plots (headless: matplotlib's Agg backend). `tpsim plot CMD --help` lists each
command's options.

  heatmap RESULT.json [RESULT.json ...] --out links.png     (plot_heatmap.py)
      The chip as a grid: links coloured by a metric (--metric utilization|bytes|queue|busy),
      several results side by side on one scale (--vmax), cores by busy fraction, memory
      controllers beside their node, TP groups outlined (with tasks[]).
  timeline RESULT.json --out gantt.png [--cores LIST] [--window T0:T1] [--group tp|stage]
      A Gantt chart from tasks[] (plot_timeline.py): a row per core or per group of cores,
      a lane each for compute, transfer and memory.
  sweep RESULTS.sqlite --x FIELD --y METRIC [--color F] [--facet F] [--where EXPR]
        [--logx] [--logy] [--ratio A/B] --out sweep.png      (plot_sweep.py)
      A metric of a sweep store against a swept field; every swept field is drawn or held.
  energy RESULT.json [RESULT.json ...] --out energy.png [--top N]      (plot_energy.py)
      The energy by event (compute, SRAM, network, memory, static) of each result as a
      stacked bar, and the dynamic energy of the largest ops.
  front S.sqlite[:LABEL] [S.sqlite[:LABEL] ...] --out front.png      (plot_front.py)
      The candidates of `tpsim search --db` stores, latency against energy per token, and
      each store's Pareto front of the two (e.g. one search per chip variant).
  serving REQUESTS.csv KV.csv --out serving.png
      From `tpsim serve --requests-csv REQUESTS.csv --kv-csv KV.csv`: the CDFs of TTFT and of
      mean TPOT over completed requests (status ok; TPOT of requests with more than one output
      token), and KV-cache blocks used over time per group against its capacity.

RESULT.json is a tpsim Result (configs/schema/result.proto) in JSON, snake_case names.
Node names "r{row}c{col}" place nodes on the grid; cores are numbered row-major on it.
Figures are 1000 x 800 pixels (10 x 8 in at 100 dpi; heat maps of N > 1 results are
(1 + 7.5 N) x 8 in); --out's extension picks the format: .png, .svg or .pdf (none: PATH.png);
the same input gives the same bytes. `--dump-series FILE` (all but serving) also writes what
was drawn as JSON. Outputs are written to a temporary file beside them and renamed over them
(a device such as /dev/null is written in place).
Bad input or usage (an output that names an input, two outputs naming one file, another
extension): a one-line error on stderr and exit status 2; a file that cannot be written: one
line naming it and the reason, exit status 1.
"""

import argparse
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import (DPI, FIGSIZE, OUT_HELP, UsageError, WriteError, check_input,  # noqa: E402
                         check_outputs, duration, out_format, out_path, plt_module, save, whole,
                         write_stdout)
import plot_energy  # noqa: E402
import plot_front  # noqa: E402
import plot_heatmap  # noqa: E402
import plot_sweep  # noqa: E402
import plot_timeline  # noqa: E402


class OnceStore(argparse.Action):
    """An option of one value: a second one is refused (argparse kept the last one, silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given", {})
        if option_string and self.dest in given:
            raise UsageError(f"{option_string} given twice ('{given[self.dest]}' and '{values}'): give it once")
        given[self.dest] = values
        setattr(namespace, self.dest, values)


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        # No abbreviations: --ou x.png was taken for --out, and a later option's prefix would
        # change what an old command line means.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, OnceStore)
        self.register("action", "store", OnceStore)

    def error(self, message):
        raise UsageError(message)


REQ_COLUMNS = ("id", "output_tokens", "ttft_ms", "mean_tpot_ms", "status")
KV_COLUMNS = ("group", "time_ms", "kv_blocks_used", "kv_blocks_capacity")


def read_csv(path, columns):
    """[(line, {column: cell})]: every row has the header's fields (a short row read its last
    cells as None), each column is named once (the last had won). Blank lines are skipped."""
    check_input(path)
    header, rows = None, []
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            for r in reader:
                if header is None:
                    header = r
                    for k, name in enumerate(header):
                        if name in header[:k]:
                            raise UsageError(f"{path}:1: column {name!r} appears twice in the header "
                                             f"(columns {header.index(name) + 1} and {k + 1})")
                elif r:
                    if len(r) != len(header):
                        raise UsageError(f"{path}:{reader.line_num}: {len(r)} fields, the header has "
                                         f"{len(header)}")
                    rows.append((reader.line_num, dict(zip(header, r))))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except (csv.Error, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not CSV: {e}")
    missing = [c for c in columns if c not in (header or [])]
    if missing:
        raise UsageError(f"{path}: missing column(s) {', '.join(missing)}")
    if not rows:
        raise UsageError(f"{path}: no rows")
    return rows


def cdf_points(values):
    v = sorted(values)
    n = len(v)
    return v, [(i + 1) / n for i in range(n)]


def cmd_serving(args):
    reqs = read_csv(args.requests, REQ_COLUMNS)
    kv = read_csv(args.kv, KV_COLUMNS)
    ttft, tpot = [], []
    for line, r in reqs:
        at = f"{args.requests}:{line}:"
        if r["status"] not in ("ok", "rejected"):
            raise UsageError(f"{at}status: {r['status']!r} is not ok or rejected")
        if r["status"] != "ok":
            continue
        ttft.append(duration(r["ttft_ms"], at + "ttft_ms", "ms"))
        if whole(r["output_tokens"], at + "output_tokens") > 1:
            tpot.append(duration(r["mean_tpot_ms"], at + "mean_tpot_ms", "ms"))
    if not ttft:
        raise UsageError(f"{args.requests}: no completed requests (status ok)")
    groups = {}
    for line, r in kv:
        at = f"{args.kv}:{line}:"
        g = groups.setdefault(r["group"], {"t": [], "used": [], "cap": 0.0})
        cap = whole(r["kv_blocks_capacity"], at + "kv_blocks_capacity", lo=1, why=" (a group holds a block or more)")
        g["t"].append(duration(r["time_ms"], at + "time_ms", "ms") / 1e3)
        g["used"].append(whole(r["kv_blocks_used"], at + "kv_blocks_used", hi=cap,
                               why=", the group's kv_blocks_capacity"))
        g["cap"] = max(g["cap"], cap)
    matplotlib, plt = plt_module()
    fig = plt.figure(figsize=FIGSIZE, dpi=DPI)
    ax_ttft = fig.add_subplot(2, 2, 1)
    ax_tpot = fig.add_subplot(2, 2, 2)
    ax_kv = fig.add_subplot(2, 1, 2)
    for ax, vals, name in ((ax_ttft, ttft, "TTFT"), (ax_tpot, tpot, "mean TPOT")):
        if vals:
            x, y = cdf_points(vals)
            ax.step(x, y, where="post", color="tab:blue")
            for q, ls in ((0.5, "--"), (0.99, ":")):
                xv = x[min(len(x) - 1, max(0, math.ceil(q * len(x)) - 1))]
                ax.axvline(xv, color="gray", ls=ls, lw=0.8, label=f"p{round(q * 100)} {xv:.1f} ms")
            ax.legend(fontsize=8, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no request with > 1 output token", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{name} CDF ({len(vals)} requests)")
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for k, name in enumerate(sorted(groups)):
        g = groups[name]
        c = colours[k % len(colours)]
        ax_kv.step(g["t"], g["used"], where="pre", color=c, label=f"{name} used")
        if g["cap"] > 0:
            ax_kv.axhline(g["cap"], color=c, ls="--", lw=0.8, label=f"{name} capacity {g['cap']:.0f}")
    ax_kv.set_xlabel("time (s)")
    ax_kv.set_ylabel("KV blocks")
    ax_kv.set_ylim(bottom=0)
    ax_kv.grid(True, alpha=0.3)
    ax_kv.legend(fontsize=8, loc="upper right")
    ax_kv.set_title("KV-cache use over time (blocks held during each iteration)")
    fig.tight_layout()
    save(fig, args.out)


def inputs_of(args):
    """The files a command reads: no output may name one of them."""
    if args.cmd in ("heatmap", "energy"):
        return list(args.results)
    if args.cmd == "timeline":
        return [args.result]
    if args.cmd == "sweep":
        return [args.db]
    if args.cmd == "front":
        return [spec.partition(":")[0] for spec in args.stores]
    return [args.requests, args.kv]


def main(argv):
    p = Parser(prog="tpsim plot", description="tpsim plots")
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    # The plots that live in their own module (HELP, add_arguments, cmd_<name>).
    modules = [
        ("heatmap", plot_heatmap, "links and cores on the chip grid, several results side by side"),
        ("timeline", plot_timeline, "Gantt chart per core or per group of cores"),
        ("sweep", plot_sweep, "a metric of a sweep store against a swept field"),
        ("energy", plot_energy, "energy by event and per op of one or more results"),
        ("front", plot_front, "latency against energy per token of tpsim search stores, with fronts"),
    ]
    for name, module, summary in modules:
        module.add_arguments(sub.add_parser(name, help=summary, description=module.HELP,
                                            formatter_class=argparse.RawDescriptionHelpFormatter))
    v = sub.add_parser("serving", help="TTFT and TPOT CDFs and KV use over time from tpsim serve CSVs")
    v.add_argument("requests", metavar="REQUESTS.csv")
    v.add_argument("kv", metavar="KV.csv")
    v.add_argument("--out", required=True, metavar="PNG", help=OUT_HELP)
    try:
        # An unknown option is named before a missing argument (argparse said only "the following
        # arguments are required" for `plot heatmap --bogus`).
        if argv and argv[0] in sub.choices:
            known = sub.choices[argv[0]]._option_string_actions
            for tok in argv[1:]:
                if tok == "--":
                    break
                if tok.startswith("-") and len(tok) > 1 and not tok[1].isdigit() and tok[1] != ".":
                    if tok.split("=", 1)[0] not in known:
                        raise UsageError("unrecognized arguments: " + tok)
        args = p.parse_args(argv)
        vars(args).pop("_given", None)
        if not args.cmd:
            raise UsageError("expected a subcommand: heatmap, timeline, sweep, energy, front or serving")
        # An empty value (a script's unset variable) read as the option not given (--where "",
        # --vmax "", --cores ""), and an empty file name made matplotlib write ".png" here. A title
        # may be empty.
        positional = {"result": "RESULT.json", "db": "RESULTS.sqlite", "requests": "REQUESTS.csv", "kv": "KV.csv"}
        for flag, value in sorted(vars(args).items()):
            if value == "" and flag in positional:
                raise UsageError(positional[flag] + " is empty (a script's unset variable?)")
            if value == "" and flag not in ("title", "cmd"):
                raise UsageError("--" + flag.replace("_", "-") + " needs a value, got an empty one")
        # Before any input is read or anything drawn: the file --out names (the extension as
        # written may be absent), and no output over an input or over another output.
        args.out = out_path(args.out)
        check_outputs([("--out", args.out), ("--dump-series", getattr(args, "dump_series", None))],
                      inputs_of(args))
        out_format(args.out)
        commands = {name: getattr(module, "cmd_" + name) for name, module, _ in modules}
        commands["serving"] = cmd_serving
        commands[args.cmd](args)
        write_stdout("")  # what is still buffered: a failed write is an error, not exit 0
    except UsageError as e:
        print(f"tpsim plot: {e}", file=sys.stderr)
        return 2
    except WriteError as e:
        print(f"tpsim plot: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"tpsim plot: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    except Exception as e:  # a malformed field deep in the input
        print(f"tpsim plot: bad input: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
