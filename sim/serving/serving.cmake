# Serving: request streams, continuous batching, `tpsim serve`. Included from
# sim/CMakeLists.txt after tpsim_sim is defined.
add_library(tpsim_serving
  ${CMAKE_CURRENT_LIST_DIR}/requests.cc
  ${CMAKE_CURRENT_LIST_DIR}/scheduler.cc
  ${CMAKE_CURRENT_LIST_DIR}/serving.cc
  ${CMAKE_CURRENT_LIST_DIR}/skeleton.cc
  ${CMAKE_CURRENT_LIST_DIR}/skeleton_replay.cc)
target_link_libraries(tpsim_serving PUBLIC tpsim_sim PRIVATE nlohmann_json::nlohmann_json)
