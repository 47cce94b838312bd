// Offered-load driver for Ramulator 2.0 (built by validate/dram/ramulator_reference.sh
// against a Ramulator 2.0 checkout outside the tpsim tree; not part of the tpsim build).
//
//   ramulator_load CONFIG.yaml PATTERN LOAD REQUESTS SEED
//
// Sends REQUESTS read requests of one DRAM transaction each to the memory system of
// CONFIG (a Ramulator 2.0 YAML file; its Frontend must be GEM5, a passive frontend),
// LOAD x peak bytes per ns on average, LOAD a fraction
// of the peak bandwidth (1 or more: as fast as the controllers accept; below 1, each of
// the ceil(peak x clock / transaction) transaction slots of a memory clock is offered
// with probability LOAD x peak x clock / transaction / slots). PATTERN is
// `stream` (consecutive addresses) or `random` (uniform over the capacity, seeded).
// A request the controller refuses (queue full) is retried every cycle (the 256 oldest
// waiting ones are offered each cycle, in creation order); its latency counts from its
// creation. Prints one line:
//   tx_bytes T peak_gbps P offered_gbps O achieved_gbps A latency_ns L p50_ns M
// over the requests after the first 10% (warm-up): achieved = their bytes over the
// time from the first one's creation to the last one's return; latency = mean
// creation -> data return.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "base/base.h"
#include "base/config.h"
#include "base/request.h"
#include "dram/dram.h"
#include "frontend/frontend.h"
#include "memory_system/memory_system.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s CONFIG.yaml stream|random LOAD REQUESTS SEED\n", argv[0]);
    return 2;
  }
  const std::string pattern = argv[2];
  const double load = std::atof(argv[3]);
  const long requests = std::atol(argv[4]);
  const uint64_t seed = std::strtoull(argv[5], nullptr, 10);
  if ((pattern != "stream" && pattern != "random") || !(load > 0) || requests < 10) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }

  YAML::Node config = Ramulator::Config::parse_config_file(argv[1], {});
  auto* frontend = Ramulator::Factory::create_frontend(config);
  auto* memory = Ramulator::Factory::create_memory_system(config);
  frontend->connect_memory_system(memory);
  memory->connect_frontend(frontend);

  // Geometry from the YAML: transaction bytes and peak bandwidth of all channels.
  const YAML::Node dram = config["MemorySystem"]["DRAM"];
  const int rate_mts = dram["timing"]["rate"].as<int>();
  const int width = dram["org"]["channel_width"].as<int>();
  const int channels = dram["org"]["channel"].as<int>();
  // Not Ramulator's: the driver's own section (the device model's internal prefetch
  // and the capacity random addresses are drawn from).
  const int prefetch = config["Driver"]["internal_prefetch"].as<int>();
  const int64_t tx_bytes = static_cast<int64_t>(prefetch) * width / 8;
  const double peak_gbps = static_cast<double>(rate_mts) * width / 8 / 1000 * channels;  // GB/s
  const double tck_ns = 2000.0 / rate_mts;  // memory cycle (DDR: two transfers per cycle)
  const double capacity = config["Driver"]["capacity_bytes"].as<double>();

  // Up to `slots` transactions fit in one memory clock at peak; each is offered with
  // probability LOAD (a Bernoulli process per slot).
  const int slots = static_cast<int>(std::ceil(peak_gbps * tck_ns / static_cast<double>(tx_bytes)));
  const double per_slot = std::min(1.0, load * peak_gbps * tck_ns / static_cast<double>(tx_bytes) / slots);
  std::mt19937_64 rng(seed);
  auto uniform01 = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };

  constexpr size_t kWindow = 256;
  std::vector<int64_t> created(requests, -1), returned(requests, -1);
  std::deque<long> waiting;  // created, not yet accepted
  long next = 0, done = 0;
  int64_t clk = 0;
  uint64_t stream_addr = 0;
  std::vector<uint64_t> addr(requests);
  for (long i = 0; i < requests; ++i) {
    if (pattern == "stream") {
      addr[i] = stream_addr;
      stream_addr += tx_bytes;
    } else {
      addr[i] = static_cast<uint64_t>(uniform01() * (capacity / tx_bytes)) * tx_bytes;
    }
  }
  while (done < requests) {
    for (int slot = 0; slot < slots && next < requests; ++slot) {
      // Saturating: keep kWindow requests waiting.
      if (load >= 1 ? waiting.size() < kWindow : uniform01() < per_slot) {
        created[next] = clk;
        waiting.push_back(next++);
      }
    }
    // The oldest kWindow waiting requests are offered each cycle, so that a full queue
    // at one channel does not hold back requests for the others.
    std::deque<long> refused;
    for (size_t k = 0; k < kWindow && !waiting.empty(); ++k) {
      const long id = waiting.front();
      waiting.pop_front();
      auto cb = [&returned, &done, &clk, id](Ramulator::Request&) {
        returned[id] = clk;
        ++done;
      };
      if (!frontend->receive_external_requests(Ramulator::Request::Type::Read, addr[id], 0, cb)) {
        refused.push_back(id);
      }
    }
    waiting.insert(waiting.begin(), refused.begin(), refused.end());
    memory->tick();
    ++clk;
    if (clk > 2000000000LL) {
      std::fprintf(stderr, "no progress\n");
      return 1;
    }
  }

  const long first = requests / 10;
  int64_t t0 = created[first], t1 = 0;
  double lat_sum = 0;
  std::vector<int64_t> lats;
  for (long i = first; i < requests; ++i) {
    t1 = std::max(t1, returned[i]);
    lat_sum += static_cast<double>(returned[i] - created[i]);
    lats.push_back(returned[i] - created[i]);
  }
  std::sort(lats.begin(), lats.end());
  const double n = static_cast<double>(requests - first);
  const double achieved = n * static_cast<double>(tx_bytes) / (static_cast<double>(t1 - t0) * tck_ns);
  std::printf(
      "tx_bytes %lld peak_gbps %.3f offered_gbps %.3f achieved_gbps %.3f latency_ns %.3f p50_ns %.3f\n",
      static_cast<long long>(tx_bytes), peak_gbps, load >= 1 ? peak_gbps : load * peak_gbps, achieved,
      lat_sum / n * tck_ns, static_cast<double>(lats[lats.size() / 2]) * tck_ns);
  return 0;
}
