#include "sim/sweep/slurm.h"

#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>

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

namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (every part digits).
bool SlurmTime(std::string_view t) {
  std::string_view rest = t;
  size_t dash = t.find('-');
  if (dash != std::string_view::npos) {
    if (!AllDigits(t.substr(0, dash))) return false;
    rest = t.substr(dash + 1);
  }
  int parts = 0;
  while (true) {
    size_t colon = rest.find(':');
    if (!AllDigits(rest.substr(0, colon))) return false;
    ++parts;
    if (colon == std::string_view::npos) break;
    rest = rest.substr(colon + 1);
  }
  return parts <= 3;
}

bool SlurmName(std::string_view s, bool commas) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.' || (commas && c == ',');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string CheckSlurmJob(const SlurmJob& job) {
  if (!job.time.empty() && !SlurmTime(job.time))
    return "--time expects Slurm's M, M:S, H:M:S, D-H, D-H:M or D-H:M:S, got '" + job.time.substr(0, 40) +
           "'";
  if (!job.mem.empty()) {
    std::string_view m = job.mem;
    if (!m.empty() && std::string_view("KMGTkmgt").find(m.back()) != std::string_view::npos)
      m.remove_suffix(1);
    if (!AllDigits(m))
      return "--mem expects an integer with an optional K, M, G or T suffix, got '" + job.mem.substr(0, 40) +
             "'";
  }
  if (!job.partition.empty() && !SlurmName(job.partition, true))
    return "--partition expects partition names (letters, digits, _ - . and , between names), got '" +
           job.partition.substr(0, 40) + "'";
  if (!job.account.empty() && !SlurmName(job.account, false))
    return "--account expects an account name (letters, digits, _ - .), got '" + job.account.substr(0, 40) +
           "'";
  return "";
}

std::string CheckSlurmStore(const std::string& db) {
  const std::string dir = SlurmDirOf(db);
  for (unsigned char ch : dir)
    if (ch <= ' ' || ch == '"' || ch == '\'' || ch == '\\' || ch == 0x7f)
      return "--db: the Slurm job's folder " + dir.substr(0, 120) +
             " holds a blank, a quote, a backslash or a control character, which its #SBATCH --output line "
             "cannot carry (sbatch splits the line there): give --db a path without them";
  return "";
}

void FitArraySize(SlurmJob* job, uint64_t units, const std::string& command, const std::string& unit,
                  std::ostream& err) {
  if (static_cast<uint64_t>(job->array_size) <= units) return;
  err << "tpsim " << command << ": --array-size " << job->array_size << " is more than the " << command
      << "'s " << units << " " << unit << "s: " << units << " array tasks, one " << unit << " each\n";
  job->array_size = static_cast<int>(units);
}

std::string MergeCommand(const SlurmJob& job) {
  return ShellQuote(job.exe) + " sweep merge " + ShellQuote(job.db.empty() ? "OUT.sqlite" : job.db) + " " +
         ShellQuote(job.dir) + "/shard-*.sqlite";
}

void SubmitOrWrite(const SlurmJob& job, bool dry_run, std::ostream& out) {
  if (dry_run) {
    const std::string script = WriteSbatch(job);
    out << SbatchScript(job) << "\n# wrote " << script << " (not submitted); submit it with:\n  sbatch "
        << ShellQuote(script) << "\n# when it has finished, merge the shards:\n  " << MergeCommand(job)
        << "\n";
    return;
  }
  std::string script;
  const std::string id = SubmitSlurm(job, &script);
  out << "submitted Slurm job " << id << ": " << job.array_size << " tasks (" << script << ")\n"
      << "when it has finished, merge the shards:\n  " << MergeCommand(job) << "\n";
}

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("tpsim") : p.string();
}

std::string Absolute(const std::string& p) {
  std::error_code ec;
  auto a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

std::string SlurmDirOf(const std::string& db) {
  const std::string abs_db = Absolute(db);
  return (abs_db.ends_with(".sqlite") ? abs_db.substr(0, abs_db.size() - 7) : abs_db) + ".slurm";
}

std::string SbatchScript(const SlurmJob& job) {
  const std::string n = std::to_string(job.array_size);
  std::string s = "#!/bin/bash\n";
  // The name comes from the sweep's `name`: a newline in it ("x\nrm -rf ~") put a line of its own
  // into the script, run by each task, and a blank cut the directive. Letters, digits, - _ . only.
  std::string name = job.job_name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  s += "#SBATCH --job-name=" + name + "\n";
  s += "#SBATCH --array=0-" + std::to_string(job.array_size - 1) + "\n";
  s += "#SBATCH --output=" + job.dir + "/task-%a.out\n";
  if (!job.partition.empty()) s += "#SBATCH --partition=" + job.partition + "\n";
  if (!job.account.empty()) s += "#SBATCH --account=" + job.account + "\n";
  if (!job.time.empty()) s += "#SBATCH --time=" + job.time + "\n";
  if (!job.mem.empty()) s += "#SBATCH --mem=" + job.mem + "\n";
  if (job.jobs > 0) s += "#SBATCH --cpus-per-task=" + std::to_string(job.jobs) + "\n";
  s += "# Shard I of " + n + " runs the " + (job.command.empty() ? "sweep points" : "candidates") +
       " with index % " + n + " == I into its own database.\n";
  s += "# When every task has finished:\n#   " + MergeCommand(job) + "\n";
  s += "set -euo pipefail\n";
  // The subcommand as a word, its arguments quoted.
  const std::vector<std::string> command =
      job.command.empty() ? std::vector<std::string>{"sweep", job.sweep} : job.command;
  std::string what = " " + command.front();
  for (size_t k = 1; k < command.size(); ++k) what += " " + ShellQuote(command[k]);
  s += "exec " + ShellQuote(job.exe) + what + " --shard \"${SLURM_ARRAY_TASK_ID}/" + n + "\" --db " +
       ShellQuote(job.dir) + "/shard-\"${SLURM_ARRAY_TASK_ID}\".sqlite --jobs " +
       (job.jobs > 0 ? std::to_string(job.jobs) : std::string("\"${SLURM_CPUS_PER_TASK:-1}\"")) + "\n";
  return s;
}

std::string WriteSbatch(const SlurmJob& job) {
  std::filesystem::create_directories(job.dir);
  std::string path = job.dir + "/sweep.sbatch";
  std::ofstream out(path, std::ios::binary);
  out << SbatchScript(job);
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string SubmitSlurm(const SlurmJob& job, std::string* script_path) {
  std::string path = WriteSbatch(job);
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
