# Included from sim/CMakeLists.txt after tpsim_sim: sweeps (point expansion,
# filters, the SQLite store, local workers, shards, Slurm job arrays).
add_library(tpsim_sweep
  ${CMAKE_CURRENT_LIST_DIR}/expr.cc
  ${CMAKE_CURRENT_LIST_DIR}/spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/store.cc
  ${CMAKE_CURRENT_LIST_DIR}/runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/slurm.cc
  ${CMAKE_CURRENT_LIST_DIR}/sweep.cc)
target_link_libraries(tpsim_sweep PUBLIC tpsim_sim tpsim_serving SQLite::SQLite3 Threads::Threads
                      PRIVATE nlohmann_json::nlohmann_json)
