#pragma once
// Lowering a workload to a Program: layers split into pipeline stages, each stage a TP
// group placed on its own region of cores; every op partitioned (mapping/partition/),
// layouts converted by collectives (mapping/collective/), ranks placed on cores
// (mapping/placement/).

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "arch/chip.h"
#include "configs/load.h"
#include "mapping.pb.h"
#include "mapping/program.h"
#include "model.pb.h"
#include "workload.pb.h"

namespace tpsim::mapping {

// What Lower and LowerIteration build besides the tasks.
struct LowerOptions {
  // Program::func (FuncTensors, FuncOps, collective pack/unpack copies, outputs) and
  // Task::func: the data semantics that only the functional executor (RunFunctional) and
  // validate/ (launch plans, numerics) read. Off, func stays empty and every Task::func -1;
  // the tasks, ops and collectives are the same either way, except on a GPU-node chip: there
  // the functional Program is what tpsim-validate's harness launches (q, k, v, gate and up
  // GEMMs apart, collectives and MoE all-to-alls as transfers), and the timing Program what
  // inference engines run (fused GEMMs, NCCL collective kernels: gemm_emitter.cc,
  // layout_convert.h, moe_pass.h).
  bool functional = false;
  // Lower only these decode steps (1-based, increasing, each <= workload.decode_steps) instead
  // of all; empty: every step. Each one has its own context, and the first lowered one depends
  // on the prefill's output (on nothing with skip_prefill); the memory plan is the whole
  // workload's (sim/step_reuse.h lowers a few steps and times the rest from them).
  std::vector<uint32_t> decode_steps_only{};
  bool skip_prefill = false;  // lower no prefill (only with decode_steps_only)
  // The layers the memory plan sizes for (0: the lowered ones): where weights and the KV
  // cache live follows the layers each stage really holds, so a few lowered layers that
  // stand for more (tpsim serve's mapping.serving.layers_simulated, scaled to the model's)
  // are timed with the residency of the whole model's stages: weights that do not fit SRAM
  // for those are streamed, though one lowered layer's shards would fit.
  uint32_t plan_layers = 0;
  // Told (passes lowered, passes) after each pass (the prefill, a decode step), for a progress
  // line; may be empty.
  std::function<void(uint64_t, uint64_t)> on_pass{};
};

// Lowers the workload (prefill of all simulated layers, then each decode step) to a
// Program. Memory: weights stay in SRAM when every core's shards of its stage fit
// (mapping.weights "auto"; "sram" requires it, "dram" streams them), the KV cache when it fits
// beside them; each compute task's activations, partial sums and streamed or rotating
// weight shards beyond the remaining SRAM are spilled (write + read-back memory tasks). Throws
// config::ConfigError when ValidateMapping finds problems, and std::invalid_argument for layers it cannot map
// (MoE layers with LowerOptions::functional). MoE layers: mapping/moe_pass.h.
Program Lower(const arch::Chip& chip, const config::Model& model, const config::Workload& wl,
              const config::Mapping& m, const LowerOptions& opts = {});

// The compute tasks of attention on one rank for one span of rows (mapping/attention.cc):
// `batch` = query heads x sequences, each sequence's `s` new tokens attending to `ctx` context
// rows, head_dim `hd`, `dtype_bytes` per element. `stack` query heads that share a KV head
// (GQA; StackedHeads) are stacked into M, as GQA kernels do: QK^T and PV are batch / stack
// GEMMs of stack x s rows, so K and V are read once per KV head, not once per query head
// (`stack` divides the heads of each sequence). Lowering emits exactly these shapes; the
// serving skeletons (sim/serving/skeleton.h) time chunks with them without lowering.
struct AttentionShapes {
  ComputeShape scores, softmax, pv;
};
AttentionShapes AttentionSpanShapes(uint64_t batch, uint64_t s, uint64_t ctx, uint64_t hd,
                                    uint64_t dtype_bytes, uint64_t stack = 1);

// How many of a rank's query heads [h0, h1) lowering stacks per attention GEMM when `group`
// query heads share each KV head: gcd(h1 - h0, group, h0), the largest stack that splits the
// rank's heads into equal runs of heads sharing one KV head; 1 without GQA.
uint64_t StackedHeads(uint64_t h0, uint64_t h1, uint64_t group);

// Stage-two checks of the mapping against chip, model and workload. Diags name fields
// under "mapping.". Weights pinned in SRAM (mapping.weights sram) must fit for the workload's
// layers, or for all of the model's when it has requests (tpsim serve plans those).
void ValidateMapping(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                     const config::Workload& wl, const config::SourceMap& locs,
                     std::vector<config::Diag>* diags);

// The mapping fields set in `m` that nothing reads, each with why (`tpsim run` warns; they were
// ignored silently): seed without placement random, placement_file without placement file,
// grid_rows and mn_2d_weights where neither mapping.partition nor an override is mn_2d,
// enforce_eager on a chip that is not a GPU node (chip.gpu), weights sram on one (its weights are
// in HBM), serving (read by tpsim serve), and
// on a model with experts moe.zipf_s and moe.seed without routing zipf, moe.routing_file without
// routing trace, and overrides of the dense MLP's classes (gate_up, down) where every layer is an
// MoE block; on a model without experts, the whole mapping.moe (not listed field by field).
struct UnreadField {
  std::string field, why;
};

// Whether mapping.partition (empty: megatron) or an override maps some op class to `partition`
// (mn_2d: grid_rows and mn_2d_weights are read; m_split_rotate: its rotations cross the links).
bool MapsPartition(const config::Mapping& m, const std::string& partition);
std::vector<UnreadField> UnreadMappingFields(const config::Mapping& m, const config::Chip& chip,
                                             const config::Model& model);

// Each memory channel's capacity_bytes against what the mapping keeps in it: every core that
// uses the channel (arch::Chip::ChannelOf) keeps there its stage's weights when they are
// streamed from DRAM (mapping.weights dram, or auto when they do not fit SRAM; always on a GPU
// node, in HBM) and its KV cache for the last position (cached_prefix + seq_len + decode_steps)
// when the cache does not fit SRAM beside the resident weights (always on a GPU node), as the
// memory plan places them (Lower). A workload of requests (tpsim serve) counts the weights only:
// the server admits requests to the KV capacity left. A channel of capacity 0 is not checked.
// Diags name chip.memory[i].capacity_bytes. Only for a mapping ValidateMapping accepts.
void ValidateDramCapacity(const config::Mapping& m, const arch::Chip& chip, const config::Model& model,
                          const config::Workload& wl, const config::SourceMap& locs,
                          std::vector<config::Diag>* diags);

// One continuous-batching iteration (sim/serving) as a Program: `layers` layers (pipeline
// stages as in `m`) over a mixed batch. Weight GEMMs, norms and element-wise ops run on
// all sum(new_tokens) rows at once; attention (scores, softmax, PV) is emitted per chunk
// with that sequence's own context (cached + new_tokens), split by heads as in Lower.
// The memory plan is Lower's, with the KV cache sized to the chunks' contexts, for
// opts.plan_layers layers when set (tpsim serve: the model's). Ops carry
// phase "mixed". The functional semantics (Program::func) are not meaningful for more
// than one chunk. Throws like Lower; std::invalid_argument for an empty chunk list or a
// chunk with 0 new tokens.
Program LowerIteration(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                       const std::vector<llm::SeqChunk>& chunks, uint32_t layers, const std::string& dtype,
                       const LowerOptions& opts = {});

// Where Lower keeps the weights, per core of the most loaded pipeline stage, for `layers`
// layers (0 = all of the model's): the bytes of weight shards, whether they stay in SRAM,
// the layers that stage holds, and the KV heads each core of a stage keeps. `run`: the
// workload Lower would lower, whose steps' rows decide which partitioner each GEMM runs (an
// mn_2d whose rows do not divide by the grid rows runs n_split; both shards are held when
// its steps run both); nullptr, or a workload with requests (whose iterations' rows vary):
// the rows are not known, sized for 0 rows (mn_2d's own shards).
struct WeightPlan {
  uint64_t weight_bytes_per_core = 0;  // the stage that holds the most (resident_rows: that layout's)
  bool weights_in_sram = true;
  // Where the run's steps lower its weight GEMMs in two layouts (an mn_2d whose decode rows fall
  // back to n_split, an m_split_rotate below P to k_split) whose shards do not fit SRAM together,
  // or leave no room for the KV cache beside them, but the decode steps' layout does (with the
  // KV cache beside it where both fit) (mapping.weights auto): the decode steps' rows. Their
  // layout stays in SRAM (every step runs it); the prefill's shards are read from DRAM at each
  // use, as streamed weights are (a GEMM whose partitioner is the same at both rows reads
  // resident weights). Then weights_in_sram is true, weight_bytes_per_core and
  // stage_weight_bytes are the resident layout's, and the streamed ones are below. Unset: one
  // plan for every GEMM.
  std::optional<uint64_t> resident_rows;
  uint64_t streamed_bytes_per_core = 0;        // the prefill's layout, the stage that holds the most
  std::vector<uint64_t> stage_streamed_bytes;  // per pipeline stage (empty without resident_rows)
  uint32_t layers_per_core = 0;                // the most layers of one stage
  uint32_t kv_heads_per_core = 0;
  // Per pipeline stage: each of its cores' weight bytes, and its layers.
  std::vector<uint64_t> stage_weight_bytes;
  std::vector<uint32_t> stage_layers;
};
WeightPlan PlanWeights(const arch::Chip& chip, const config::Model& model, const config::Mapping& m,
                       uint32_t layers, const std::string& dtype, const config::Workload* run = nullptr);

// One core's KV cache per layer it holds, as SramTimeline::Place sizes it for workload wl: each
// attention replica's sequences (mapping.attention_dp) up to the last position (cached_prefix +
// seq_len + decode_steps), `kv_heads` KV heads of the model's head_dim, in wl's dtype.
double KvBytesPerLayer(const config::Model& model, const config::Workload& wl, const config::Mapping& m,
                       uint64_t kv_heads);

// What the mapping keeps where, per core and per memory channel, as the memory plan places it
// (Lower): ValidateDramCapacity's sums, and `tpsim describe`'s memory lines.
struct ChannelUse {
  double weights = 0, kv = 0;  // bytes
  int cores = 0;               // the mapping's cores that use the channel (arch::Chip::ChannelOf)
};
struct MemoryUse {
  WeightPlan plan;
  bool weights_dram = false;         // streamed from DRAM (always on a GPU node: HBM)
  bool kv_dram = false;              // the KV cache does not fit SRAM beside the resident weights
  uint64_t positions = 0;            // cached_prefix + seq_len + decode_steps
  double kv_per_layer = 0;           // one core's KV cache for `positions`, per layer it holds
  std::vector<ChannelUse> channels;  // per chip channel (a request workload's KV not counted)
};
// The channel fullest against its capacity among those the mapping's cores use (one of
// capacity 0 counts as empty; the lowest id on ties); channels.size() when none is used.
size_t FullestChannel(const MemoryUse& use, const arch::Chip& chip);
// nullopt where the stages cannot be placed or the weights planned (ValidateMapping says why).
std::optional<MemoryUse> PlanMemoryUse(const config::Mapping& m, const arch::Chip& chip,
                                       const config::Model& model, const config::Workload& wl);

// Registered partitioner names, sorted.
std::vector<std::string> PartitionerNames();
// Ranks (cores) of one pipeline stage: mapping.tp x mapping.attention_dp (0 -> 1).
int StageRanks(const config::Mapping& m);

}  // namespace tpsim::mapping
