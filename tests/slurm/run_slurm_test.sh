#!/bin/bash
# End-to-end Slurm test: a single-node cluster (munge + slurmctld + slurmd, state
# in a temp dir), a 4-task job array of a small sweep via `tpsim sweep --slurm`,
# then merge and check every point is present exactly once.
# Usage: run_slurm_test.sh [TPSIM]   (default: build/bin/tpsim). Needs root for
# apt-get and the daemons. Prints "slurm test: PASS" or "slurm test: FAIL: why".
# Idempotent: stops only the daemons it started (trap on EXIT), and refuses to
# start a second cluster when a slurmctld is already running.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tpsim=$(readlink -f "${1:-$here/build/bin/tpsim}")
fail() { echo "slurm test: FAIL: $*"; exit 1; }
[ -x "$tpsim" ] || fail "no tpsim executable at $tpsim"

skip() { echo "slurm test: SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root to start munged, slurmctld and slurmd"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge >/dev/null 2>&1; } ||
    fail "cannot install slurm-wlm and munge"
fi
pgrep -x slurmctld >/dev/null && fail "a slurmctld is already running; not starting a second cluster"

tmp=$(mktemp -d /tmp/tpsim-slurm.XXXXXX)
chmod 755 "$tmp"
pids=()
conf_backup=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "$conf_backup" ]; then mv -f "$conf_backup" /etc/slurm/slurm.conf; else rm -f /etc/slurm/slurm.conf; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# munge: reuse a running munged, else start one (and stop it afterwards).
mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  munged --force --pid-file="$tmp/munged.pid" >/dev/null 2>&1 || fail "munged did not start"
  sleep 1
  [ -f "$tmp/munged.pid" ] && pids+=("$(cat "$tmp/munged.pid")")
  munge -n | unmunge >/dev/null 2>&1 || fail "munge does not work"
fi

H=$(hostname -s)
mkdir -p /etc/slurm "$tmp/state" "$tmp/spool"
[ -f /etc/slurm/slurm.conf ] && { conf_backup="$tmp/slurm.conf.orig"; cp /etc/slurm/slurm.conf "$conf_backup"; }
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$H CPUs=$(nproc) RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D >/dev/null 2>&1 & pids+=($!)
sleep 2
slurmd -D >/dev/null 2>&1 & pids+=($!)
for i in $(seq 1 30); do
  sinfo -h -o %t 2>/dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %t 2>/dev/null | grep -q idle || fail "the node did not become idle (see $tmp/slurmctld.log)"

# A small sweep: 3 bandwidths x 4 prompt lengths = 12 points, 1 layer, 1 decode step.
cat > "$tmp/small.textproto" <<SWEEP
name: "slurm-test"
base: "$here/configs/experiments/reference-qwen3-4b.textproto"
axis { field: "workload.num_layers" values: "1" }
axis { field: "workload.decode_steps" values: "1" }
axis { field: "mapping.pipeline_stages" values: "1" }
axis { field: "chip.noc.link_bandwidth_gbps" values: ["64", "128", "256"] }
axis { field: "workload.seq_len" values: ["128", "256", "512", "1024"] }
SWEEP
# Prints the submission's output, sets $job to its job id and waits for the job to end.
wait_for_job() {
  echo "$out"
  job=$(echo "$out" | sed -n 's/^submitted Slurm job \([0-9]*\).*/\1/p')
  [ -n "$job" ] || fail "no job id in: $out"
  for i in $(seq 1 120); do
    [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
    sleep 1
  done
  [ -z "$(squeue -h -j "$job" 2>/dev/null)" ] || fail "job $job still queued or running after 120 s"
}
cd "$tmp"
out=$("$tpsim" sweep "$tmp/small.textproto" --db "$tmp/results.sqlite" --slurm --array-size 4 --partition debug 2>&1) ||
  fail "submission failed: $out"
wait_for_job
shopt -s nullglob
shards=("$tmp"/results.slurm/shard-*.sqlite)
[ "${#shards[@]}" -eq 4 ] || fail "expected 4 shard databases, found ${#shards[@]} ($(cat "$tmp"/results.slurm/task-*.out 2>/dev/null | tail -5))"
"$tpsim" sweep merge "$tmp/merged.sqlite" "${shards[@]}" || fail "merge failed"
rows=$(sqlite3 "$tmp/merged.sqlite" "SELECT COUNT(*), COUNT(DISTINCT point_index), SUM(status = 'ok') FROM points")
[ "$rows" = "12|12|12" ] || fail "expected 12 points once each, all ok; got count|distinct|ok = $rows"
echo "slurm test: sweep PASS (job $job: 4 tasks, 12 points merged once each)"

# A small search on the same cluster (`tpsim search --slurm`): 2 shards, merged, then the
# rerun on the merged store must print the front of a search run here, row for row, with
# every candidate taken from the store.
space=(--no-prune --tp 1,2 --stages 1 --partitions k_split,n_split --placements linear --collectives ring --spans stage
       --set workload.num_layers=1 --set workload.decode_steps=1 --set workload.seq_len=128)
exp="$here/configs/experiments/reference-qwen3-4b.textproto"
out=$("$tpsim" search "$exp" "${space[@]}" --db "$tmp/search.sqlite" --slurm --array-size 2 --partition debug 2>&1) ||
  fail "search submission failed: $out"
wait_for_job
shards=("$tmp"/search.slurm/shard-*.sqlite)
[ "${#shards[@]}" -eq 2 ] || fail "expected 2 search shards, found ${#shards[@]} ($(cat "$tmp"/search.slurm/task-*.out 2>/dev/null | tail -5))"
"$tpsim" sweep merge "$tmp/search.sqlite" "${shards[@]}" || fail "search merge failed"
front() { sed -n '/^Pareto front/,/^$/p'; }
rerun=$("$tpsim" search "$exp" "${space[@]}" --db "$tmp/search.sqlite" --confirm 0 2>&1) || fail "rerun failed: $rerun"
echo "$rerun" | grep -q "8 simulated (8 of them from the store)" || fail "the rerun did not reuse all 8 candidates: $rerun"
here_run=$("$tpsim" search "$exp" "${space[@]}" --confirm 0 2>&1) || fail "local search failed: $here_run"
[ "$(echo "$rerun" | front)" = "$(echo "$here_run" | front)" ] || fail "fronts differ: $(echo "$rerun" | front) vs $(echo "$here_run" | front)"
echo "slurm test: PASS (sweep: 12 points merged once each; search job $job: 2 shards, 8 candidates, the same front)"
