# Included from tests/sim/CMakeLists.txt: the pre-lowering estimate (mapping/estimate.h)
# against real lowerings, and the validation-time overflow refusals.
tpsim_test(estimate_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/estimate_test.cc LIBS tpsim_run
  SLOW Estimate.BoundsEveryShippedExperiment Estimate.BoundsMoeDecodeSteps)
