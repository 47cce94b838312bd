# End-to-end checks of `tpsim run` through the real binary.
tpsim_test(run_cli_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/run_cli_test.cc LIBS nlohmann_json::nlohmann_json
  SLOW RunCli.ResultsAreByteIdenticalRunToRun RunCli.EnginesAgreeOnTheReferenceExperimentWithinTwoPercent
       RunCli.ProgressLineOnATerminalOnly RunCli.EnginesAgreeOnTheShippedMoeExperimentsWithinTenPercent)
add_dependencies(run_cli_test tpsim)
