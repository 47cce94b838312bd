#include "configs/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <stdexcept>

#include "configs/load.h"

namespace tpsim::config {

namespace {

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

bool IsUtf8(std::string_view s, size_t* bad) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8Length(s, i);
    if (n == 0) {
      if (bad) *bad = i;
      return false;
    }
    i += n;
  }
  return true;
}

uint64_t ParseCount(std::string_view text, uint64_t max) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  // from_chars takes no sign, blank or '+' for an unsigned type, and fails on empty text.
  if (ec != std::errc() || ptr != end || v > max)
    throw std::invalid_argument("'" + Clip(text) + "' is not a whole number in 0 .. " + std::to_string(max));
  return v;
}

double ParseNumber(std::string_view text) {
  // from_chars takes a '-' but not a '+'; "inf" and "nan" parse, and are refused below.
  const std::string_view digits = text.starts_with('+') ? text.substr(1) : text;
  const bool signed_twice =
      digits.size() < text.size() && (digits.starts_with('+') || digits.starts_with('-'));
  double v = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, v, std::chars_format::general);
  if (signed_twice || ec != std::errc() || ptr != end || !std::isfinite(v))
    throw std::invalid_argument("'" + Clip(text) + "' is not a finite number");
  return v;
}

std::string OptionAsValue(std::string_view word) {
  if (!word.starts_with("--")) return "";
  return "needs a value, got the option '" + Clip(word, 80) + "' (a file of that name is ./" +
         Clip(word, 80) + ")";
}

bool FlushStandardOutput() {
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  return flushed && !std::ferror(stdout) && std::cout.good();
}

std::string GivenTwice(std::map<std::string, std::string>* given, const std::string& flag,
                       const std::string& value) {
  if (flag == "--set") return "";
  const auto [it, fresh] = given->emplace(flag, value);
  if (fresh) return "";
  return "given twice ('" + Clip(it->second, 80) + "' and '" + Clip(value, 80) + "'): give it once";
}

std::string Clip(std::string_view s, size_t max) {
  std::string out;
  size_t shown = 0, i = 0;
  for (; i < s.size() && shown < max; ++shown) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = Utf8Length(s, i);
    if (n == 1 && c >= 0x20 && c != 0x7F) {
      out += static_cast<char>(c);
    } else if (n > 1) {
      out.append(s.substr(i, n));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      static const char* kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    i += n ? n : 1;
  }
  if (i < s.size()) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

Location LocationIn(std::string_view text, size_t pos, const std::string& file) {
  Location loc{file, 1, 1};
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.col = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++loc.col;  // columns count characters, not UTF-8 continuation bytes
    }
  }
  return loc;
}

std::string ReadInputFile(const std::string& path, const Location& referrer, const std::string& field,
                          size_t max_bytes) {
  auto refuse = [&](const std::string& rule) { return ConfigError(Diag{referrer, field, Clip(path), rule}); };
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw refuse(errno == ENOENT ? std::string("file not found") : "cannot open the file (" + Errno() + ")");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw refuse("cannot read the file (" + Errno() + ")");
  if (S_ISDIR(st.st_mode)) throw refuse("is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    throw refuse("is not a regular file (a FIFO, device or socket); inputs must be files");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw refuse("is " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                 std::to_string(max_bytes) + " bytes for this kind of input");
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  for (;;) {
    if (got == text.size()) {
      if (text.size() > max_bytes) break;
      text.resize(std::min(max_bytes + 1, text.size() + 4096));  // the file grew while read
    }
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw refuse("cannot read the file (" + Errno() + ")");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  if (text.size() > max_bytes) {
    throw refuse("is more than the limit of " + std::to_string(max_bytes) + " bytes for this kind of input");
  }
  size_t bad = 0;
  if (!IsUtf8(text, &bad)) {
    throw ConfigError(Diag{LocationIn(text, bad, path), field, Clip(text.substr(bad, 4), 4),
                           "is not UTF-8 text (inputs are UTF-8)"});
  }
  return text;
}

std::string NearestName(std::string_view name, const std::vector<std::string>& valid) {
  if (name.size() > 64 || name.empty()) return "";
  std::string best;
  size_t best_d = std::max<size_t>(1, name.size() / 3) + 1;
  std::vector<size_t> prev, cur;
  for (const std::string& v : valid) {
    if (v.size() > name.size() + best_d || name.size() > v.size() + best_d) continue;
    prev.resize(v.size() + 1);
    cur.resize(v.size() + 1);
    for (size_t j = 0; j <= v.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= name.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= v.size(); ++j) {
        size_t sub = prev[j - 1] + (name[i - 1] == v[j - 1] ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      }
      std::swap(prev, cur);
    }
    if (prev[v.size()] < best_d) {
      best_d = prev[v.size()];
      best = v;
    }
  }
  if (!best.empty() || name.size() < 3) return best;
  // None close: the one name that starts with it (a shipped chip's short name: h100 for
  // h100-sxm-8), if only one does.
  for (const std::string& v : valid)
    if (v.size() > name.size() && v.compare(0, name.size(), name) == 0) {
      if (!best.empty()) return "";
      best = v;
    }
  return best;
}

std::string DecimalsOrDigits(double v, int decimals) {
  char b[64];
  if (v == 0 || (std::fabs(v) >= std::pow(10.0, -decimals) && std::fabs(v) < 1e12))
    std::snprintf(b, sizeof b, "%.*f", decimals, v);
  else
    std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string JoinNames(const std::vector<std::string>& names, std::string_view sep) {
  std::string s;
  for (const std::string& n : names) {
    if (!s.empty()) s += sep;
    s += n;
  }
  return s;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& valid) {
  std::string n = NearestName(name, valid);
  return n.empty() ? "" : ", did you mean " + n + "?";
}

namespace {

// The temporary files of the OutputFiles open in this process, for the handler of SIGINT,
// SIGTERM and SIGHUP to remove: a fixed array of fixed buffers, as a signal handler may only
// read memory and call async-signal-safe functions (unlink, getpid, signal, raise). A path that
// does not fit, or a 65th file open at once, is not listed (and only left behind by a signal).
constexpr int kTempSlots = 64;
constexpr size_t kTempPathBytes = 4096;
struct TempSlot {
  // 0 free, 1 taken (path being written or cleared), 2 listed: the handler unlinks `path`.
  std::atomic<int> state{0};
  std::atomic<pid_t> owner{0};  // the process that made it: a forked child before exec is not
  char path[kTempPathBytes] = {};
};
TempSlot g_temp_slots[kTempSlots];
constexpr int kTempSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::mutex g_temp_install;

extern "C" void RemoveTempFilesAndDie(int sig) {
  const int saved = errno;
  const pid_t self = ::getpid();
  for (TempSlot& s : g_temp_slots)
    if (s.state.load(std::memory_order_acquire) == 2 && s.owner.load(std::memory_order_relaxed) == self)
      ::unlink(s.path);
  // Again with the default action, which ends the process as the signal would have (exit status
  // 128 + sig): `sig` is blocked in its handler, so it is delivered as this returns.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  errno = saved;
}

// Installs RemoveTempFilesAndDie for each signal whose action is the default. One that has a
// handler (the sweep runner's, which stops gracefully and unwinds) or is ignored keeps it; the
// sweep runner, installing its own over this one, restores it when it ends.
void InstallTempSignalHandlers() {
  std::lock_guard<std::mutex> lock(g_temp_install);
  for (const int sig : kTempSignals) {
    struct sigaction cur {};
    if (::sigaction(sig, nullptr, &cur) != 0) continue;
    if ((cur.sa_flags & SA_SIGINFO) != 0 || cur.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = RemoveTempFilesAndDie;
    ::sigemptyset(&sa.sa_mask);
    for (const int other : kTempSignals) ::sigaddset(&sa.sa_mask, other);
    ::sigaction(sig, &sa, nullptr);
  }
}

// Makes the temporary file of template `*tmp` (mkstemp's "...XXXXXX"), listed for the signal
// handler before it exists: mkstemp fills in the name in the slot's own buffer, so that there is
// no moment at which the file exists and the handler does not know it (a signal there left it
// behind). *tmp becomes its name (absolute where it is listed). Returns the descriptor (-1 with
// errno on failure) and the slot in *slot (-1 when not listed: a path too long, 64 files open).
int MakeListedTemp(std::string* tmp, int* slot) {
  *slot = -1;
  std::error_code ec;
  std::string abs = std::filesystem::absolute(*tmp, ec).string();  // the handler's cwd may differ
  if (ec) abs = *tmp;
  if (abs.size() < kTempPathBytes) {
    InstallTempSignalHandlers();
    for (int i = 0; i < kTempSlots && *slot < 0; ++i) {
      int expected = 0;
      if (g_temp_slots[i].state.compare_exchange_strong(expected, 1)) *slot = i;
    }
  }
  if (*slot < 0) return ::mkstemp(tmp->data());
  TempSlot& ts = g_temp_slots[*slot];
  std::memcpy(ts.path, abs.c_str(), abs.size() + 1);
  ts.owner.store(::getpid(), std::memory_order_relaxed);
  // Listed while mkstemp writes the name (the handler may unlink the template or a name
  // half written: none exists).
  ts.state.store(2, std::memory_order_release);
  const int fd = ::mkstemp(ts.path);
  if (fd < 0) {
    const int saved = errno;
    ts.state.store(0, std::memory_order_release);
    *slot = -1;
    errno = saved;
    return -1;
  }
  *tmp = ts.path;
  return fd;
}

void UnlistTempFile(int* slot) {
  if (*slot < 0) return;
  g_temp_slots[*slot].state.store(0, std::memory_order_release);
  *slot = -1;
}

// The descriptor a path names when it is one of this process's open files (/dev/stdout ->
// /proc/self/fd/1, /dev/fd/2, /proc/PID/fd/N of this process), else -1.
int OpenFileNumber(const std::string& path) {
  std::string_view rest = path;
  const std::string self = "/proc/" + std::to_string(::getpid()) + "/fd/";
  bool found = false;
  for (const std::string_view dir :
       {std::string_view("/proc/self/fd/"), std::string_view("/proc/thread-self/fd/"),
        std::string_view("/dev/fd/"), std::string_view(self)}) {
    if (rest.starts_with(dir)) {
      rest.remove_prefix(dir.size());
      found = true;
      break;
    }
  }
  int fd = -1;
  if (!found || rest.empty()) return -1;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), fd);
  return ec == std::errc() && end == rest.data() + rest.size() && fd >= 0 ? fd : -1;
}

// Where a chain of symbolic links from `path` ends (the path itself when it is no link), for
// OutputFile to replace that file, not the link. Sets *fd to the descriptor where a link of the
// chain names one of this process's open files (OpenFileNumber). At most 40 links, as the kernel
// follows; a longer chain (a loop) is returned where it stopped, and fails when opened.
std::string FollowLinks(const std::string& path, int* fd) {
  std::string at = path;
  for (int hop = 0; hop < 40; ++hop) {
    if ((*fd = OpenFileNumber(at)) >= 0) return at;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    std::string to(4096, '\0');
    const ssize_t n = ::readlink(at.c_str(), to.data(), to.size());
    if (n <= 0 || static_cast<size_t>(n) >= to.size()) return at;
    to.resize(static_cast<size_t>(n));
    const std::filesystem::path dir = std::filesystem::path(at).parent_path();
    at = to.starts_with('/') || dir.empty() ? to : (dir / to).string();
  }
  return at;
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  // /dev/stdout, /dev/fd/N and /proc/self/fd/N are this process's open files: written through a
  // copy of the descriptor, at its offset, as the process's own writes to it (as root a link
  // /dev/stdout was replaced by a plain file; otherwise it failed, "cannot create a temporary
  // file in /dev"). A symbolic link is followed: the file it leads to is replaced, the link kept
  // (it was replaced by a plain file and its target left as it was).
  int open_fd = -1;
  const std::string target = FollowLinks(path_, &open_fd);
  if (open_fd >= 0) {
    if (open_fd == STDOUT_FILENO) std::cout.flush();  // what the process wrote to it comes first
    fd_ = ::fcntl(open_fd, F_DUPFD_CLOEXEC, 0);
    if (fd_ < 0) throw Fail(Errno() + " (descriptor " + std::to_string(open_fd) + " of this process)");
    return;
  }
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    throw Fail("its symbolic links loop, or are more than 40 in a chain");
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw Fail("is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or a FIFO (/dev/null, /dev/stdout): written in place, never replaced.
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw Fail(Errno());
    return;
  }
  target_ = target;
  std::filesystem::path p(target_);
  const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  tmp_ = dir + "/." + p.filename().string() + ".tpsim-tmp-XXXXXX";
  fd_ = MakeListedTemp(&tmp_, &slot_);
  if (fd_ < 0) {
    tmp_.clear();
    throw Fail("cannot create a temporary file in " + Clip(dir) + " (" + Errno() + ")");
  }
  mode_t mode;
  if (exists) {
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  if (::fchmod(fd_, mode) != 0) throw Fail(Errno());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  UnlistTempFile(&slot_);
}

std::runtime_error OutputFile::Fail(const std::string& why) const {
  return std::runtime_error("cannot write " + Clip(path_) + ": " + why);
}

void OutputFile::Write(std::string_view data) {
  if (fd_ < 0) throw Fail("already closed");
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Fail(n < 0 ? Errno() : "nothing written");
    done += static_cast<size_t>(n);
  }
}

void OutputFile::Commit() {
  if (fd_ < 0) throw Fail("already closed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Fail(Errno());
  if (!tmp_.empty()) {
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) throw Fail(Errno());
    tmp_.clear();
    UnlistTempFile(&slot_);  // after the rename: a signal between the two unlinks nothing
  }
}

void WriteOutputFile(const std::string& path, std::string_view data) {
  OutputFile f(path);
  f.Write(data);
  f.Commit();
}

bool HasExtension(std::string_view path, std::string_view ext) {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (name.size() < ext.size()) return false;
  const std::string_view tail = name.substr(name.size() - ext.size());
  return std::equal(tail.begin(), tail.end(), ext.begin(), ext.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

void CheckOutputWritable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    // A device or a FIFO: written in place at the end; opened here, a FIFO would block.
    return;
  }
  OutputFile probe(path);  // never committed: its temporary file is removed, the target untouched
}

void CheckOutputsWritable(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [flag, path] : outputs)
    if (!path.empty()) CheckOutputWritable(path);
}

void CheckStorePath(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  // A FIFO or a device, which CheckOutputWritable lets an output write in place, holds no
  // SQLite database.
  std::error_code ec;
  const auto kind = std::filesystem::status(path, ec).type();
  if (!ec && kind != std::filesystem::file_type::regular && kind != std::filesystem::file_type::directory &&
      kind != std::filesystem::file_type::not_found)
    throw ConfigError(Diag{kCommandLine, flag, Clip(path),
                           "is not a regular file (a FIFO, device or socket): the store is a SQLite file"});
  try {
    CheckOutputWritable(path);
  } catch (const std::runtime_error& e) {
    std::string why = e.what();
    const std::string head = "cannot write " + Clip(path) + ": ";
    if (why.starts_with(head)) why = why.substr(head.size());
    throw ConfigError(Diag{kCommandLine, flag, Clip(path), "cannot create the SQLite store there: " + why});
  }
}

std::string FindMatplotlibPython(std::string* warning) {
  auto imports = [](const std::string& py) {
    return RunChildProcess({py, "-c", "import matplotlib"}, kChildDevNull, kChildDevNull) == 0;
  };
  const char* env = std::getenv("TPSIM_PYTHON");
  if (env && *env && imports(env)) return env;
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    if (!imports(py)) continue;
    if (env && *env && warning)
      *warning = "TPSIM_PYTHON=" + Clip(env) + " cannot import matplotlib (or does not run); using " + py;
    return py;
  }
  return "";
}

int RunChildProcess(const std::vector<std::string>& argv, int stdout_fd, int stderr_fd) {
  if (argv.empty()) return -1;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // fork + exec rather than posix_spawn, so that the child can ask to die with this process
  // (as the sweep runner's point processes do). Only async-signal-safe calls after fork.
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    int null_fd = -1;
    if (stdout_fd == kChildDevNull || stderr_fd == kChildDevNull) {
      null_fd = ::open("/dev/null", O_WRONLY);
      if (null_fd < 0) ::_exit(126);
    }
    if (stdout_fd == kChildDevNull) stdout_fd = null_fd;
    if (stderr_fd == kChildDevNull) stderr_fd = null_fd;
    if (stdout_fd >= 0 && ::dup2(stdout_fd, STDOUT_FILENO) < 0) ::_exit(126);
    if (stderr_fd >= 0 && ::dup2(stderr_fd, STDERR_FILENO) < 0) ::_exit(126);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string EffectivePartition(const std::string& value) {
  return value.empty() ? std::string(kDefaultPartition) : value;
}
std::string EffectivePlacement(const std::string& value) {
  return value.empty() ? std::string(kDefaultPlacement) : value;
}
std::string EffectiveCollective(const std::string& value) {
  return value.empty() ? std::string(kDefaultCollective) : value;
}

namespace {

// Whether paths `a` and `b` name the same file (after resolving links; a file that does not
// exist yet is compared by its absolute path).
bool SameFile(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  return fs::weakly_canonical(fs::absolute(a, ec), ec) == fs::weakly_canonical(fs::absolute(b, ec), ec);
}

}  // namespace

void CheckOutputNotInput(const std::string& flag, const std::string& out,
                         const std::vector<std::string>& inputs) {
  for (const std::string& in : inputs) {
    if (in.empty() || !SameFile(out, in)) continue;
    throw ConfigError(Diag{kCommandLine, flag, Clip(out),
                           "names an input of this run (" + Clip(in) + "); write the output elsewhere"});
  }
}

void CheckOutputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                  const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto& [flag, out] = outputs[i];
    if (out.empty()) continue;
    CheckOutputNotInput(flag, out, inputs);
    for (size_t j = 0; j < i; ++j) {
      if (outputs[j].second.empty() || !SameFile(out, outputs[j].second)) continue;
      throw ConfigError(
          Diag{kCommandLine, flag, Clip(out),
               "names the same file as " + outputs[j].first + "; give each output its own file"});
    }
  }
}

}  // namespace tpsim::config
