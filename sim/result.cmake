# Included from sim/CMakeLists.txt: engine output -> Result schema, JSON and table.
add_library(tpsim_result ${CMAKE_CURRENT_LIST_DIR}/result.cc ${CMAKE_CURRENT_LIST_DIR}/energy.cc)
target_link_libraries(tpsim_result PUBLIC tpsim_engine tpsim_configs PRIVATE nlohmann_json::nlohmann_json)
