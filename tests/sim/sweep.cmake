# Included from tests/sim/CMakeLists.txt: sweeps (expansion, filters, hashing,
# the store, resume, shards, merge) and the kill tests, which drive a small
# executable that is `tpsim sweep` without the rest of the command line.
# Skipped until sim/CMakeLists.txt includes sim/sweep/sweep.cmake.
if(TARGET tpsim_sweep)
  add_executable(tpsim_sweep_driver ${CMAKE_CURRENT_LIST_DIR}/sweep_driver.cc)
  target_link_libraries(tpsim_sweep_driver PRIVATE tpsim_sweep)
  tpsim_test(sweep_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sweep_test.cc LIBS tpsim_sweep)
  add_dependencies(sweep_test tpsim_sweep_driver)
  target_compile_definitions(sweep_test PRIVATE TPSIM_SWEEP_DRIVER="$<TARGET_FILE:tpsim_sweep_driver>")
endif()
