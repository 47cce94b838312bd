# `tpsim collectives`, `tpsim gemm` and the CSV half of `tpsim compare`, through the binary.
tpsim_test(gpu_cli_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_cli_test.cc LIBS tpsim_microbench)
add_dependencies(gpu_cli_test tpsim)
