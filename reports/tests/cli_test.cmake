# `pipebench report` end to end through the real binary: exit codes 0, 1
# (regression) and 2 (bad input, one line naming the file), and the files it
# writes. Run as: cmake -DPIPEBENCH=.. -DGEN=.. -DOUT=.. -P cli_test.cmake
function(expect_run code)
  cmake_parse_arguments(A "" "STDERR;STDOUT" "ARGS" ${ARGN})
  execute_process(COMMAND ${PIPEBENCH} report ${A_ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL code)
    message(FATAL_ERROR "pipebench report ${A_ARGS}: exit ${rc}, expected ${code}\nstdout: ${out}\nstderr: ${err}")
  endif()
  if(A_STDERR AND NOT err MATCHES "${A_STDERR}")
    message(FATAL_ERROR "pipebench report ${A_ARGS}: stderr does not match '${A_STDERR}':\n${err}")
  endif()
  if(A_STDOUT AND NOT out MATCHES "${A_STDOUT}")
    message(FATAL_ERROR "pipebench report ${A_ARGS}: stdout does not match '${A_STDOUT}':\n${out}")
  endif()
endfunction()

execute_process(COMMAND ${GEN} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fixture generator failed: ${rc}")
endif()

# Regression gate: 10% slower fails (exit 1), 5% does not (exit 0).
expect_run(1 ARGS ${OUT}/slow --baseline ${OUT}/base --junit ${OUT}/junit.xml --md ${OUT}/r.md
           STDOUT "REGRESSION 1f1b x balanced P=4 M=8: samples/s")
expect_run(0 ARGS ${OUT}/near --baseline ${OUT}/base --html ${OUT}/r.html --csv ${OUT}/r.csv --gbench ${OUT}/g.json
           STDOUT "regressions: 0 beyond 7%")
expect_run(0 ARGS ${OUT}/near --baseline ${OUT}/base --threshold 0.07 --memory-budget 64MiB --md ${OUT}/r2.md
           STDOUT "Within 64.0 MiB per stage")
# A folder of nights: each subfolder is one night.
expect_run(1 ARGS ${OUT}/slow --baseline ${OUT}/nights --md ${OUT}/r3.md
           STDOUT "3 earlier night\\(s\\)")
expect_run(0 ARGS ${OUT}/near --baseline ${OUT}/nights/n1 --baseline ${OUT}/nights/n2
           STDOUT "0 regression\\(s\\), 0 improvement\\(s\\), 2 no change, 0 undecidable")
# Three steps a side can never be significant: undecidable, exit 0, skipped in JUnit.
expect_run(0 ARGS ${OUT}/few/slow --baseline ${OUT}/few/base --junit ${OUT}/few.xml
           STDOUT "2 undecidable")
file(READ ${OUT}/few.xml few_xml)
if(NOT few_xml MATCHES "<skipped message=\"undecidable: samples/s")
  message(FATAL_ERROR "undecidable combinations are not skipped in JUnit:\n${few_xml}")
endif()
# Confirmation: the list names slow's 1f1b, then its control (gpipe, which
# did not move); a re-run that reproduces it keeps the regression, one that
# does not (near) makes it undecidable.
expect_run(1 ARGS ${OUT}/slow --baseline ${OUT}/base --rerun-list ${OUT}/rerun.txt
           STDOUT "confirm: 1 combination\\(s\\) moved tonight")
file(STRINGS ${OUT}/rerun.txt rerun_list)
if(NOT rerun_list MATCHES "^${OUT}/slow/1f1b[^;]*\\.json;${OUT}/slow/gpipe[^;]*\\.json$")
  message(FATAL_ERROR "--rerun-list: expected slow's 1f1b file, then gpipe's, got '${rerun_list}'")
endif()
expect_run(1 ARGS ${OUT}/slow --baseline ${OUT}/base --confirm ${OUT}/slow_again --md ${OUT}/c.md
           STDOUT "REGRESSION 1f1b x balanced P=4 M=8: samples/s [^\n]*; confirmed by a re-run: samples/s")
expect_run(0 ARGS ${OUT}/slow --baseline ${OUT}/base --confirm ${OUT}/near --junit ${OUT}/confirm.xml
           STDOUT "UNDECIDABLE 1f1b x balanced P=4 M=8: samples/s [^\n]*did not reproduce on a re-run \\(no change: samples/s")
file(READ ${OUT}/confirm.xml confirm_xml)
if(NOT confirm_xml MATCHES "<skipped message=\"undecidable: samples/s[^\"]*did not reproduce on a re-run")
  message(FATAL_ERROR "a regression that did not reproduce is not skipped in JUnit:\n${confirm_xml}")
endif()
expect_run(2 ARGS ${OUT}/slow --confirm ${OUT}/near STDERR "--confirm: confirms the gate's verdicts, which need --baseline")
expect_run(2 ARGS ${OUT}/base --baseline ${OUT}/base --alpha 2 STDERR "--alpha: expected a significance level in \\(0, 1\\), got 2")
expect_run(2 ARGS ${OUT}/base --baseline ${OUT}/base --history-window 0 STDERR "--history-window: expected >= 1 night, got 0")
foreach(f junit.xml r.md r.html r.csv g.json r2.md r3.md)
  if(NOT EXISTS ${OUT}/${f})
    message(FATAL_ERROR "pipebench report did not write ${OUT}/${f}")
  endif()
endforeach()
# No output flag: the Markdown report on stdout.
expect_run(0 ARGS ${OUT}/base STDOUT "# pipebench report")

# Bad input: exit 2, one line naming what is wrong.
expect_run(2 ARGS ${OUT}/bad STDERR "pipebench: ${OUT}/bad/truncated.json: malformed JSON \\(")
expect_run(0 ARGS ${OUT}/bad --skip-bad STDOUT "Unreadable result files")
expect_run(2 ARGS ${OUT}/empty STDERR "nothing to report: no pipebench result files in ${OUT}/empty")
expect_run(2 ARGS ${OUT}/missing STDERR "${OUT}/missing: no such file or directory")
expect_run(2 ARGS ${OUT}/base --threshold 1.5 STDERR "--threshold: expected a fraction in \\[0, 1\\), got 1.5")
expect_run(2 ARGS ${OUT}/base --memory-budget lots STDERR "--memory-budget")
expect_run(2 ARGS ${OUT}/base --baseline ${OUT}/empty STDERR "--baseline: nothing to report")
