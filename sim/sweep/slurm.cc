#include "sim/sweep/slurm.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace tpsim::sweep {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string SbatchScript(const SlurmJob& job) {
  const std::string n = std::to_string(job.array_size);
  std::string s = "#!/bin/bash\n";
  s += "#SBATCH --job-name=" + job.job_name + "\n";
  s += "#SBATCH --array=0-" + std::to_string(job.array_size - 1) + "\n";
  s += "#SBATCH --output=" + job.dir + "/task-%a.out\n";
  if (!job.partition.empty()) s += "#SBATCH --partition=" + job.partition + "\n";
  if (job.jobs > 0) s += "#SBATCH --cpus-per-task=" + std::to_string(job.jobs) + "\n";
  s += "# Shard I of " + n + " runs the sweep points with index % " + n + " == I into its own database.\n";
  s += "# When every task has finished:\n#   " + ShellQuote(job.exe) + " sweep merge OUT.sqlite " +
       ShellQuote(job.dir) + "/shard-*.sqlite\n";
  s += "set -euo pipefail\n";
  s += "exec " + ShellQuote(job.exe) + " sweep " + ShellQuote(job.sweep) +
       " --shard \"${SLURM_ARRAY_TASK_ID}/" + n + "\" --db " + ShellQuote(job.dir) +
       "/shard-\"${SLURM_ARRAY_TASK_ID}\".sqlite --jobs " +
       (job.jobs > 0 ? std::to_string(job.jobs) : std::string("\"${SLURM_CPUS_PER_TASK:-1}\"")) + "\n";
  return s;
}

std::string SubmitSlurm(const SlurmJob& job, std::string* script_path) {
  std::filesystem::create_directories(job.dir);
  std::string path = job.dir + "/sweep.sbatch";
  {
    std::ofstream out(path, std::ios::binary);
    out << SbatchScript(job);
    out.close();
    if (!out) throw std::runtime_error("cannot write " + path);
  }
  if (script_path) *script_path = path;
  std::string cmd = "sbatch --parsable " + ShellQuote(path) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run sbatch");
  std::string out;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  int st = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (st != 0) {
    throw std::runtime_error("sbatch failed (" + path + "): " + (out.empty() ? "is Slurm installed?" : out));
  }
  // --parsable prints "jobid" or "jobid;cluster"; keep the id.
  size_t nl = out.find_last_of('\n');
  std::string id = nl == std::string::npos ? out : out.substr(nl + 1);
  return id.substr(0, id.find(';'));
}

}  // namespace tpsim::sweep
