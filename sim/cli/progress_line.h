#pragma once
// `tpsim run`'s progress line (moved out of main.cc, which had grown past 600 lines).

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace tpsim::cli {

// A progress line on stderr ("tpsim run: timing (tlm engine) 2.5 s") for runs that take
// longer than a second, on a terminal only (a file or pipe gets nothing, so outputs stay
// byte-identical); erased when the run ends.
class ProgressLine {
 public:
  explicit ProgressLine(const char* what) : what_(what), enabled_(::isatty(2) == 1) {
    if (enabled_) thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressLine() {
    if (!enabled_) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (shown_) std::fprintf(stderr, "\r\033[K");
  }
  void Stage(const char* stage) {
    std::lock_guard<std::mutex> lock(mu_);
    stage_ = stage;
  }

 private:
  void Loop() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) return;
    while (!done_) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "\r\033[K%s: %s %.1f s", what_, stage_, s);
      std::fflush(stderr);
      shown_ = true;
      cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return done_; });
    }
  }
  const char* what_;
  const char* stage_ = "loading";
  bool enabled_, done_ = false, shown_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace tpsim::cli
