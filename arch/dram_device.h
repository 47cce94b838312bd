// A bank-level DRAM device and controller model (plain C++, cycle-stepped), and the
// offered-load driver that checks it against Ramulator 2.0 (validate/dram/).
//
// Device: channels x pseudo channels x bank groups x banks x rows x columns, JEDEC
// timings in nanoseconds rounded up to the device clock the way Ramulator 2.0 does
// (JEDEC_rounding: cycles = (ps * 1000 / tCK_ps + 974) / 1000, tCK_ps = 1e6 / (rate / 2)).
// Controller, one per channel, the structure of Ramulator 2.0's Generic controller:
//   - a read queue of queue_depth requests (32, Ramulator's, which accepts one more)
//     and an active queue (requests whose row it opened) served first, so an opened
//     row is not closed before its read;
//   - FR-FCFS: the request whose next command (ACT, PRE or RD for its bank's state)
//     is ready wins, then the oldest; a PRE that would close a row an active
//     request waits for is not issued;
//   - open-row policy (a row stays open until another row of the bank is needed);
//   - command bus: kShared issues at most one command per channel per clock (what
//     Ramulator 2.0 models); kSplit one row command (ACT, PRE, REF) and one column
//     command (RD) per clock, HBM3's separate row and column buses. An ACT holds the
//     channel's row commands for 2 clocks either way (HBM3's two-clock ACT);
//   - all-bank refresh every tREFI when `refresh` is set: the channel closes its banks
//     (PREA after tRAS / tRTP), refreshes (tRP later) and opens no row for tRFC.
//     Ramulator 2.0's AllBank refresh manager issues none on its HBM3 model (it loops
//     over a "rank" level that model does not have), so the cross-check runs without.
// Reads only (tpsim's memory tasks are modelled as streams; the cross-check reads).
// Address mapping MOP4CLXOR (Ramulator 2.0): 2 column bits (4 consecutive
// transactions in a row), then channel, pseudo channel, bank group and bank bits,
// the other column bits, the row; each of channel, pseudo channel, bank group, bank
// and row is XORed with the next slice of the column bits.
// Deterministic: same spec and arguments, same result.
#ifndef TPSIM_ARCH_DRAM_DEVICE_H_
#define TPSIM_ARCH_DRAM_DEVICE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpsim::arch::dram {

struct Organisation {
  int channels = 1;
  int pseudo_channels = 2;
  int bank_groups = 4;
  int banks = 4;  // per bank group
  int rows = 32768;
  int columns = 64;  // column addresses of channel_width bits
  int channel_width_bits = 128;
  int prefetch = 2;  // a transaction = prefetch x channel_width bits
};

// Nanoseconds unless named n* (clocks).
struct Timing {
  int rate_mts = 6400;  // data rate per pin; the clock is rate / 2
  int nBL = 2;          // burst, clocks
  int nCCDS = 2;        // column to column, other bank group, clocks
  double tCCDL = 0, tCL = 0, tRCDRD = 0, tRP = 0, tRAS = 0, tRC = 0, tRTPS = 0, tRTPL = 0;
  double tRRDS = 0, tRRDL = 0, tFAW = 0, tRFC = 0, tREFI = 0;
};

enum class CommandBus { kShared, kSplit };

struct DeviceSpec {
  std::string name;
  Organisation org;
  Timing timing;
  CommandBus bus = CommandBus::kShared;
  bool refresh = false;
  int queue_depth = 32;     // read (and active) queue entries per channel: Ramulator 2.0's 32
  double PeakGbps() const;  // all channels
  int TransactionBytes() const { return org.prefetch * org.channel_width_bits / 8; }
  double ClockNs() const { return 2000.0 / timing.rate_mts; }
  uint64_t CapacityBytes() const;
};

// The devices of validate/dram/ramulator/*.yaml, with the JEDEC HBM3-6400 timings
// (JESD238) those files give Ramulator, Ramulator's behaviour (one command bus, no
// refresh): "hbm3-6400" (one stack, 8 channels, 819.2 GB/s), "stacked-dram-60"
// (one channel at 3.75 Gb/s, 60 GB/s). nullptr for another name.
const DeviceSpec* FindPreset(std::string_view name);
std::vector<std::string> PresetNames();

// One spec check: "" when the spec is usable, else the first problem.
std::string CheckSpec(const DeviceSpec& spec);

enum class Pattern { kStream, kRandom };

struct LoadResult {
  double peak_gbps = 0, offered_gbps = 0, achieved_gbps = 0;
  double latency_ns = 0, p50_ns = 0;  // creation -> data return, after the warm-up
};

// validate/dram/ramulator_load.cc's experiment on this model: `requests` reads of one
// transaction, `load` x peak offered (a Bernoulli process per transaction slot of a
// clock; 1 or more: 256 kept waiting), streaming or seeded uniform addresses, the
// 256 oldest waiting ones offered each clock; the first 10% are warm-up.
LoadResult RunOfferedLoad(const DeviceSpec& spec, Pattern pattern, double load, long requests, uint64_t seed);

// Accepted streaming bandwidth at saturation over the peak, (0, 1]: what a chip memory
// with `device` set uses as its efficiency. Computed once per spec (memoised, thread-safe).
double StreamingEfficiency(const DeviceSpec& spec);

}  // namespace tpsim::arch::dram

#endif  // TPSIM_ARCH_DRAM_DEVICE_H_
