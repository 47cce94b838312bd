# Serving: scheduler with hand-computed iteration costs, trace readers, and one
# end-to-end run with the analytical engine. Included from tests/sim/CMakeLists.txt;
# needs tpsim_serving (sim/serving/serving.cmake, included from sim/CMakeLists.txt).
if(TARGET tpsim_serving AND NOT TARGET tpsim_serving_test)
  # tpsim_cli_serve: `tpsim serve` and its trace writer (sim/cli/serve.h).
  tpsim_test(tpsim_serving_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/serving_test.cc LIBS tpsim_serving tpsim_cli_serve)
  # Skeleton timing against whole Programs (sim/serving/skeleton.h).
  tpsim_test(tpsim_serving_skeleton_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/serving_skeleton_test.cc
             LIBS tpsim_serving
             SLOW ServingSkeleton.WholeRunAgreesWithPrograms ServingSkeleton.OtherLayoutsAgreeWithPrograms)
endif()
