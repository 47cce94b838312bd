# Included from tests/sim/CMakeLists.txt: tpsim search (front, bounds, pruning, resume).
if(TARGET tpsim_search)
  tpsim_test(search_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/search_test.cc LIBS tpsim_search)
endif()
if(TARGET tpsim_search AND TARGET tpsim_serving)
  tpsim_test(search_serving_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/search_serving_test.cc LIBS tpsim_search tpsim_serving)
endif()
