#pragma once
// Microbenchmarks on any shipped chip, for `tpsim collectives`, `tpsim gemm` and
// `tpsim compare --chip`: one collective or one GEMM alone, as nccl-tests and a cuBLAS
// benchmark would measure it on a GPU node.
//
//   GPU-node chips (chip.gpu present): the GPU models of arch/gpu/ (NCCL-like collective
//     model, GPU GEMM model).
//   Other chips (wafers, meshes): tpsim's own collective lowering over cores 0..ranks-1
//     (mapping::CollectiveProgram, placement linear) timed by the analytical engine, and
//     one core's systolic GEMM (arch::Chip::GemmTime through arch::CoreGemm).
// So a wafer and a GPU node answer the same sizes and shapes in the same CSV columns.

#include <string>
#include <vector>

#include "arch/chip.h"
#include "sim/experiment.h"
#include "validate/compare_gpu.h"
#include "validate/gpu_csv.h"

namespace tpsim::sim {

// A chip by shipped name (configs/chips/NAME.textproto under config::ConfigDir()) or by
// path (contains '/' or ends in .textproto / .json), with --set overrides of chip fields
// ("gpu.tensor_efficiency=0.8"; a leading "chip." is accepted), validated.
// Throws std::invalid_argument for an unknown chip name (the message lists the shipped
// ones) and config::ConfigError for parse, override and validation errors.
arch::Chip LoadChipArg(const std::string& arg, const std::vector<Override>& sets);
std::vector<std::string> ShippedChipNames();

// One collective of `bytes` (nccl-tests' size) over `ranks`. `op`: all_reduce, all_gather,
// reduce_scatter, broadcast, all_to_all, send_recv; `algo`/`proto`: auto or a name (GPU:
// ring, tree, nvls, p2p / ll, ll128, simple; other chips: the mapping::CollectiveNames()
// registry, protocol auto only). The row's algorithm / protocol are the ones used
// (protocol "none" on chips without protocols). Throws std::invalid_argument with a
// sentence for an op, algorithm, protocol, rank count or size the chip cannot do.
validate::CollectiveRow PredictCollective(const arch::Chip& chip, const std::string& op, int ranks,
                                          uint64_t bytes, const std::string& algo, const std::string& proto);

// One GEMM on one core of `chip` (arch::CoreGemm); dtype bf16, fp16 or fp8. Throws
// std::invalid_argument for an unknown dtype or one the core lacks.
validate::GemmRow PredictGemm(const arch::Chip& chip, uint64_t m, uint64_t n, uint64_t k,
                              const std::string& dtype);

// `tpsim compare --chip`: a predictor that loads CHIP once and answers each measured row
// with PredictCollective / PredictGemm (its own op, ranks, size, algorithm, protocol).
validate::GpuPredictorFactory MicrobenchPredictorFactory();

// The --set overrides of `tpsim COMMAND` ("collectives", "gemm", or "compare" for `compare
// --chip`, whose files hold either) that its model of `gpu_node`'s kind of chip does not read, as
// "--set PATH is ignored: why": on a GPU node (chip.gpu) the NCCL-like collective model reads the
// gpu block and the GPU count (noc.nodes), the GEMM model the gpu block; on other chips
// a GEMM on one core reads no noc field. `--set noc.link_bandwidth_gbps=1e-300` on h200-sxm-8
// printed the same table, silently. The commands warn with them.
std::vector<std::string> UnreadChipSets(const std::string& command, bool gpu_node,
                                        const std::vector<Override>& sets);

}  // namespace tpsim::sim
