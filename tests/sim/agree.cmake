# `tpsim agree` on a fixed-seed sample of 30 random experiments (issue 15 item 3):
# both engines on each. The issue's bounds (>= 95% of totals within 10%, all within
# 25%) are NOT met on this sample (README "TLM vs analytical": 28 of 30 within 10%, the
# worst 1.871, a TP=32 ring all-reduce on a 32-core torus where the even-spread link
# rule overcounts); this test holds the level reached so far (seed 15: 93.3% within
# 10%, worst 87.1%) so that it cannot silently get worse. tests/bench/agree.sh checks
# the issue's bounds on 500 experiments.
add_test(NAME agree_sample
  COMMAND $<TARGET_FILE:tpsim> agree --seed 15 --count 30 --jobs 2 --bounds 0.90,0.90)
set_tests_properties(agree_sample PROPERTIES TIMEOUT 600 LABELS slow PROCESSORS 2)
