# Included from sim/CMakeLists.txt after the sweep fragment: `tpsim search`, the best
# mapping of an experiment on its chip (analytical engine, TLM confirmation, SQLite).
# space.cc: the candidates; bounds.cc: their lower bounds; search.cc: the pruned loop,
# the store and the front; command.cc: the command line and what it prints.
add_library(tpsim_search ${CMAKE_CURRENT_LIST_DIR}/space.cc ${CMAKE_CURRENT_LIST_DIR}/bounds.cc
  ${CMAKE_CURRENT_LIST_DIR}/search.cc ${CMAKE_CURRENT_LIST_DIR}/command.cc)
target_link_libraries(tpsim_search PUBLIC tpsim_sweep)
