#pragma once
// The small vocabulary of a Program (mapping/program.h): the phase an op belongs to, the
// kind of a collective, and where the memory plan keeps weights and the KV cache. Each
// enum has ToString (the display text outputs print, unchanged from when these were
// strings) and Parse (the inverse; nullopt for any other text).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpsim::mapping {

// A typed index: constructed only explicitly from its integer (so a core cannot be passed
// where a task or an op is wanted, nor an op index stored as a core), read implicitly as
// that integer (indexing arrays, printing and arithmetic stay as they were). Tasks, cores
// and ops of a Program use it; value() spells the read out where that reads better.
template <class Tag, class Rep>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(Rep v) : v_(v) {}
  constexpr operator Rep() const { return v_; }  // NOLINT(google-explicit-constructor)
  constexpr Rep value() const { return v_; }

 private:
  Rep v_{};
};
// A core of the chip (arch::Chip numbering); -1 where none (a compute task's dst_core).
using CoreId = Id<struct CoreIdTag, int32_t>;
// A task of a Program: its position in the Program's topological order.
using TaskId = Id<struct TaskIdTag, uint32_t>;
// An op of a Program: an index into Program::ops.
using OpId = Id<struct OpIdTag, uint32_t>;

// The phase of an op: a prefill pass, a decode step, a continuous-batching iteration
// mixing both (sim/serving), or a KV-cache hand-over between disaggregated groups.
enum class Phase : uint8_t { kPrefill, kDecode, kMixed, kKvTransfer };
const char* ToString(Phase p);  // "prefill", "decode", "mixed", "kv_transfer"
std::optional<Phase> ParsePhase(std::string_view s);

// What a collective computes (mapping/collective/collective.h has the semantics). kP2p is
// only a Program's label for point-to-point hand-overs (pipeline stage sends): no
// collective algorithm lowers it.
enum class CollectiveKind : uint8_t { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kRotate, kP2p };
const char* ToString(CollectiveKind k);  // "all_reduce", ..., "rotate", "p2p"
std::optional<CollectiveKind> ParseCollectiveKind(std::string_view s);

// A collective's algorithm, as a typed id. The set is open (the collective registry,
// mapping/collective/: adding an algorithm is one new file there), so the id is not a
// closed list of enumerators but the index of the algorithm's name in the sorted table of
// every registered algorithm plus "nccl" (a GPU-node chip's collectives, run as NCCL
// kernels and timed whole). The table is fixed once the program has started, so an id is
// stable within a run; outputs print ToString (the name), never the number.
enum class AlgorithmId : uint8_t {};
const std::string& ToString(AlgorithmId a);
std::optional<AlgorithmId> ParseAlgorithm(std::string_view name);
// The id of a known algorithm; throws std::invalid_argument naming the known ones otherwise.
AlgorithmId AlgorithmOf(std::string_view name);

// The memory plan. kNone: no plan was made (hand-built Programs); it prints as "".
// kHbm: a GPU's weights in HBM, streamed by each GEMM kernel (no memory tasks).
// kSramPrefillStreamed: the run's GEMMs have two layouts; the decode steps' stays in SRAM, the
// prefill's is streamed (mapping::WeightPlan::resident_rows).
enum class WeightsLocation : uint8_t { kNone, kSram, kDramStreamed, kHbm, kSramPrefillStreamed };
const char* ToString(
    WeightsLocation w);  // "", "sram", "dram (streamed each use)", "hbm (read by each GEMM)", ...
std::optional<WeightsLocation> ParseWeightsLocation(std::string_view s);

// kHbm: a GPU's KV cache in HBM, read by the attention kernels (no memory tasks).
enum class KvLocation : uint8_t { kNone, kSram, kDram, kHbm };
const char* ToString(KvLocation k);  // "", "sram", "dram", "hbm (read by attention)"
std::optional<KvLocation> ParseKvLocation(std::string_view s);

}  // namespace tpsim::mapping
