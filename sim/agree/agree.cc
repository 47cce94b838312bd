#include "sim/agree/agree.h"
#include "sim/agree/family.h"

#include <google/protobuf/text_format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "configs/files.h"
#include "configs/load.h"
#include "sim/analytical/links.h"
#include "sim/engine.h"
#include "sim/experiment.h"
#include "sim/result.h"

namespace tpsim::sim::agree {

const char* const kAgreeUsage =
    R"(usage: tpsim agree [--seed S] [--count N] [--jobs J] [--csv OUT.csv] [--worst K] [--family F]
                   [--router-buffers B] [--bounds F,D]
       tpsim agree --seed S --only I [--emit X.textproto] [--family F] [--router-buffers B]

Draws N random valid experiments (chips, dense catalog models, workloads and
mappings; sim/agree/agree.h says which), runs each on the analytical and the TLM
engine, and prints the distribution of the analytical/TLM ratios of the total
time, the prefill and the mean decode step, the share within 10% and 25%, how
well the analytical engine's contention warning predicted a difference over 10%,
and the K worst cases, each with the commands that reproduce it.

  --seed S        family seed (default 1); experiment I is the same for every N and J
  --family F      dense (default: dense catalog models) or moe (mixture-of-experts
                  catalog models, expert-parallel degree and routing drawn too)
  --count N       experiments 0 .. N-1 (default 30)
  --jobs J        worker processes, 1 .. 256 (default 1; the TLM engine runs one per process)
  --csv FILE      one row per experiment: what was drawn, both engines' times, ratios
  --worst K       worst cases listed (default 5)
  --bounds F,D    exit 1 unless at least a fraction F of the totals are within 10%
                  of the TLM engine's and every one within D (e.g. 0.95,0.25)
  --router-buffers B  time the TLM side with chip.noc.router_buffer_packets = B (2 ..
                  65536): B packets of buffer at each router input, and messages fed to
                  their first link packet by packet, so that packets of flows crossing a
                  link interleave there (the router model without its ports, which would
                  also cap each core's rate; the buffers add back-pressure, which the
                  analytical engine lacks; README "TLM vs analytical"); the analytical
                  side and the draws are unchanged
  --only I        experiment I only: print what was drawn and both engines' times
  --emit FILE     with --only: write experiment I as a textproto for `tpsim run`
)";

namespace {

// One experiment's outcome (a line between processes: fixed fields, no spaces in text).
struct Outcome {
  uint32_t index = 0;
  std::string what;  // short description
  int64_t a_total = 0, t_total = 0, a_prefill = 0, t_prefill = 0, a_decode = 0, t_decode = 0;
  double contention = 0;
  double a_ms = 0, t_ms = 0;
  std::string error;  // "-" when none
  double Ratio(int64_t a, int64_t t) const { return t > 0 ? static_cast<double>(a) / t : 1.0; }
  double total() const { return Ratio(a_total, t_total); }
  double prefill() const { return Ratio(a_prefill, t_prefill); }
  double decode() const { return Ratio(a_decode, t_decode); }
  // The largest |ratio - 1| of the three phases.
  double worst() const {
    return std::max({std::abs(total() - 1), std::abs(prefill() - 1), std::abs(decode() - 1)});
  }
};

std::string Describe(const config::Experiment& c, const arch::Chip& chip) {
  std::ostringstream os;
  const auto& n = c.chip().noc();
  const bool hbm = !c.chip().memory(0).per_core();
  os << n.topology() << "/" << chip.num_cores() << "c/" << n.link_bandwidth_gbps() << "GBps/"
     << (hbm ? "hbm" + std::to_string(chip.channels().size()) : "stacked") << "/"
     << (c.chip().core().sram_bytes() >> 20) << "MiB/" << c.model_name() << "/L" << c.workload().num_layers()
     << "/b" << c.workload().batch() << "s" << c.workload().seq_len() << "d" << c.workload().decode_steps()
     << "/tp" << c.mapping().tp() << "pp" << c.mapping().pipeline_stages() << "/" << c.mapping().partition()
     << "/" << c.mapping().placement() << "/" << c.mapping().collective();
  if (c.mapping().has_moe())
    os << "/ep" << c.mapping().moe().ep()
       << (c.mapping().moe().routing().empty() ? "" : "-" + c.mapping().moe().routing());
  return os.str();
}

// `router_buffers` > 0: the TLM engine runs on the drawn chip with that many packets of buffer at
// each router input (the analytical engine reads no such field).
Outcome RunOne(uint64_t seed, uint32_t index, Family family, uint32_t router_buffers) {
  Outcome o;
  o.index = index;
  o.error = "-";
  try {
    Case k = Draw(seed, index, family);
    o.what = Describe(k.drawn.cfg, k.chip);
    auto time = [&](const std::string& name, const arch::Chip& chip, double* ms) {
      auto engine = MakeEngine(name);
      const auto t0 = std::chrono::steady_clock::now();
      EngineOutput out = engine->Run(k.program, chip);
      *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (name == "analytical") o.contention = out.contention;
      return BuildSummary(k.program, chip, out);
    };
    const config::Summary a = time("analytical", k.chip, &o.a_ms);
    std::optional<arch::Chip> buffered;
    if (router_buffers > 0) {
      config::Chip c = k.drawn.cfg.chip();
      c.mutable_noc()->set_router_buffer_packets(router_buffers);
      buffered.emplace(arch::Chip::Build(c));
    }
    const config::Summary t = time("tlm", buffered ? *buffered : k.chip, &o.t_ms);
    o.a_total = a.total_ps();
    o.t_total = t.total_ps();
    o.a_prefill = a.prefill_ps();
    o.t_prefill = t.prefill_ps();
    o.a_decode = a.decode_step_ps_mean();
    o.t_decode = t.decode_step_ps_mean();
  } catch (const std::exception& ex) {
    o.error = ex.what();
    for (char& ch : o.error)
      if (ch == '\n' || ch == '\t') ch = ' ';
  }
  return o;
}

std::string Serialise(const Outcome& o) {
  std::ostringstream os;
  os.precision(17);
  os << o.index << "\t" << o.what << "\t" << o.a_total << "\t" << o.t_total << "\t" << o.a_prefill << "\t"
     << o.t_prefill << "\t" << o.a_decode << "\t" << o.t_decode << "\t" << o.contention << "\t" << o.a_ms
     << "\t" << o.t_ms << "\t" << o.error << "\n";
  return os.str();
}

bool Parse(const std::string& line, Outcome* o) {
  std::istringstream is(line);
  std::string f;
  std::vector<std::string> v;
  while (std::getline(is, f, '\t')) v.push_back(f);
  if (v.size() != 12) return false;
  o->index = static_cast<uint32_t>(std::stoul(v[0]));
  o->what = v[1];
  o->a_total = std::stoll(v[2]);
  o->t_total = std::stoll(v[3]);
  o->a_prefill = std::stoll(v[4]);
  o->t_prefill = std::stoll(v[5]);
  o->a_decode = std::stoll(v[6]);
  o->t_decode = std::stoll(v[7]);
  o->contention = std::stod(v[8]);
  o->a_ms = std::stod(v[9]);
  o->t_ms = std::stod(v[10]);
  o->error = v[11];
  return true;
}

// How many experiments have run, on stderr: on a terminal one line redrawn in place; into a
// file or pipe a line every 10 s and the last one, so a log reads line by line.
class Progress {
 public:
  explicit Progress(uint32_t count) : count_(count), tty_(isatty(2) == 1) {}
  void Done(uint32_t done) {
    done_ = done;
    const auto now = std::chrono::steady_clock::now();
    if (tty_) {
      std::fprintf(stderr, "\ragree: %u/%u experiments", done, count_);
    } else if (now - last_ >= std::chrono::seconds(10) && done < count_) {
      std::fprintf(stderr, "agree: %u/%u experiments\n", done, count_);
      last_ = now;
    }
  }
  void Finish() {
    if (tty_) {
      std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "agree: %u/%u experiments\n", done_, count_);
    }
  }

 private:
  const uint32_t count_;
  const bool tty_;
  uint32_t done_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Runs experiments [0, count) in `jobs` forked workers (worker w takes indices w, w + jobs, ...).
std::vector<Outcome> RunAll(uint64_t seed, uint32_t count, int jobs, Family family, uint32_t router_buffers) {
  std::vector<Outcome> all;
  Progress progress(count);
  if (jobs <= 1) {
    for (uint32_t i = 0; i < count; ++i) {
      all.push_back(RunOne(seed, i, family, router_buffers));
      progress.Done(i + 1);
    }
    progress.Finish();
    return all;
  }
  std::vector<std::pair<pid_t, int>> workers;
  for (int w = 0; w < jobs; ++w) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("agree: pipe failed");
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("agree: fork failed");
    if (pid == 0) {
      close(fds[0]);
      for (uint32_t i = static_cast<uint32_t>(w); i < count; i += static_cast<uint32_t>(jobs)) {
        const std::string line = Serialise(RunOne(seed, i, family, router_buffers));
        size_t off = 0;
        while (off < line.size()) {
          const ssize_t k = write(fds[1], line.data() + off, line.size() - off);
          if (k <= 0) _exit(1);
          off += static_cast<size_t>(k);
        }
      }
      close(fds[1]);
      _exit(0);
    }
    close(fds[1]);
    workers.emplace_back(pid, fds[0]);
  }
  // The workers' lines as they come (poll), for the progress line; each worker's whole output
  // once it closes its end.
  std::vector<std::string> bufs(workers.size());
  std::vector<pollfd> open;
  for (const auto& w : workers) open.push_back({w.second, POLLIN, 0});
  uint32_t lines = 0;
  while (std::any_of(open.begin(), open.end(), [](const pollfd& p) { return p.fd >= 0; })) {
    if (poll(open.data(), open.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("agree: poll failed");
    }
    for (size_t w = 0; w < open.size(); ++w) {
      if (open[w].fd < 0 || open[w].revents == 0) continue;
      char chunk[4096];
      const ssize_t k = read(open[w].fd, chunk, sizeof chunk);
      if (k > 0) {
        bufs[w].append(chunk, static_cast<size_t>(k));
        lines += static_cast<uint32_t>(std::count(chunk, chunk + k, '\n'));
        progress.Done(lines);
      } else if (k == 0 || errno != EINTR) {
        close(open[w].fd);
        open[w].fd = -1;  // poll skips it
      }
    }
  }
  progress.Finish();
  for (size_t w = 0; w < workers.size(); ++w) {
    int status = 0;
    waitpid(workers[w].first, &status, 0);
    std::istringstream is(bufs[w]);
    std::string line;
    while (std::getline(is, line)) {
      Outcome o;
      if (Parse(line, &o)) all.push_back(o);
    }
  }
  std::sort(all.begin(), all.end(), [](const Outcome& a, const Outcome& b) { return a.index < b.index; });
  if (all.size() != count) throw std::runtime_error("agree: a worker process failed");
  return all;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

int AgreeCommand(const std::vector<std::string>& args) {
  uint64_t seed = 1;
  uint64_t count = 30, jobs = 1;
  uint32_t worst = 5;
  Family family = Family::kDense;
  int64_t only = -1;
  uint32_t router_buffers = 0;
  std::string csv, emit;
  std::vector<std::string> whole_draw;  // the flags given that only the whole draw reads
  double need_within10 = -1, need_max = -1;
  std::map<std::string, std::string> given;  // each flag takes one value (config::GivenTwice)
  auto usage = [](const std::string& msg) {
    std::cerr << "tpsim agree: " << msg << "\n\n" << kAgreeUsage;
    return 2;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kAgreeUsage;
      return 0;
    }
    std::string flag = a, value;
    const size_t eq = a.find('=');
    if (a.starts_with("--") && eq != std::string::npos) flag = a.substr(0, eq);
    // Every option takes a value: another word is unknown (`--bogus` last on the line said it
    // needed a value), or not an option at all.
    static const char* const kFlags[] = {"--seed", "--count", "--jobs",           "--worst", "--family",
                                         "--only", "--csv",   "--router-buffers", "--emit",  "--bounds"};
    if (std::find(std::begin(kFlags), std::end(kFlags), flag) == std::end(kFlags))
      return usage((a.starts_with("-") ? "unknown option " : "unexpected argument ") + a);
    if (a.starts_with("--") && eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      if (const std::string rule = config::OptionAsValue(args[i + 1]); !rule.empty())
        return usage(a + " " + rule);
      value = args[i + 1];
      ++i;
    } else {
      return usage(a + " needs a value");
    }
    // An empty value (a script's unset variable) would read as the flag not given.
    if (value.empty()) return usage(flag + " needs a value, got an empty one");
    if (const std::string twice = config::GivenTwice(&given, flag, value); !twice.empty())
      return usage(flag + " " + twice);
    if (flag == "--count" || flag == "--jobs" || flag == "--worst" || flag == "--csv" || flag == "--bounds")
      whole_draw.push_back(flag);
    try {
      if (flag == "--seed") {
        seed = config::ParseCount(value, UINT64_MAX);
      } else if (flag == "--count") {
        // Read up to 2^64 - 1, so that a count past the range gets the range's message below.
        count = config::ParseCount(value, UINT64_MAX);
      } else if (flag == "--jobs") {
        jobs = config::ParseCount(value, UINT64_MAX);
      } else if (flag == "--worst") {
        worst = static_cast<uint32_t>(config::ParseCount(value, UINT32_MAX));
      } else if (flag == "--family") {
        if (value != "dense" && value != "moe") return usage("--family is dense or moe, got '" + value + "'");
        family = value == "moe" ? Family::kMoe : Family::kDense;
      } else if (flag == "--only") {
        only = static_cast<int64_t>(config::ParseCount(value, UINT32_MAX));
      } else if (flag == "--router-buffers") {
        router_buffers = static_cast<uint32_t>(config::ParseCount(value, UINT32_MAX));
        // 1 is refused on rings and tori (two dateline classes of slots); 0 is the default network.
        if (router_buffers < 2 || router_buffers > 65536)
          return usage("--router-buffers is 2 .. 65536 packets, got '" + value + "'");
      } else if (flag == "--csv") {
        csv = value;
      } else if (flag == "--emit") {
        emit = value;
      } else if (flag == "--bounds") {
        const size_t comma = value.find(',');
        if (comma == std::string::npos) return usage("--bounds needs F,D (e.g. 0.95,0.25)");
        // Each read whole (std::stod took "0.95x" as 0.95), and in range: a NaN or negative F
        // used to skip the check and exit 0, an F above 1 to fail every run.
        need_within10 = config::ParseNumber(value.substr(0, comma));
        need_max = config::ParseNumber(value.substr(comma + 1));
        if (need_within10 < 0 || need_within10 > 1 || need_max < 0)
          return usage(
              "--bounds F,D: F is a share of the totals in 0 .. 1 and D a distance from 1 >= 0, got '" +
              value + "'");
      } else {
        return usage("unknown option " + a);
      }
    } catch (const std::logic_error& err) {
      // Counts read up to 2^64 - 1 have a narrower range, said as the range checks below say it.
      if (flag == "--jobs") return usage("--jobs must be 1 .. 256, got '" + value + "'");
      if (flag == "--count") return usage("--count must be 1 .. 1000000, got '" + value + "'");
      return usage("bad value '" + value + "' for " + flag + ": " + err.what());
    }
  }
  if (jobs < 1 || jobs > 256) return usage("--jobs must be 1 .. 256");
  if (count < 1 || count > 1000000) return usage("--count must be 1 .. 1000000");
  if (!emit.empty() && only < 0) return usage("--emit needs --only");
  // Flags of the whole draw with --only (one experiment) were ignored: --csv wrote no file, exit 0.
  if (only >= 0 && !whole_draw.empty())
    return usage(whole_draw.front() + " is for the whole draw; --only runs one experiment");
  // An output that cannot be written (a missing folder, a directory) is found now, not after the
  // draw (1,000 experiments take an hour): exit 1, as the failed write, nothing created.
  try {
    config::CheckOutputsWritable({{"--csv", csv}, {"--emit", emit}});
  } catch (const std::runtime_error& e) {
    std::cerr << "tpsim agree: " << e.what() << "\n";
    return 1;
  }
  if (only >= 0) {
    const uint32_t index = static_cast<uint32_t>(only);
    Case k = Draw(seed, index, family);
    if (!emit.empty()) {
      std::string text;
      google::protobuf::TextFormat::PrintToString(k.drawn.cfg, &text);
      std::ostringstream out;
      out << "# tpsim agree --seed " << seed << " --only " << index << " (drawn in attempt "
          << k.drawn.attempt
          << ")\n# proto-file: configs/schema/experiment.proto\n# proto-message: tpsim.config.Experiment\n"
          << text;
      // Every write checked (a failed flush at an ofstream's close went unnoticed: /dev/full).
      try {
        config::WriteOutputFile(emit, out.str());
      } catch (const std::runtime_error& e) {
        std::cerr << "tpsim agree: " << e.what() << "\n";
        return 1;
      }
    }
    const Outcome o = RunOne(seed, index, family, router_buffers);
    std::cout << "experiment " << index << " of seed " << seed << ": " << o.what << "\n";
    if (o.error != "-") {
      std::cout << "error: " << o.error << "\n";
      return 1;
    }
    if (router_buffers > 0) std::cout << "tlm: chip.noc.router_buffer_packets = " << router_buffers << "\n";
    std::cout << "            analytical          tlm    ratio\n";
    auto row = [&](const char* name, int64_t a, int64_t t) {
      std::printf("%-8s %12.3f us %12.3f us  %6.3f\n", name, a / 1e6, t / 1e6, t > 0 ? double(a) / t : 1.0);
    };
    row("total", o.a_total, o.t_total);
    row("prefill", o.a_prefill, o.t_prefill);
    row("decode", o.a_decode, o.t_decode);
    std::cout << "contention " << Fixed(o.contention, 3) << ", analytical " << Fixed(o.a_ms, 1) << " ms, tlm "
              << Fixed(o.t_ms, 1) << " ms\n";
    return 0;
  }

  const std::vector<Outcome> all =
      RunAll(seed, static_cast<uint32_t>(count), static_cast<int>(jobs), family, router_buffers);
  const std::string tlm_set =
      router_buffers > 0 ? " --set chip.noc.router_buffer_packets=" + std::to_string(router_buffers) : "";
  if (!csv.empty()) {
    std::ostringstream out;
    out << "index,experiment,analytical_total_ps,tlm_total_ps,analytical_prefill_ps,tlm_prefill_ps,"
           "analytical_decode_step_ps,tlm_decode_step_ps,ratio_total,ratio_prefill,ratio_decode_step,"
           "contention,analytical_ms,tlm_ms,error\n";
    out.precision(6);
    for (const Outcome& o : all) {
      std::string err = o.error;
      for (char& ch : err)
        if (ch == ',' || ch == '"') ch = ';';
      out << o.index << "," << o.what << "," << o.a_total << "," << o.t_total << "," << o.a_prefill << ","
          << o.t_prefill << "," << o.a_decode << "," << o.t_decode << "," << o.total() << "," << o.prefill()
          << "," << o.decode() << "," << o.contention << "," << o.a_ms << "," << o.t_ms << "," << err << "\n";
    }
    try {
      config::WriteOutputFile(csv, out.str());
    } catch (const std::runtime_error& e) {
      std::cerr << "tpsim agree: " << e.what() << "\n";
      return 1;
    }
  }
  std::vector<const Outcome*> ok;
  for (const Outcome& o : all) {
    if (o.error == "-") ok.push_back(&o);
  }
  std::cout << "tpsim agree --seed " << seed << (family == Family::kMoe ? " --family moe" : "") << " --count "
            << count << (router_buffers > 0 ? " --router-buffers " + std::to_string(router_buffers) : "")
            << ": " << ok.size() << " experiments run on both engines";
  if (ok.size() != all.size()) std::cout << ", " << all.size() - ok.size() << " failed";
  std::cout << "\n\nanalytical / TLM     min      p5     p25  median     p75     p95     max  within 10%  "
               "within 25%\n";
  double a_ms = 0, t_ms = 0;
  for (const Outcome* o : ok) {
    a_ms += o->a_ms;
    t_ms += o->t_ms;
  }
  for (int phase = 0; phase < 3; ++phase) {
    std::vector<double> r;
    for (const Outcome* o : ok)
      r.push_back(phase == 0 ? o->total() : phase == 1 ? o->prefill() : o->decode());
    size_t in10 = 0, in25 = 0;
    for (double x : r) {
      in10 += std::abs(x - 1) <= 0.10;
      in25 += std::abs(x - 1) <= 0.25;
    }
    const char* names[] = {"total", "prefill", "decode step"};
    std::printf("%-16s %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f %7.3f  %9.1f%%  %9.1f%%\n", names[phase],
                Quantile(r, 0), Quantile(r, 0.05), Quantile(r, 0.25), Quantile(r, 0.5), Quantile(r, 0.75),
                Quantile(r, 0.95), Quantile(r, 1), r.empty() ? 0 : 100.0 * in10 / r.size(),
                r.empty() ? 0 : 100.0 * in25 / r.size());
  }
  // The warning (sim/analytical/links.h kContentionWarning) against what happened (total).
  size_t tp = 0, fp = 0, fn = 0, tn = 0;
  for (const Outcome* o : ok) {
    const bool warned = o->contention > kContentionWarning;
    const bool off = std::abs(o->total() - 1) > 0.10;
    tp += warned && off;
    fp += warned && !off;
    fn += !warned && off;
    tn += !warned && !off;
  }
  std::cout << "\ncontention warning (indicator > " << Fixed(kContentionWarning, 2)
            << ") vs total off by > 10%: " << tp << " true positives, " << fp << " false positives, " << fn
            << " missed, " << tn << " true negatives\n";
  std::vector<double> a_each, t_each;
  for (const Outcome* o : ok) {
    a_each.push_back(o->a_ms);
    t_each.push_back(o->t_ms);
  }
  std::cout << "engine time: analytical " << Fixed(ok.empty() ? 0 : a_ms / ok.size(), 1) << " ms, TLM "
            << Fixed(ok.empty() ? 0 : t_ms / ok.size(), 1) << " ms per experiment (mean); median "
            << Fixed(Quantile(a_each, 0.5), 1) << " ms and " << Fixed(Quantile(t_each, 0.5), 1) << " ms\n";
  std::vector<const Outcome*> sorted = ok;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Outcome* a, const Outcome* b) { return a->worst() > b->worst(); });
  std::cout << "\nworst cases (largest |ratio - 1| of total, prefill, decode step):\n";
  for (size_t i = 0; i < sorted.size() && i < worst; ++i) {
    const Outcome& o = *sorted[i];
    std::cout << "  #" << o.index << "  total " << Fixed(o.total(), 3) << ", prefill "
              << Fixed(o.prefill(), 3) << ", decode step " << Fixed(o.decode(), 3) << ", contention "
              << Fixed(o.contention, 2) << "  " << o.what << "\n      tpsim agree --seed " << seed
              << (family == Family::kMoe ? " --family moe" : "") << " --only " << o.index << " --emit agree-"
              << o.index << ".textproto && tpsim run agree-" << o.index << ".textproto --engine tlm"
              << tlm_set << "\n";
  }
  for (const Outcome& o : all) {
    if (o.error != "-") std::cout << "  #" << o.index << " failed: " << o.error << "\n";
  }
  if (ok.size() != all.size()) return 1;
  if (need_within10 >= 0) {
    size_t in10 = 0;
    double worst_total = 0;
    for (const Outcome* o : ok) {
      in10 += std::abs(o->total() - 1) <= 0.10;
      worst_total = std::max(worst_total, std::abs(o->total() - 1));
    }
    const double share = ok.empty() ? 1.0 : static_cast<double>(in10) / ok.size();
    const bool pass = share >= need_within10 && worst_total <= need_max;
    std::cout << "\nbounds: " << Fixed(100 * share, 1) << "% of totals within 10% (need "
              << Fixed(100 * need_within10, 1) << "%), worst " << Fixed(100 * worst_total, 1)
              << "% (need <= " << Fixed(100 * need_max, 1) << "%): " << (pass ? "met" : "NOT met") << "\n";
    if (!pass) return 1;
  }
  return 0;
}

}  // namespace tpsim::sim::agree
