"""Helpers shared by tpsim's plot commands: errors, matplotlib set-up, input reading, units."""

import json
import math
import os
import re
import stat
import tempfile

FIGSIZE = (10, 8)
DPI = 100


class UsageError(Exception):
    """Bad input or usage: `tpsim plot` prints it on one line and exits 2."""


class WriteError(Exception):
    """An output could not be written: `tpsim plot` prints it on one line and exits 1, as
    tpsim's other commands do."""


# The picture formats `--out` takes, by extension, with the metadata that keeps their bytes the
# same from run to run: matplotlib stamps PNGs with its version (Software), SVGs with the date
# (Date) and PDFs with the time (CreationDate); each backend accepts only its own keys (the SVG
# writer refused the PNG's Software with a ValueError). PostScript, EPS, JPEG, TIFF and WebP are
# left out: the first two embed the time and the file's name, the others take no metadata.
FORMATS = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
OUT_HELP = "the picture to write: .png, .svg or .pdf by its extension (none: PNG)"


def plt_module():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.hashsalt"] = "tpsim"
    return matplotlib, plt


def out_path(path):
    """The file `--out PATH` writes: PATH; without an extension PATH.png, the name matplotlib
    gave it, unless PATH is a device, FIFO or folder (/dev/null gets the PNG; a folder, the
    error that says so)."""
    if os.path.splitext(path)[1][1:]:
        return path
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return path
    except OSError:
        pass
    return path.rstrip(".") + ".png"


def out_format(path):
    """The format of the picture `path` (an out_path): its extension, .png, .svg or .pdf in
    any case (none: a device, PNG); another is refused (exit 2)."""
    ext = os.path.splitext(path)[1][1:]
    if not ext:
        return "png"
    if ext.lower() not in FORMATS:
        raise UsageError(f"--out {path}: .{ext} is not a picture format tpsim plot writes; "
                         f"name a .png, .svg or .pdf file")
    return ext.lower()


def same_file(a, b):
    """Whether paths a and b name one file: the same inode when both exist (links, ./, ..),
    else the same absolute path with links resolved (as configs/files.cc SameFile)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(os.path.abspath(a)) == os.path.realpath(os.path.abspath(b))


def check_outputs(outputs, inputs):
    """Refuses (exit 2) an output that names an input, which it would overwrite, or two
    outputs that name one file. outputs: [(flag, path or None)]."""
    for i, (flag, out) in enumerate(outputs):
        if not out:
            continue
        for path in inputs:
            if path and same_file(out, path):
                raise UsageError(f"{flag} {out}: names an input of this command ({path}); "
                                 f"write the output elsewhere")
        for other_flag, other in outputs[:i]:
            if other and same_file(out, other):
                raise UsageError(f"{flag} {out}: names the same file as {other_flag}; "
                                 f"give each output its own file")


def _strerror(e):
    return e.strerror or str(e)


def write_output(path, write):
    """Calls write(f) with a binary file for `path`. A regular file is written to a temporary
    file in its folder and renamed over it, so a failed write leaves no partial file (and the
    old file, if any, as it was); a device or FIFO (/dev/null, /dev/stdout) is written in place,
    as configs::OutputFile does. Raises WriteError naming the file and the reason."""
    def fail(why):
        return WriteError(f"cannot write {path}: {why}")

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise fail(_strerror(e))
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise fail("is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CLOEXEC), "wb") as f:
                write(f)
        except OSError as e:
            raise fail(_strerror(e))
        return
    folder = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tpsim-tmp-", dir=folder)
    except OSError as e:
        raise fail(f"cannot create a temporary file in {folder} ({_strerror(e)})")
    try:
        with os.fdopen(fd, "wb") as f:
            if st is not None:
                mode = st.st_mode & 0o7777
            else:
                mask = os.umask(0)
                os.umask(mask)
                mode = 0o666 & ~mask
            os.fchmod(f.fileno(), mode)
            write(f)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise fail(_strerror(e))
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def save(fig, out):
    """Writes the figure to `out` (see out_path) at DPI, the same bytes for the same input."""
    out = out_path(out)
    fmt = out_format(out)
    write_output(out, lambda f: fig.savefig(f, format=fmt, dpi=DPI, metadata=FORMATS[fmt]))


def dump_json(path, data):
    """Writes what a plot drew (--dump-series) as sorted, indented JSON."""
    if not path:
        return
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    write_output(path, lambda f: f.write(text.encode("utf-8")))


def check_input(path):
    """An input must be a regular file: a FIFO would block and /dev/zero never ends (reading
    it grew memory until the process was killed); as tpsim's config reader says it."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path}: is not a regular file (a FIFO, device or socket)")


def load_result(path):
    check_input(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except ValueError as e:
        raise UsageError(f"{path}: not JSON: {e}")
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a tpsim result (expected a JSON object)")
    return data


def num(v, what):
    """int64 fields may be numbers or (proto3 JSON) strings."""
    try:
        return float(v)
    except (TypeError, ValueError):
        raise UsageError(f"{what}: {v!r} is not a number")


def config_value(cfg, block, field):
    """The first `field: value` inside the first `block { ... }` of a resolved experiment in
    text format (None when absent). Good enough for the scalar fields a title needs."""
    if not isinstance(cfg, str):
        return None
    m = re.search(r"\b" + re.escape(block) + r"\s*\{", cfg)
    if not m:
        return None
    depth, i = 1, m.end()
    while i < len(cfg) and depth:
        depth += {"{": 1, "}": -1}.get(cfg[i], 0)
        i += 1
    inner = cfg[m.end():i]
    # Only the block's own level: drop nested blocks.
    flat, depth = [], 0
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    v = re.search(r"(?m)^\s*" + re.escape(field) + r"\s*:\s*(\"[^\"]*\"|\S+)", "".join(flat))
    if not v:
        return None
    return v.group(1).strip('"')


# ---- units ----------------------------------------------------------------------------------
#
# Every config field and metric states its unit in its name (DESIGN.md); an axis label is the
# name with that suffix replaced by the unit, and values are scaled to a readable unit.

TIME_UNITS = (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3), ("ps", 1.0))  # in ps
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
# Suffix -> (unit label, unit size in the base unit of its kind, kind).
SUFFIXES = (
    ("_ps", "ps", 1.0, "time"), ("_ns", "ns", 1e3, "time"), ("_us", "us", 1e6, "time"),
    ("_ms", "ms", 1e9, "time"), ("_s", "s", 1e12, "time"),
    ("_bytes", "B", 1, "bytes"),
    ("_gbps", "GB/s", None, None), ("_tflops", "TFLOP/s", None, None),
    ("_gflops", "GFLOP/s", None, None), ("_cycles", "cycles", None, None),
    ("_pct", "%", None, None), ("_per_s", "1/s", None, None), ("_tokens", "tokens", None, None),
    ("_mhz", "MHz", None, None), ("_ghz", "GHz", None, None), ("_w", "W", None, None),
    ("_pj", "pJ", None, None),
)


def split_unit(name):
    """(stem, suffix entry or None). 'decode_step_ps_mean' -> ('decode_step mean', _ps)."""
    stem, tail = name, ""
    for t in ("_mean", "_max", "_min", "_p50", "_p90", "_p95", "_p99"):
        if stem.endswith(t):
            stem, tail = stem[: -len(t)], " " + t[1:]
            break
    for s in SUFFIXES:
        if stem.endswith(s[0]) and len(stem) > len(s[0]):
            return stem[: -len(s[0])] + tail, s
    return name, None


def axis_unit(name, values):
    """(factor, label): multiply values by factor to draw them; the label names the unit.

    Times are drawn in s, ms, us or ns and bytes in GiB, MiB, KiB or B, by the largest value;
    utilisation fractions ('utilization' names) in %; seq_len in tokens."""
    if name.endswith("_per_s"):  # a rate (requests_per_s, goodput_per_s): per second, not a time
        return 1.0, f"{name} (1/s)"
    finite = [abs(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    vmax = max(finite, default=0.0)
    stem, s = split_unit(name)
    if "." in name:  # a config field path: keep it whole, the reader types it
        stem = name
    if s is not None and s[3] == "time":
        base = vmax * s[2]  # in ps
        unit, size = next(((u, f) for u, f in TIME_UNITS if base >= f), (s[1], s[2]))
        return s[2] / size, f"{stem} ({unit})"
    if s is not None and s[3] == "bytes":
        unit, size = next(((u, f) for u, f in BYTE_UNITS if vmax >= f), BYTE_UNITS[-1])
        return 1.0 / size, f"{stem} ({unit})"
    if s is not None:
        return 1.0, f"{stem} ({s[1]})"
    if name.endswith("utilization") or name.endswith("utilisation"):
        return 100.0, f"{name} (%)"
    if name.endswith("seq_len") or name.endswith("_len"):
        return 1.0, f"{name} (tokens)"
    return 1.0, name


def fmt_value(v):
    """A compact, deterministic text for a swept value (4096, 0.5, k_split)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def value_key(v):
    """Sorts numbers numerically before text."""
    if isinstance(v, (int, float)):
        return (0, float(v), "")
    try:
        return (0, float(v), str(v))
    except (TypeError, ValueError):
        return (1, 0.0, str(v))
