# Included from tests/sim/CMakeLists.txt: the analytical engine and the Result builder.
tpsim_test(analytical_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/analytical_test.cc LIBS tpsim_analytical)
tpsim_test(result_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/result_test.cc
  LIBS tpsim_result tpsim_analytical nlohmann_json::nlohmann_json)
tpsim_test(summary_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/summary_test.cc LIBS tpsim_result tpsim_analytical)
# The schedule and critical path (sim/schedule.h), by hand.
tpsim_test(schedule_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/schedule_test.cc LIBS tpsim_engine)
# The energy model (sim/energy.h) by hand, on both engines.
tpsim_test(energy_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/energy_test.cc LIBS tpsim_result tpsim_analytical tpsim_tlm)
# Decode-step reuse (sim/step_reuse.h) against the unrolled Program, byte for byte.
tpsim_test(step_reuse_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/step_reuse_test.cc LIBS tpsim_agree
  SLOW StepReuse.ShippedExperiments StepReuse.ReferenceUpTo200Steps StepReuse.SummedOpRows
       StepReuse.ShippedSmall StepReuse.ShippedSmallStepByStep StepReuse.ReferenceVariants)
# The two schedules on two threads and the makespan alone (Engine::Makespan) against one thread and Run.
tpsim_test(parallel_schedule_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/parallel_schedule_test.cc LIBS tpsim_analytical)
