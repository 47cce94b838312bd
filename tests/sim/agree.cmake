# `tpsim agree` on a fixed-seed sample of 30 random experiments (issue 15 item 3):
# both engines on each. The issue's bounds (>= 95% of totals within 10%, all within
# 25%) are NOT met yet (README "TLM vs analytical": the misses are mostly DRAM queue
# order, not link sharing); this test holds the level reached so far (seed 15: 86.7%
# within 10%, worst 85.5%) so that it cannot silently get worse. tests/bench/agree.sh
# checks the issue's bounds on 500 experiments.
add_test(NAME agree_sample
  COMMAND $<TARGET_FILE:tpsim> agree --seed 15 --count 30 --jobs 2 --bounds 0.85,0.90)
set_tests_properties(agree_sample PROPERTIES TIMEOUT 600 LABELS slow PROCESSORS 2)
