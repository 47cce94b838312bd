#pragma once
// What `tpsim-validate --collectives` and `--gemms` measure and how they write it, the
// CPU-side half (tested without a GPU): the sweeps and the rows in the CSV formats of
// validate/gpu_csv.h, so a run on a GPU node drops into `tpsim compare --chip` unchanged.
//
//   collectives: all_reduce, all_gather, reduce_scatter over 2, 4 and 8 GPUs (those both the
//                machine and the chip have: CollectiveSweepRanks), 8 KiB .. 1 GiB by factors
//                of 2, bf16 buffers; time = the median of the timed repetitions of one call on
//                every GPU (NCCL's own algorithm choice: algorithm and protocol "auto");
//                algbw = size / time, busbw = algbw x nccl-tests' factor.
//   GEMMs:       cuBLAS bf16 GEMMs (fp32 accumulation) on GPU 0 over m = 1, 2, 4, ..., 8192 and
//                the LLM projection shapes of DefaultGemmShapes(); time = median kernel time.

#include <cstdint>
#include <string>
#include <vector>

#include "chip.pb.h"
#include "validate/gpu_csv.h"

namespace tpsim::validate {

// 2, 4 and 8, those <= devices (none below 2 devices).
std::vector<int> SweepRanks(int devices);
// 8 KiB .. 1 GiB by factors of 2 (18 sizes).
std::vector<uint64_t> SweepSizes();
// all_reduce, all_gather, reduce_scatter.
std::vector<std::string> SweepOps();

// One measured row: algbw = bytes / seconds (GB/s), busbw = algbw x nccl-tests' factor for `op`
// (all_reduce 2(n-1)/n; all_gather, reduce_scatter (n-1)/n). algorithm and protocol "auto".
CollectiveRow MeasuredCollectiveRow(const std::string& op, int ranks, uint64_t bytes, double seconds);
GemmRow MeasuredGemmRow(uint64_t m, uint64_t n, uint64_t k, const std::string& dtype, double seconds);

// The rank counts tpsim-validate --collectives sweeps on a machine with `devices` GPUs for a
// chip of `chip_gpus` GPUs (its cores, named `chip`). Every point is measured here and predicted
// for the chip, and tpsim predicts no collective over more GPUs than the chip has, so:
// SweepRanks(min(devices, chip_gpus)), with `note` saying which of the machine's rank counts the
// chip cut off (empty when none); under --dry-run (`dry_run`: nothing measured)
// SweepRanks(chip_gpus); with fewer than 2 devices (nothing measured) min(8, chip_gpus) alone.
// Empty for a chip of fewer than 2 GPUs: it has no collective.
std::vector<int> CollectiveSweepRanks(int devices, bool dry_run, int chip_gpus, const std::string& chip,
                                      std::string* note);

// Empty for a GPU node (a chip with a `gpu` block, as the rest of tpsim defines it);
// otherwise the warning tpsim-validate prints before it maps such a chip's cores to GPUs,
// naming the chip and its noc.topology.
std::string GpuNodeWarning(const config::Chip& chip);

// Projection shapes (n, k) of Llama-3.1-8B and Llama-3.1-70B (configs/models/) at TP 1, 2, 4, 8:
// fused QKV ((heads + 2 kv_heads) x head_dim / TP, hidden), O (hidden, heads x head_dim / TP),
// fused gate+up (2 x intermediate / TP, hidden), down (hidden, intermediate / TP); kept when
// 1024 <= n, k <= 28672 and deduplicated; times m = 1, 2, 4, ..., 8192. dtype bf16.
std::vector<GemmShapeRow> DefaultGemmShapes();

// The CSV text: '#' lines naming what ran (`provenance`, one line per entry), the header, rows.
std::string CollectiveCsvText(const std::vector<std::string>& provenance,
                              const std::vector<CollectiveRow>& rows);
std::string GemmCsvText(const std::vector<std::string>& provenance, const std::vector<GemmRow>& rows);

}  // namespace tpsim::validate
