# Included from tests/sim/CMakeLists.txt: the SystemC / TLM-2.0 engine.
tpsim_test(tlm_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tlm_test.cc LIBS tpsim_tlm tpsim_analytical)
tpsim_test(tlm_network_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tlm_network_test.cc LIBS tpsim_tlm)
# The MoE dispatch's hierarchical all_to_all timed by hand on both engines.
tpsim_test(moe_all_to_all_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/moe_all_to_all_test.cc LIBS tpsim_tlm tpsim_analytical)

# The TLM network against BookSim2's committed figures (validate/results/noc/); about
# 15 s of CPU per topology, labelled slow.
add_executable(noc_booksim_test ${CMAKE_CURRENT_LIST_DIR}/noc_booksim_test.cc
               ${CMAKE_CURRENT_LIST_DIR}/noc_traffic.cc)
target_link_libraries(noc_booksim_test PRIVATE tpsim_tlm PkgConfig::SYSTEMC GTest::gtest GTest::gtest_main)
target_compile_definitions(noc_booksim_test PRIVATE SC_CPLUSPLUS=201703L TPSIM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# libsystemc needs sc_main, which tpsim_tlm's tlm_engine.cc defines; the test uses only
# the network module, so name the symbol to pull that object in.
target_link_options(noc_booksim_test PRIVATE -Wl,--undefined=sc_main)
gtest_discover_tests(noc_booksim_test TEST_PREFIX "noc_booksim_test." DISCOVERY_TIMEOUT 60
                     PROPERTIES TIMEOUT 300 LABELS slow)

# The engine registry with every engine linked.
tpsim_test(engine_registry_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/registry_test.cc LIBS tpsim_sim)

# Decode steps streamed into the TLM engine (sim/step_streamed.h) against the unrolled Program.
tpsim_test(step_streamed_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/step_streamed_test.cc LIBS tpsim_sim tpsim_agree
  SLOW StepStreamed.ShippedBig StepStreamed.ReferenceUpTo200Steps StepStreamed.RandomExperiments
       StepStreamed.ReferenceVariants StepStreamed.ShippedSmall StepStreamed.MemoryPlanThatChangesMidRunMore)
