# Included from sim/CMakeLists.txt after the sweep fragment: `tpsim search`, the best
# mapping of an experiment on its chip (analytical engine, TLM confirmation, SQLite).
add_library(tpsim_search ${CMAKE_CURRENT_LIST_DIR}/search.cc)
target_link_libraries(tpsim_search PUBLIC tpsim_sweep)
