#!/usr/bin/env python3
"""Dependencies run one way: checks every #include of the sources against the layers.

  configs -> arch / llm -> mapping -> engine interface -> engines (analytical, tlm)
          -> result -> run pipeline -> serving -> sweep (a point with a request stream runs as
          tpsim serve), agree, search (on sweep) -> cli
  traces read an engine's output (engine interface and below) and are attached by the cli as
  observers: nothing between the engines and the cli includes them
  validate's library (tpsim_validate_plan): configs, llm, arch, mapping (and the CSV formats
  of validate/gpu_csv.h, which need only configs)
  tpsim-validate (validate/main.cc): that library, the compare module (its collective sweep
  rows, validate/collective_sweep.h), the run pipeline and the microbenchmarks (its collective
  predictions are `tpsim collectives`' sim::PredictCollective), never sim/tlm

Each source file belongs to one module (by path); a file may include its own module's
headers and those of the modules listed for it below, nothing else. SystemC (<systemc>,
<tlm...>) is included only by sim/tlm. Prints every violation and exits 1; exit 0 when
there is none. Usage: layers.py [SOURCE_ROOT]
"""
import os
import re
import sys

BELOW_ENGINE = {"configs", "llm", "arch", "mapping"}
ENGINE = BELOW_ENGINE | {"engine"}
RUN = ENGINE | {"analytical", "result", "run"}
ALLOWED = {
    "configs": set(),
    "llm": {"configs"},
    "arch": {"configs"},
    "mapping": {"configs", "llm", "arch"},
    "engine": BELOW_ENGINE,
    "analytical": ENGINE,
    "tlm": ENGINE,
    "result": ENGINE,
    "traces": ENGINE,  # an observer: reads EngineOutput, never the pipeline that calls it
    "compare": {"configs"},
    # tpsim_validate_plan and the CUDA sources; they share the GPU microbenchmark CSV formats
    # (validate/gpu_csv.*, in the compare module, which needs only configs).
    "validate": BELOW_ENGINE | {"compare"},
    "run": RUN,  # observers (RunOptions::observers) are attached by the caller
    # --collectives predicts with sim::PredictCollective, what `tpsim collectives` prints.
    "validate_main": RUN | {"validate", "compare", "microbench"},
    "sweep": RUN | {"serving"},  # a point with a request stream runs as `tpsim serve`
    "serving": RUN,  # its trace is written by the cli (sim/cli/serve.cc)
    # tpsim collectives / gemm / compare --chip: predictions on any chip as the CSV rows
    # tpsim-validate measures.
    "microbench": RUN | {"compare"},
    # tpsim agree: both engines (the TLM one by name, through the engine registry).
    "agree": RUN,
    # tpsim search: candidates through the sweep runner and store (TLM confirmation in child
    # processes, by engine name).
    "search": RUN | {"sweep", "serving"},
    "cli": RUN | {"traces", "tlm", "sweep", "serving", "compare", "validate", "microbench", "agree", "search"},
}


def module(path):
    """The module of a source path relative to the root, or None for files not checked."""
    parts = path.split("/")
    top = parts[0]
    if top in ("configs", "llm", "arch", "mapping", "traces"):
        return top
    if top == "validate":
        name = parts[-1]
        if name.startswith(("compare.", "compare_gpu.", "gpu_csv.", "collective_sweep.")):
            return "compare"
        return "validate_main" if name == "main.cc" else "validate"
    if top == "sim":
        if len(parts) == 2:
            stem = parts[1].split(".")[0]
            return {"engine": "engine", "engines": "engine", "schedule": "engine", "dispatch_loop": "engine", "step_source": "engine", "result": "result", "energy": "result",
                    "run": "run", "experiment": "run", "step_reuse": "run", "step_template": "run", "step_period": "run", "step_rolling": "run", "step_compose": "run", "step_stream": "run", "step_streamed": "run", "step_energy": "run",
                    "sampled_run": "run", "microbench": "microbench"}.get(stem)
        return {"analytical": "analytical", "tlm": "tlm", "sweep": "sweep", "serving": "serving",
                "cli": "cli", "agree": "agree", "search": "search"}.get(parts[1])
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    include = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
    bad = []
    checked = 0
    for top in ("configs", "llm", "arch", "mapping", "sim", "traces", "validate"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".h", ".cc", ".cu")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                mod = module(rel)
                if mod is None:
                    bad.append(f"{rel}: belongs to no layer (add it to tests/layers.py)")
                    continue
                checked += 1
                with open(os.path.join(root, rel), encoding="utf-8") as src:
                    for n, line in enumerate(src, 1):
                        m = include.match(line)
                        if not m:
                            continue
                        quote, target = m.groups()
                        if quote == "<":
                            if (target == "systemc" or target.startswith(("systemc.", "tlm", "sysc/"))) and mod != "tlm":
                                bad.append(f"{rel}:{n}: includes <{target}>: only sim/tlm may include SystemC")
                            continue
                        if "/" not in target:
                            continue  # generated headers (chip.pb.h, perfetto_trace.pb.h)
                        dep = module(target)
                        if dep is None or dep == mod or dep in ALLOWED[mod]:
                            continue
                        bad.append(f"{rel}:{n}: {mod} includes {target} ({dep}): {mod} may include only "
                                   f"{', '.join(sorted(ALLOWED[mod])) or 'itself'}")
    for b in bad:
        print(b)
    print(f"layers: {checked} files checked, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
