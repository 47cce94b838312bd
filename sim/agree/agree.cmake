# Included from sim/CMakeLists.txt after tpsim_sim: `tpsim agree`, the analytical
# engine against the TLM engine over a seeded random family of experiments.
add_library(tpsim_agree ${CMAKE_CURRENT_LIST_DIR}/agree.cc ${CMAKE_CURRENT_LIST_DIR}/family.cc)
target_link_libraries(tpsim_agree PUBLIC tpsim_sim)
