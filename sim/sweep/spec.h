#pragma once
// A sweep file (configs/schema/sweep.proto) loaded and expanded into points.
//
//   base experiment ──► + point overrides ──► resolved experiment ──► config hash
//
// A point is identified by its index in the full cartesian order (before the
// filter): dimensions in file order (each `axis`, then each `zip`), the last
// varying fastest. Its identity in a store is the hash of its resolved config.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/experiment.h"
#include "sim/sweep/expr.h"
#include "sweep.pb.h"

namespace tpsim::sweep {

struct SweepSpec {
  std::string path;  // the sweep file
  config::Sweep cfg;
  config::SourceMap locs;
  std::string base_path;            // the base experiment, resolved against the sweep file
  sim::Experiment base;             // loaded once, without overrides
  std::vector<std::string> fields;  // swept field paths, in column order (axes, then zip axes)
  std::vector<size_t> dims;         // length of each dimension (axes, then zips)
  std::vector<Expr> require;
  std::string engine;  // sweep engine, else the base's, else "analytical"
};

struct Point {
  uint64_t index = 0;               // in the full cartesian order
  std::vector<sim::Override> sets;  // one per SweepSpec::fields entry, same order
};

// Loads, checks (fields exist, values parse, zips have equal lengths, filters
// parse and name real fields, engine known) and loads the base experiment.
// Throws config::ConfigError with file:line:col diagnostics.
SweepSpec LoadSweep(const std::string& path);

// Number of points before the filter (product of the dimension lengths; 1 when
// there are no axes). LoadSweep refuses a product past UINT64_MAX; this saturates there.
uint64_t PointCount(const SweepSpec& spec);

// The point at `index` (< PointCount).
Point PointAt(const SweepSpec& spec, uint64_t index);

// The base experiment with the point's overrides (and the sweep's engine) applied,
// as `tpsim run BASE --set ...` would resolve it. Throws config::ConfigError for
// a value the field cannot take.
sim::Experiment MakeExperiment(const SweepSpec& spec, const Point& point);

// True when every `require` holds for `e`. Throws config::ConfigError at the require when one
// cannot be evaluated (a type mismatch). `undefined`, where given, is set to a warning naming
// the require (file:line:col) when the one that failed is not a number (a division or remainder
// by zero): such points were filtered without a word.
bool PassesFilter(const SweepSpec& spec, const sim::Experiment& e, std::string* undefined = nullptr);

// FNV-1a 64 of `text`, as 16 lower-case hex digits. Stable across runs, builds
// and machines.
std::string HashText(const std::string& text);

// HashText(sim::ResolvedText(e)).
std::string ConfigHash(const sim::Experiment& e);

// Path -> HashText of its contents ("unreadable" when it cannot be read), for PointHash to
// read each referenced file once per sweep.
using FileDigests = std::map<std::string, std::string>;

// The identity of a point in a store (column config_hash). A point that reads no file but its
// resolved experiment (sim::InputFiles(e) beyond e.inputs, whose contents the resolved text
// holds) has ConfigHash(e). One that reads others (a placement file with placement "file",
// an MoE routing trace, a request trace) has the hash of its resolved text followed by each
// such file's path and HashText of its contents, so that editing one of them gives its
// points a new identity (a rerun) and leaving it unchanged does not. `digests`: the
// contents' hashes already read (null: read every time).
std::string PointHash(const sim::Experiment& e, FileDigests* digests = nullptr);

// The identity of a sweep: the hash of its resolved base experiment, its axes and zips
// (fields and values), its filters and its engine. Two stores hold points of the same
// sweep when their identities are equal (the shards of one Slurm job are); the name,
// description, file locations and time limit do not take part.
std::string SweepIdentity(const SweepSpec& spec);

// Indices of the points of shard `shard` of `shards` (index % shards == shard),
// before the filter.
bool InShard(uint64_t index, uint32_t shard, uint32_t shards);

}  // namespace tpsim::sweep
