# Included from tests/sim/CMakeLists.txt: the SystemC / TLM-2.0 engine.
tpsim_test(tlm_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/tlm_test.cc LIBS tpsim_tlm tpsim_analytical)
# The engine registry with every engine linked.
tpsim_test(engine_registry_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/registry_test.cc LIBS tpsim_sim)
