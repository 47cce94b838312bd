#!/usr/bin/env python3
"""Runs the commands the README shows and reports the output lines they no longer print.

Every ``$ COMMAND`` line of a README code block that calls tpsim (a ``\\`` continues it on the
next line; ``# (run from DIR)`` runs it from DIR) is run from the repository root with the
build's bin/ first on PATH; each line shown under it, up to the next ``$`` line or the block's
end, must be a line of what the command printed (stdout and stderr), except:
  - lines with ``...`` (the README's own cuts);
  - lines that hold a measurement of this machine (wall seconds, peak RSS, a benchmark's count
    in a time limit), which no run reproduces (MACHINE_DEPENDENT).
Commands run in a scratch folder that links to the repository's top-level entries, so the files
they write (--out a.json) stay out of the checkout. Not checked, and listed as such: commands
with shell variables, commands that read a file that is not there (made by an earlier step the
README describes: a sweep's database, a shapes CSV), builds (cmake), and commands that run
longer than --timeout. Prints one line per command and a count; exits 1 when some shown line is
not printed.

Usage: readme_check.py [--tpsim-bin DIR] [--timeout S] [--only TEXT]...
  --only TEXT: check only the commands that contain TEXT (e.g. --only "tpsim serve").
A check of the document, not a test: the numbers of a change meant to move them are rerun and
pasted, and this says which blocks to rerun (README, Development).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Shown lines that are measurements of the machine the README was written on.
MACHINE_DEPENDENT = re.compile(
    r"s wall|peak RSS|wall-clock|\(exit 124|candidates decided in \d+ s|^real\s|^user\s|^sys\s")


# Flags whose value is a file the command writes (need not exist before).
OUTPUT_FLAGS = {"--out", "--db", "--csv", "--plot", "--emit", "--requests-csv", "--kv-csv", "--trace",
                "--dump-program", "--dump-series", "--plot-dir", "--predicted", "--predicted-program"}


def missing_input(cmd, cwd):
    """A file the command reads that is not there (None when every one is)."""
    words = cmd.split()
    for i, w in enumerate(words):
        if i > 0 and words[i - 1] in OUTPUT_FLAGS:
            continue
        if re.search(r"\.(csv|sqlite|json|textproto|txt)$", w) and not os.path.exists(os.path.join(cwd, w)):
            return w
    return None


def commands(text):
    """(line number, command, run-from dir, shown lines) of each `$` line in a code block."""
    out = []
    for m in re.finditer(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        first = text[:m.start()].count("\n") + 2
        lines = m.group(1).split("\n")
        i = 0
        cur = None
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ "):
                number = first + i
                cmd = line[2:]
                while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    cmd = cmd.rstrip()[:-1].rstrip() + " " + lines[i].strip()
                where = re.search(r"#\s*\(run from ([^)]+)\)", cmd)
                cwd = os.path.join(ROOT, where.group(1).strip()) if where else ROOT
                cmd = re.split(r"\s{2,}#|\s{3,}\(", cmd)[0].strip()
                cur = [number, cmd, cwd, []]
                out.append(cur)
            elif cur is not None:
                cur[3].append(line)
            i += 1
    return [c for c in out if re.search(r"(^|[\s/])tpsim(-validate)?\s", c[1])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tpsim-bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    env = dict(os.environ, PATH=os.path.abspath(a.tpsim_bin) + os.pathsep + os.environ.get("PATH", ""))
    scratch = tempfile.mkdtemp(prefix="readme-check-")
    for entry in os.listdir(ROOT):
        if entry != ".git":
            os.symlink(os.path.join(ROOT, entry), os.path.join(scratch, entry))
    checked = differs = unchecked = 0
    written = set()  # files earlier commands wrote (cmp a.json b.json)
    for number, cmd, cwd, shown in commands(text):
        if a.only and not any(o in cmd for o in a.only):
            continue
        cwd = scratch if cwd == ROOT else cwd
        short = cmd if len(cmd) <= 110 else cmd[:107] + "..."
        words = cmd.split()
        written.update(words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_FLAGS)
        why = None
        if re.search(r"\$[A-Za-z_{(]", cmd):
            why = "shell variables"
        elif re.search(r"(^|\s)cmake\s", cmd):
            why = "a build"
        else:
            need = missing_input(cmd, cwd)
            if need and need not in written:
                why = f"reads {need}, made by a step the README describes"
        if why:
            print(f"README:{number}: not checked ({why}): {short}")
            unchecked += 1
            continue
        try:
            p = subprocess.run(cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=a.timeout)
            printed = set(line.rstrip() for line in (p.stdout + p.stderr).split("\n"))
        except subprocess.TimeoutExpired:
            print(f"README:{number}: not checked (longer than {a.timeout:g} s): {short}")
            unchecked += 1
            continue
        missing = [s for s in shown if s.strip() and "..." not in s and not MACHINE_DEPENDENT.search(s)
                   and s.rstrip() not in printed]
        checked += 1
        if missing:
            differs += 1
            print(f"README:{number}: {len(missing)} of {len(shown)} shown lines not printed: {short}")
            for s in missing[:8]:
                print(f"    {s[:160]}")
        else:
            print(f"README:{number}: ok: {short}")
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"readme_check: {checked} commands run, {differs} with lines they no longer print, "
          f"{unchecked} not checked")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
