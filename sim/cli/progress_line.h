#pragma once
// `tpsim run`'s progress line (moved out of main.cc, which had grown past 600 lines).

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <thread>

namespace tpsim::cli {

// A progress line on stderr ("tpsim run: timing (tlm engine) 2.5 s", with ", 12000 of 32768
// decode steps" where the stage counts) for runs that take longer than a second, on a terminal
// only (a file or pipe gets nothing, so outputs stay byte-identical); erased when the run ends.
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
    total_.store(0, std::memory_order_relaxed);
    done_count_.store(0, std::memory_order_relaxed);
  }
  // How far the stage is (sim::RunOptions::on_count), from the thread that works: no lock.
  // `what` must outlive the stage (a literal).
  void Count(uint64_t done, uint64_t total, const char* what) {
    what_count_.store(what, std::memory_order_relaxed);
    done_count_.store(done, std::memory_order_relaxed);
    total_.store(total, std::memory_order_relaxed);
  }

 private:
  void Loop() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) return;
    while (!done_) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const uint64_t total = total_.load(std::memory_order_relaxed);
      if (total > 0) {
        std::fprintf(stderr, "\r\033[K%s: %s %.1f s, %llu of %llu %s", what_, stage_, s,
                     static_cast<unsigned long long>(done_count_.load(std::memory_order_relaxed)),
                     static_cast<unsigned long long>(total), what_count_.load(std::memory_order_relaxed));
      } else if (const uint64_t done = done_count_.load(std::memory_order_relaxed); done > 0) {
        // A count without a total (tpsim serve's iterations: the stream's length is not known
        // in iterations).
        std::fprintf(stderr, "\r\033[K%s: %s %.1f s, %llu %s", what_, stage_, s,
                     static_cast<unsigned long long>(done), what_count_.load(std::memory_order_relaxed));
      } else {
        std::fprintf(stderr, "\r\033[K%s: %s %.1f s", what_, stage_, s);
      }
      std::fflush(stderr);
      shown_ = true;
      cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return done_; });
    }
  }
  const char* what_;
  const char* stage_ = "loading";
  std::atomic<uint64_t> done_count_{0}, total_{0};
  std::atomic<const char*> what_count_{""};
  bool enabled_, done_ = false, shown_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace tpsim::cli
