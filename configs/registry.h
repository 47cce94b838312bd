#pragma once
// One registry mechanism for every pluggable kind: topologies (arch/topology/),
// partitioners (mapping/partition/), placements (mapping/placement/), collective
// algorithms (mapping/collective/) and timing engines (sim/analytical/, sim/tlm/).
//
// A kind is a tag naming what its entries hold and what the kind is called:
//
//   struct PlacementKind {
//     using Value = PlaceFn;                       // an object pointer, function or factory
//     static constexpr std::string_view kName = "placement";
//   };
//   using PlacementRegistry = Registry<PlacementKind>;
//   using PlacementRegistrar = Registrar<PlacementKind>;
//
// Each implementation file defines one Registrar at namespace scope; its constructor runs
// during static initialisation and adds a name, a one-line description and the value:
//
//   namespace {
//   std::vector<int> PlaceSnake(...) { ... }
//   const PlacementRegistrar kRegistered("snake", "boustrophedon rows", &PlaceSnake);
//   }  // namespace
//
// So adding an implementation is one new .cc file in its kind's folder: the folder is
// globbed into a library that every binary links whole-archive (tpsim_add_registering_library
// in the top-level CMakeLists.txt), so the linker never drops a registrar that nothing
// references.
//
// Contract:
// - Entries are kept sorted by name: Names(), NamesText() and entries() never depend on
//   the order in which the linker ran the registrars.
// - Registering a name twice is a bug in the program, not in its input: it is reported on
//   stderr at start-up and the program aborts, so every test binary catches it.
// - Registration happens before main, on one thread; afterwards registries are only read,
//   so lookups from several threads (sweep workers) need no lock.
// - RegistryBase::All() lists every kind that has an entry in this program (`tpsim list`).

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "configs/files.h"

namespace tpsim {

// What every Registry<Kind> offers without knowing its value type.
class RegistryBase {
 public:
  struct Listed {
    std::string name, description;
  };

  // Kind name -> its registry, for every kind with at least one registered entry.
  static const std::map<std::string_view, const RegistryBase*>& All() { return Index(); }

  virtual std::string_view kind() const = 0;
  virtual std::vector<Listed> List() const = 0;  // sorted by name

 protected:
  RegistryBase() = default;
  ~RegistryBase() = default;
  static std::map<std::string_view, const RegistryBase*>& Index() {
    static std::map<std::string_view, const RegistryBase*> index;
    return index;
  }
};

template <class Kind>
class Registry final : public RegistryBase {
 public:
  using Value = typename Kind::Value;
  struct Entry {
    std::string name;
    std::string description;  // one line, shown by `tpsim list`
    Value value;
  };

  // The registry of Kind, made on first use (so registrars in any translation unit may add
  // to it during static initialisation).
  static Registry& Get() {
    static Registry registry;
    return registry;
  }

  void Add(std::string name, std::string description, Value value) {
    if (auto it = entries_.find(name); it != entries_.end()) {
      std::fprintf(stderr, "tpsim: internal error: two %s implementations registered as '%s' (%s; %s)\n",
                   std::string(Kind::kName).c_str(), name.c_str(), it->second.description.c_str(),
                   description.c_str());
      std::abort();
    }
    std::string key = name;
    entries_.emplace(std::move(key), Entry{std::move(name), std::move(description), std::move(value)});
  }

  // nullptr when `name` is not registered.
  const Value* Find(std::string_view name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second.value;
  }

  // By name, sorted.
  const std::map<std::string, Entry, std::less<>>& entries() const { return entries_; }

  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, e] : entries_) names.push_back(name);
    return names;
  }

  // "a, b, c": the valid names, for an unknown-name error.
  std::string NamesText() const { return config::JoinNames(Names()); }

  std::string_view kind() const override { return Kind::kName; }
  std::vector<Listed> List() const override {
    std::vector<Listed> out;
    for (const auto& [name, e] : entries_) out.push_back({name, e.description});
    return out;
  }

 private:
  Registry() { Index().emplace(Kind::kName, this); }
  std::map<std::string, Entry, std::less<>> entries_;
};

// Defined once per implementation file, at namespace scope (in an anonymous namespace).
template <class Kind>
class Registrar {
 public:
  Registrar(std::string name, std::string description, typename Kind::Value value) {
    Registry<Kind>::Get().Add(std::move(name), std::move(description), std::move(value));
  }
};

}  // namespace tpsim
