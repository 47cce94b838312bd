# `tpsim agree` on a fixed-seed sample of 30 random experiments (issue 15 item 3):
# both engines on each, with the issue's bounds: >= 95% of totals within 10% of the TLM
# engine's and every one within 25% (README "TLM vs analytical": 29 of 30 within 10%, the
# worst 0.881). tests/bench/agree.sh checks the same bounds on 500 experiments.
add_test(NAME agree_sample
  COMMAND $<TARGET_FILE:tpsim> agree --seed 15 --count 30 --jobs 2 --bounds 0.95,0.25)
set_tests_properties(agree_sample PROPERTIES TIMEOUT 600 LABELS slow PROCESSORS 2)
# The same on the MoE family (`--family moe`: MoE catalog models, expert-parallel degree and
# routing drawn too; README "TLM vs analytical": 30 of 30 within 10%, the worst 0.989).
add_test(NAME agree_sample_moe
  COMMAND $<TARGET_FILE:tpsim> agree --family moe --seed 15 --count 30 --jobs 2 --bounds 0.95,0.25)
set_tests_properties(agree_sample_moe PROPERTIES TIMEOUT 600 LABELS slow PROCESSORS 2)
# The families' model lists (sim/agree/family.h FamilyModels).
tpsim_test(agree_family_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/agree_family_test.cc LIBS tpsim_agree)
# Its progress into a pipe (a CI log): one line at the end, no carriage returns (which a
# terminal gets: the line redrawn in place); with workers, counted as their results come.
foreach(jobs 1 2)
  add_test(NAME agree_progress_in_a_pipe_jobs${jobs}
    COMMAND sh -c "$<TARGET_FILE:tpsim> agree --seed 15 --count 3 --jobs ${jobs} 2>&1 >/dev/null | tr '\\r' '#'")
  set_tests_properties(agree_progress_in_a_pipe_jobs${jobs} PROPERTIES LABELS fast
    PASS_REGULAR_EXPRESSION "^agree: 3/3 experiments\n$" FAIL_REGULAR_EXPRESSION "#")
endforeach()
# The summary's first line is the command that drew it: a MoE draw's said `tpsim agree --seed 15
# --count 2`, which draws dense experiments.
add_test(NAME agree_header_names_the_family
  COMMAND $<TARGET_FILE:tpsim> agree --family moe --seed 15 --count 2)
set_tests_properties(agree_header_names_the_family PROPERTIES LABELS fast
  PASS_REGULAR_EXPRESSION "tpsim agree --seed 15 --family moe --count 2: 2 experiments run on both engines")
