#pragma once
// Shared by the libFuzzer targets: every input is fed to a loader, and the only
// acceptable outcomes are a result or config::ConfigError (a located refusal);
// anything else (another exception, a crash, a sanitizer report) is a finding.

#include <cstddef>
#include <cstdint>
#include <string>

#include "configs/load.h"

namespace tpsim::fuzz {

inline std::string Text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `f`; a ConfigError is a fine answer, and so is std::invalid_argument when
// `invalid_ok` (the documented error of a few parsers).
template <typename F>
void Expect(F&& f, bool invalid_ok = false) {
  try {
    f();
  } catch (const config::ConfigError& e) {
    for (const auto& d : e.diags()) (void)d.str();  // every message must render
  } catch (const std::invalid_argument&) {
    if (!invalid_ok) throw;
  }
}

}  // namespace tpsim::fuzz
