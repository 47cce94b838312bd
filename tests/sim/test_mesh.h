#pragma once
// The chip the engine and result tests share: an 8x8 mesh at 500 MHz (cycle
// 2000 ps), 160 GB/s links, 1-cycle routers and no wire latency (one hop =
// 2000 ps), 64x64 systolic arrays at 0.7 utilisation, 64 vector lanes, 32 MiB
// SRAM, and one DRAM channel at r0c0: 100 GB/s x 0.8 efficiency, 50 ns latency.

#include "arch/chip.h"
#include "chip.pb.h"

namespace tpsim::sim::test {

inline config::Chip MeshConfig() {
  config::Chip c;
  c.set_name("test-mesh-8x8");
  c.set_clock_mhz(500);
  auto* core = c.mutable_core();
  core->set_systolic_rows(64);
  core->set_systolic_cols(64);
  core->set_systolic_arrays(1);
  core->set_mac_dtype("bf16");
  core->set_matrix_utilization(0.7);
  core->set_vector_lanes(64);
  core->set_sram_bytes(32ull << 20);
  auto* noc = c.mutable_noc();
  noc->set_topology("mesh");
  noc->set_rows(8);
  noc->set_cols(8);
  noc->set_link_bandwidth_gbps(160);
  noc->set_router_latency_cycles(1);
  noc->set_link_latency_ns(0);
  auto* mem = c.add_memory();
  mem->set_name("dram");
  mem->set_kind("dram");
  mem->add_attach("r0c0");
  mem->set_bandwidth_gbps(100);
  mem->set_efficiency(0.8);
  mem->set_latency_ns(50);
  mem->set_capacity_bytes(8ull << 30);
  return c;
}

inline const arch::Chip& Mesh() {
  static const arch::Chip chip = arch::Chip::Build(MeshConfig());
  return chip;
}

inline int Core(int row, int col) { return row * 8 + col; }

}  // namespace tpsim::sim::test
