#include "traces/trace_encode.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tpsim::traces::internal {

void AppendNum(uint64_t v, std::string* o) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof b, v);
  o->append(b, r.ptr);
}

// Appends `pkt` as one Trace.packet (field 1, length-delimited), serialised in place.
// No map fields, so the bytes are deterministic.
void AppendPacket(const perfetto::TracePacket& pkt, std::string* buf) {
  const size_t n = pkt.ByteSizeLong();
  uint8_t head[11];
  size_t h = 0;
  head[h++] = 0x0a;
  for (uint64_t v = n;; v >>= 7) {
    if (v < 0x80) {
      head[h++] = static_cast<uint8_t>(v);
      break;
    }
    head[h++] = static_cast<uint8_t>((v & 0x7f) | 0x80);
  }
  const size_t off = buf->size();
  buf->resize(off + h + n);
  uint8_t* dst = reinterpret_cast<uint8_t*>(buf->data()) + off;
  std::copy(head, head + h, dst);
  pkt.SerializeWithCachedSizesToArray(dst + h);
}

// The value half of a debug annotation (its name is set by the caller, plain or interned).
void SetArgValue(const Arg& a, perfetto::DebugAnnotation* d) {
  switch (a.type) {
    case Arg::kInt:
      d->set_int_value(a.i);
      break;
    case Arg::kUint:
      d->set_uint_value(a.u);
      break;
    case Arg::kDouble:
      d->set_double_value(a.d);
      break;
    case Arg::kString: {
      const std::string_view v = a.Str();
      d->set_string_value(v.data(), v.size());
      break;
    }
    case Arg::kBool:
      d->set_bool_value(a.i != 0);
      break;
  }
}

void FillArgs(const ArgList& args, perfetto::TrackEvent* ev) {
  for (const Arg& a : args) {
    perfetto::DebugAnnotation* d = ev->add_debug_annotations();
    d->set_name(a.name);
    SetArgValue(a, d);
  }
}

void FillInternedArgs(const ArgList& args, Interner* in, perfetto::TracePacket* pkt,
                      perfetto::TrackEvent* ev) {
  for (const Arg& a : args) {
    perfetto::DebugAnnotation* d = ev->add_debug_annotations();
    d->set_name_iid(in->ArgName(a.name, pkt));
    SetArgValue(a, d);
  }
}

void JsonString(std::string_view s, std::string* o) {
  o->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *o += "\\\"";
        break;
      case '\\':
        *o += "\\\\";
        break;
      case '\n':
        *o += "\\n";
        break;
      case '\r':
        *o += "\\r";
        break;
      case '\t':
        *o += "\\t";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          *o += b;
        } else {
          o->push_back(static_cast<char>(c));
        }
    }
  }
  o->push_back('"');
}

void JsonDouble(double v, std::string* o) {
  if (!std::isfinite(v)) {
    *o += "null";
    return;
  }
  char b[32];
  auto r = std::to_chars(b, b + sizeof b, v);
  o->append(b, r.ptr);
}

// Microseconds with 6 decimals: exact picoseconds.
void JsonUs(Ps ps, std::string* o) {
  char b[40];
  std::snprintf(b, sizeof b, "%lld.%06lld", static_cast<long long>(ps / 1000000),
                static_cast<long long>(ps % 1000000));
  *o += b;
}

// One Chrome-trace counter sample: {"ph":"C","name":...,"pid":pid,"tid":0,"ts":us,"args":{unit:value}}.
void JsonCounterEvent(const std::string& name, const std::string& unit, int64_t pid, Ps t, double v,
                      std::string* o) {
  *o += "{\"ph\":\"C\",\"name\":";
  JsonString(name, o);
  *o += ",\"pid\":" + std::to_string(pid) + ",\"tid\":0,\"ts\":";
  JsonUs(t, o);
  *o += ",\"args\":{";
  JsonString(unit, o);
  *o += ":";
  JsonDouble(v, o);
  *o += "}}";
}

void JsonArgs(const ArgList& args, std::string* o) {
  *o += "{";
  for (size_t k = 0; k < args.size(); ++k) {
    const Arg& a = args[k];
    if (k) *o += ",";
    JsonString(a.name, o);
    *o += ":";
    switch (a.type) {
      case Arg::kInt:
        *o += std::to_string(a.i);
        break;
      case Arg::kUint:
        *o += std::to_string(a.u);
        break;
      case Arg::kDouble:
        JsonDouble(a.d, o);
        break;
      case Arg::kString:
        JsonString(a.Str(), o);
        break;
      case Arg::kBool:
        *o += a.i ? "true" : "false";
        break;
    }
  }
  *o += "}";
}

}  // namespace tpsim::traces::internal
