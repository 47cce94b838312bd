#pragma once
// Spreading a sweep over a Slurm cluster: a job array whose task I runs shard
// I of N into its own database; `tpsim sweep merge` joins them afterwards.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace tpsim::sweep {

struct SlurmJob {
  std::string exe;    // absolute path of the tpsim executable
  std::string sweep;  // absolute path of the sweep file
  // What each task runs before its --shard/--db/--jobs: empty = {"sweep", sweep}; `tpsim
  // search` gives {"search", EXPERIMENT, its options...}.
  std::vector<std::string> command;
  std::string dir;        // absolute folder for the shard databases, logs and the script
  int array_size = 4;     // N tasks = N shards
  std::string partition;  // empty: the cluster's default
  std::string time;       // --time per task (e.g. 2:00:00); empty: the partition's default
  std::string mem;        // --mem per task (e.g. 8G); empty: the partition's default
  std::string account;    // --account; empty: the user's default
  std::string db;         // the store the merge hint names (the sweep's --db)
  int jobs = 0;           // workers per task (also --cpus-per-task); 0: $SLURM_CPUS_PER_TASK, else 1
  std::string job_name = "tpsim-sweep";
};

// The sbatch script: #SBATCH --array=0-(N-1), output per task under `dir`, and
//   EXE sweep SWEEP --shard $SLURM_ARRAY_TASK_ID/N --db DIR/shard-$SLURM_ARRAY_TASK_ID.sqlite --jobs J
std::string SbatchScript(const SlurmJob& job);

// Checks the values that go into #SBATCH lines: time as Slurm writes it (M, M:S,
// H:M:S, D-H, D-H:M, D-H:M:S), mem as an integer with an optional K/M/G/T suffix,
// partition and account as names (letters, digits, `_`, `-`, `.`, and `,` between
// partitions). Returns the first problem as "--flag: ..." or an empty string.
std::string CheckSlurmJob(const SlurmJob& job);
// The store `db`'s Slurm folder (SlurmDirOf) goes into an #SBATCH --output line, which sbatch
// splits at blanks: a folder with a blank, a quote, a backslash or a control character is
// refused ("--db: ..."); else an empty string.
std::string CheckSlurmStore(const std::string& db);

// More array tasks than `units` (a sweep's points, a search's candidates) would only start
// empty shards (and past Slurm's MaxArraySize, 1001 by default, sbatch refuses the array): cuts
// job->array_size to one `unit` per task and says so on `err` ("tpsim COMMAND: --array-size N is
// more than the COMMAND's U units: U array tasks, one unit each").
void FitArraySize(SlurmJob* job, uint64_t units, const std::string& command, const std::string& unit,
                  std::ostream& err);

// Writes DIR/sweep.sbatch and returns its path.
std::string WriteSbatch(const SlurmJob& job);

// WriteSbatch, then submits it with `sbatch --parsable`; returns the job id.
// Throws std::runtime_error with sbatch's output when submission fails.
std::string SubmitSlurm(const SlurmJob& job, std::string* script_path);

// With `dry_run`: writes the script and prints it with how to submit it; else submits it
// and prints the job id. Then prints the merge command. Throws as SubmitSlurm.
void SubmitOrWrite(const SlurmJob& job, bool dry_run, std::ostream& out);

// The command that merges the shards of `job` into job.db once every task has finished.
std::string MergeCommand(const SlurmJob& job);

// Quotes `s` for a POSIX shell.
std::string ShellQuote(const std::string& s);

// The running executable's absolute path ("tpsim" when /proc does not say).
std::string SelfExe();
// `p` made absolute and normal (as given when that fails).
std::string Absolute(const std::string& p);
// The folder of a Slurm job's shard databases, logs and script for the store `db`:
// DB without .sqlite, plus .slurm, absolute.
std::string SlurmDirOf(const std::string& db);

}  // namespace tpsim::sweep
