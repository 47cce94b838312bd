#pragma once
// Encoding helpers the trace writers share (traces/trace.cc: a run's trace; traces/
// serving_trace.cc: a serving run's): slice annotations, the buffered file sink, Perfetto
// packets and string interning, Chrome JSON values. Internal to traces/.

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "configs/files.h"
#include "perfetto_trace.pb.h"
#include "sim/engine.h"

namespace tpsim::traces::internal {

using sim::Ps;

// A debug annotation. String values are views (`sv`) of strings that outlive the ArgList, or of
// the Arg's own `s` when composed (Str() picks).
struct Arg {
  enum Type { kInt, kUint, kDouble, kString, kBool } type = kInt;
  const char* name = "";
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string_view sv;
  std::string s;
  bool owned = false;
  std::string_view Str() const { return owned ? std::string_view(s) : sv; }
};

// Arguments of one slice; Clear() keeps the Args (and their string capacity) for reuse.
class ArgList {
 public:
  void Clear() { n_ = 0; }
  size_t size() const { return n_; }
  const Arg& operator[](size_t k) const { return v_[k]; }
  const Arg* begin() const { return v_.data(); }
  const Arg* end() const { return v_.data() + n_; }
  Arg& Add(Arg::Type type, const char* name) {
    if (n_ == v_.size()) v_.emplace_back();
    Arg& a = v_[n_++];
    a.type = type;
    a.name = name;
    a.owned = false;
    return a;
  }
  void Int(const char* n, int64_t v) { Add(Arg::kInt, n).i = v; }
  void Uint(const char* n, uint64_t v) { Add(Arg::kUint, n).u = v; }
  void Double(const char* n, double v) { Add(Arg::kDouble, n).d = v; }
  void Bool(const char* n, bool v) { Add(Arg::kBool, n).i = v ? 1 : 0; }
  void Str(const char* n, std::string_view v) { Add(Arg::kString, n).sv = v; }
  // A composed string value: the returned buffer, cleared, becomes the value.
  std::string* OwnedStr(const char* n) {
    Arg& a = Add(Arg::kString, n);
    a.owned = true;
    a.s.clear();
    return &a.s;
  }

 private:
  std::vector<Arg> v_;
  size_t n_ = 0;
};

void AppendNum(uint64_t v, std::string* o);

// Buffered output to the trace file.
class Sink {
 public:
  explicit Sink(config::OutputFile* f) : f_(f) {}
  std::string* buf() { return &buf_; }
  void MaybeFlush() {
    if (buf_.size() >= (4u << 20)) Flush();
  }
  void Flush() {
    f_->Write(buf_);
    buf_.clear();
  }

 private:
  config::OutputFile* f_;
  std::string buf_;
};

// ---- Perfetto protobuf

inline int64_t Ns(Ps ps) { return ps / 1000; }
// Appends `pkt` as one Trace.packet (field 1, length-delimited), serialised in place.
void AppendPacket(const perfetto::TracePacket& pkt, std::string* buf);
// The value half of a debug annotation (its name is set by the caller, plain or interned).
void SetArgValue(const Arg& a, perfetto::DebugAnnotation* d);
void FillArgs(const ArgList& args, perfetto::TrackEvent* ev);

// Perfetto string interning on one packet sequence: iids are handed out from 1 in order of
// first use (so deterministic); a string's first use adds it to the packet's interned_data.
class Interner {
 public:
  explicit Interner(size_t name_keys) : name_by_key_(name_keys, 0) {}

  // Event names, cached by the Describer's NameKey (-1: the metadata slice).
  template <typename MakeName>
  uint64_t EventName(int64_t key, perfetto::TracePacket* pkt, MakeName&& make) {
    uint64_t& slot = key < 0 ? meta_name_ : name_by_key_[static_cast<size_t>(key)];
    if (slot == 0) {
      std::string name = make();
      auto [it, added] = names_.try_emplace(std::move(name), names_.size() + 1);
      if (added) {
        auto* e = pkt->mutable_interned_data()->add_event_names();
        e->set_iid(it->second);
        e->set_name(it->first);
      }
      slot = it->second;
    }
    return slot;
  }
  uint64_t Category(const char* c, perfetto::TracePacket* pkt) {
    return Lookup(c, &cats_, pkt, [](perfetto::InternedData* d, uint64_t iid, std::string_view n) {
      auto* e = d->add_event_categories();
      e->set_iid(iid);
      e->set_name(n.data(), n.size());
    });
  }
  uint64_t ArgName(const char* a, perfetto::TracePacket* pkt) {
    return Lookup(a, &args_, pkt, [](perfetto::InternedData* d, uint64_t iid, std::string_view n) {
      auto* e = d->add_debug_annotation_names();
      e->set_iid(iid);
      e->set_name(n.data(), n.size());
    });
  }

 private:
  // Strings known by pointer (literals), deduplicated by content on a pointer's first use.
  struct Table {
    std::unordered_map<const char*, uint64_t> by_ptr;
    std::unordered_map<std::string_view, uint64_t> by_text;
  };
  template <typename Add>
  uint64_t Lookup(const char* s, Table* t, perfetto::TracePacket* pkt, Add&& add) {
    auto p = t->by_ptr.find(s);
    if (p != t->by_ptr.end()) return p->second;
    auto [it, added] = t->by_text.try_emplace(std::string_view(s), t->by_text.size() + 1);
    if (added) add(pkt->mutable_interned_data(), it->second, it->first);
    t->by_ptr.emplace(s, it->second);
    return it->second;
  }

  std::vector<uint64_t> name_by_key_;
  uint64_t meta_name_ = 0;
  std::unordered_map<std::string, uint64_t> names_;
  Table cats_, args_;
};

void FillInternedArgs(const ArgList& args, Interner* in, perfetto::TracePacket* pkt,
                      perfetto::TrackEvent* ev);

// ---- Chrome JSON

void JsonString(std::string_view s, std::string* o);
// null for a non-finite value.
void JsonDouble(double v, std::string* o);
// Microseconds with 6 decimals: exact picoseconds.
void JsonUs(Ps ps, std::string* o);
// One Chrome-trace counter sample: {"ph":"C","name":...,"pid":pid,"tid":0,"ts":us,"args":{unit:value}}.
void JsonCounterEvent(const std::string& name, const std::string& unit, int64_t pid, Ps t, double v,
                      std::string* o);
// An ArgList as a JSON object.
void JsonArgs(const ArgList& args, std::string* o);

}  // namespace tpsim::traces::internal
