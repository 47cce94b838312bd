# Included from tests/sim/CMakeLists.txt: sweeps (expansion, filters, hashing,
# the store, resume, shards, merge) and the kill tests, which drive a small
# executable that is `tpsim sweep` without the rest of the command line.
# Skipped until sim/CMakeLists.txt includes sim/sweep/sweep.cmake.
if(TARGET tpsim_sweep)
  add_executable(tpsim_sweep_driver ${CMAKE_CURRENT_LIST_DIR}/sweep_driver.cc)
  target_link_libraries(tpsim_sweep_driver PRIVATE tpsim_sweep)
  tpsim_test(sweep_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sweep_test.cc LIBS tpsim_sweep)
  tpsim_test(sweep_kill_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sweep_kill_test.cc LIBS tpsim_sweep SLOW SweepTest.Sig*)
  add_dependencies(sweep_kill_test tpsim_sweep_driver)
  target_compile_definitions(sweep_kill_test PRIVATE TPSIM_SWEEP_DRIVER="$<TARGET_FILE:tpsim_sweep_driver>")
endif()

# End to end through the real `tpsim` binary (TPSIM_BINARY_DIR/bin/tpsim): a TLM
# point in a child process and an analytical point, a time limit, SIGKILL + resume.
if(TARGET tpsim_sweep)
  tpsim_test(sweep_cli_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sweep_cli_test.cc LIBS SQLite::SQLite3
             SLOW SweepCliTest.SigkillMidSweepThenResumeRunsEveryPointExactlyOnce)
  target_include_directories(sweep_cli_test PRIVATE ${PROJECT_SOURCE_DIR})
  add_dependencies(sweep_cli_test tpsim)
endif()

# The sweep's reuse of lowered Programs (sim/run.h ProgramCache) and its summary-only
# path: exact against uncached runs.
if(TARGET tpsim_sweep)
  tpsim_test(program_cache_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/program_cache_test.cc
    LIBS tpsim_sweep SQLite::SQLite3 SLOW ProgramCacheTest.TimingOnlyFieldsLeaveTheProgramUnchanged)
endif()
