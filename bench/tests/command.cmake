# Tests of the list/schedule/simulate commands: real runs of the binary.
set(PPB_EXPECT ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_usage_error.sh)

# ppb_expect_usage_error(name regex args...): `pipebench args...` exits 2
# with one line on stderr that matches regex.
function(ppb_expect_usage_error name regex)
  add_test(NAME cli.${name} COMMAND ${PPB_EXPECT} "${regex}" $<TARGET_FILE:pipebench> ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES LABELS unit TIMEOUT 30)
endfunction()

set(bad ${CMAKE_CURRENT_SOURCE_DIR}/tests/data)
ppb_expect_usage_error(unknown_schedule "unknown schedule.*gpipe.*1f1b"
  schedule --name nope --stages 2 --microbatches 4)
ppb_expect_usage_error(unknown_flag "--bogus"
  schedule --name gpipe --stages 2 --microbatches 4 --bogus)
ppb_expect_usage_error(zero_microbatches "microbatches"
  schedule --name gpipe --stages 2 --microbatches 0)
ppb_expect_usage_error(chunks_not_interleaved "--chunks"
  schedule --name gpipe --stages 2 --microbatches 4 --chunks 2)
ppb_expect_usage_error(interleaved_bad_m "--microbatches|--chunks"
  schedule --name interleaved-1f1b --stages 4 --microbatches 6 --chunks 2)
ppb_expect_usage_error(unknown_partition "partition.*layer.*balanced"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-tiny --partition nope)
ppb_expect_usage_error(stages_exceed_units "parts|units|layers"
  simulate --schedule 1f1b --stages 64 --microbatches 4 --model gpt-tiny --partition operator)
ppb_expect_usage_error(layer_partition_too_many_stages "layer"
  simulate --schedule 1f1b --stages 16 --microbatches 4 --model gpt-tiny --partition layer)
ppb_expect_usage_error(bad_model_spec "--model.*heads"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt:layers=2,hidden=30,heads=4)
ppb_expect_usage_error(bad_model_key "--model.*bogus"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt:bogus=3)
ppb_expect_usage_error(unknown_model "--model.*gpt-tiny"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-huge)
ppb_expect_usage_error(unknown_device "--device.*h100"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-tiny --device tpu)
ppb_expect_usage_error(missing_schedule_file "nope.json"
  simulate --schedule-file ${bad}/nope.json)
ppb_expect_usage_error(malformed_schedule_file "malformed.json"
  simulate --schedule-file ${bad}/malformed.json)
ppb_expect_usage_error(schedule_file_missing_field "missing_field.json.*microbatches"
  simulate --schedule-file ${bad}/missing_field.json)
ppb_expect_usage_error(schedule_file_unknown_op "unknown_op.json.*op"
  simulate --schedule-file ${bad}/unknown_op.json)
ppb_expect_usage_error(schedule_file_deadlock "deadlock.json.*stage"
  simulate --schedule-file ${bad}/deadlock.json)
# A schedule that runs when messages match by tag but deadlocks under
# in-order matching (NCCL, mpi-ordered) with 1 receive buffer per link:
# stage 1 consumes micro-batch 1's activation before micro-batch 0's.
ppb_expect_usage_error(schedule_file_inorder_deadlock
  "inorder_deadlock.json: deadlock: stage 1 stuck at F1: under in-order matching link s0->s1 needs 2 receive buffers, 1 allowed"
  simulate --schedule-file ${bad}/inorder_deadlock.json --link-buffers 1)
add_test(NAME cli.schedule_file_inorder_grid
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 2 20 ">s1 +\\*F1 +F0"
          -- $<TARGET_FILE:pipebench> simulate --schedule-file ${bad}/inorder_deadlock.json --link-buffers 1)
add_test(NAME cli.schedule_file_inorder_by_tag
  COMMAND $<TARGET_FILE:pipebench> simulate --schedule-file ${bad}/inorder_deadlock.json)
add_test(NAME cli.schedule_file_inorder_enough_buffers
  COMMAND $<TARGET_FILE:pipebench> simulate --schedule-file ${bad}/inorder_deadlock.json --link-buffers 2)
set_tests_properties(cli.schedule_file_inorder_grid cli.schedule_file_inorder_by_tag
  cli.schedule_file_inorder_enough_buffers PROPERTIES LABELS unit TIMEOUT 30)
# simulate --data-parallel: 1F1B, P = 2, M = 4, F 1, B 2 ends its pipeline at
# 15; stage 0's all-reduce (7.5) after its last B ends the step at 22.5.
add_test(NAME cli.simulate_data_parallel
  COMMAND $<TARGET_FILE:pipebench> simulate --schedule 1f1b --stages 2 --microbatches 4 --fwd 1
          --bwd 2 --wgrad 0 --data-parallel 4 --allreduce 7.5 --format json)
set_tests_properties(cli.simulate_data_parallel PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "\"step_time\":2\\.25E1.*\"data_parallel\":4,\"pipeline_time\":1\\.5E1")
# simulate --model says which storage and attention it priced: the fused
# attention on a GPU device (its statistics kept, not the probabilities),
# naive with the reason on the cpu device or where --attention naive asks,
# in the text's first line and the JSON's config.
add_test(NAME cli.simulate_model_attention_gpu
  COMMAND $<TARGET_FILE:pipebench> simulate --schedule 1f1b --stages 2 --microbatches 4
          --model gpt-tiny --device h200 --dtype bf16)
set_tests_properties(cli.simulate_model_attention_gpu PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "^schedule 1f1b  P=2 M=4 V=1  model gpt-tiny, partition balanced, device h200, bf16, fused attention \\(seconds\\)")
add_test(NAME cli.simulate_model_attention_naive
  COMMAND $<TARGET_FILE:pipebench> simulate --schedule 1f1b --stages 2 --microbatches 4
          --model gpt-tiny --device h200 --attention naive)
set_tests_properties(cli.simulate_model_attention_naive PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "^schedule 1f1b  P=2 M=4 V=1  model gpt-tiny, partition balanced, device h200, fp32, naive attention \\(--attention naive\\) \\(seconds\\)")
add_test(NAME cli.simulate_model_attention_cpu
  COMMAND $<TARGET_FILE:pipebench> simulate --schedule 1f1b --stages 2 --microbatches 4
          --model gpt-tiny --format json)
set_tests_properties(cli.simulate_model_attention_cpu PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "\"device\":\"cpu\",\"dtype\":\"fp32\",\"attention\":\"naive\",\"attention_reason\":\"the cpu backend has no fused attention \\(cuda only\\)\"")
# The model's flags without --model, and a storage or attention it cannot
# take, are refused by name.
ppb_expect_usage_error(simulate_dtype_needs_model "^pipebench: --dtype: needs --model$"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --dtype bf16)
ppb_expect_usage_error(simulate_device_needs_model "^pipebench: --device: needs --model$"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --device h200)
ppb_expect_usage_error(simulate_bad_dtype "^pipebench: --dtype: expected fp32 or bf16, got 'fp16'$"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-tiny --dtype fp16)
ppb_expect_usage_error(simulate_fused_on_cpu
  "^pipebench: --attention fused: the cpu backend has no fused attention \\(cuda only\\)$"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-tiny --attention fused)
# PyTorch's CSV: a cell it cannot read, FSDP actions, a receive placed after
# the action that consumes it; each named by row and column.
ppb_expect_usage_error(csv_bad_cell
  "bad_cell.csv: row 2 \\(rank 1\\), column 3: cell '2X0': expected <stage><op><micro-batch>"
  simulate --schedule-file ${bad}/bad_cell.csv)
ppb_expect_usage_error(csv_unshard
  "unshard.csv: row 1 \\(rank 0\\), column 3: cell '0UNSHARD': UNSHARD is not supported"
  simulate --schedule-file ${bad}/unshard.csv)
ppb_expect_usage_error(csv_receive_after_consumer
  "comm_order.csv: row 2 \\(rank 1\\), column 6: cell '1RECV_F1': a receive after the action that consumes it"
  simulate --schedule-file ${bad}/comm_order.csv)
ppb_expect_usage_error(csv_format_sync "SYNC barriers, which PyTorch's CSV cannot hold"
  schedule --name sync-1f1b --stages 2 --microbatches 4 --format csv)
ppb_expect_usage_error(dualpipe_v_short_batch "--microbatches: dualpipe-v needs at least 2 x stages = 8"
  schedule --name dualpipe-v --stages 4 --microbatches 6)
ppb_expect_usage_error(zb_v_chunks "--chunks: zb-v always has 2 chunks per stage"
  schedule --name zb-v --stages 4 --microbatches 8 --chunks 3)
ppb_expect_usage_error(schedule_file_missing_backward "missing_backward.json.*B"
  simulate --schedule-file ${bad}/missing_backward.json)
ppb_expect_usage_error(schedule_file_mismatch "--stages.*does not match"
  simulate --schedule-file ${bad}/valid_gpipe.json --stages 3)
ppb_expect_usage_error(both_cost_and_model "--model"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-tiny --fwd 2)

ppb_expect_usage_error(unknown_command "^pipebench: unknown command 'nosuchcmd' \\(commands: list, schedule, simulate, run, p2p, report, plan, health\\)$"
  nosuchcmd --stages 2)
ppb_expect_usage_error(negative_cost "--fwd: expected a time in \\[0, 1e9\\], got '-1'"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --fwd -1)
# A time whose sums overflow (an infinite step, a NaN bubble) is refused.
ppb_expect_usage_error(huge_cost_schedule "--fwd: expected a time in \\[0, 1e9\\], got '1e308'"
  schedule --name zb-1p --stages 2 --microbatches 4 --fwd 1e308)
ppb_expect_usage_error(huge_cost_simulate "--comm: expected a time in \\[0, 1e9\\], got '1e308'"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --comm 1e308)
ppb_expect_usage_error(too_many_actions_names_stages "^pipebench: --stages 2000000000 x --microbatches 4: too many actions"
  simulate --schedule 1f1b --stages 2000000000 --microbatches 4)
ppb_expect_usage_error(schedule_file_directory "tests/data: is a directory, expected a schedule file"
  simulate --schedule-file ${bad})
ppb_expect_usage_error(schedule_file_endless_device "/dev/zero: schedule file larger than 256 MiB"
  simulate --schedule-file /dev/zero)
ppb_expect_usage_error(trace_onto_directory "tests/data: cannot write: is a directory"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --trace ${bad})

# Output onto a device is written through: /dev/null stays a device.
add_test(NAME cli.trace_onto_device
  COMMAND sh -c "\"$1\" simulate --schedule 1f1b --stages 2 --microbatches 4 --trace /dev/null >/dev/null && test -c /dev/null"
          sh $<TARGET_FILE:pipebench>)
set_tests_properties(cli.trace_onto_device PROPERTIES LABELS unit TIMEOUT 30)

# Round trip: schedule --format json | simulate --schedule-file gives the
# same figures as simulate --schedule, checked by the script.
add_test(NAME cli.schedule_file_round_trip
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/round_trip.sh $<TARGET_FILE:pipebench>)
set_tests_properties(cli.schedule_file_round_trip PROPERTIES LABELS unit TIMEOUT 60)

# NVTX ranges of a real 2-rank run, recorded by an injected NVTX tool.
if(TARGET ppb_nvtx_recorder AND TARGET ppb_exec)
  add_test(NAME cli.run_nvtx_ranges
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/nvtx_run.sh $<TARGET_FILE:pipebench>
            $<TARGET_FILE:ppb_nvtx_recorder> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(cli.run_nvtx_ranges PROPERTIES LABELS mpi TIMEOUT 120)
endif()

# Collectors through the real binary on 2 ranks: an unknown name is a usage
# error from rank 0 listing the available ones; an unavailable collector warns
# once and the run completes with the other collectors' figures; --profile
# cupti beside the cpu backend completes, with or without a usable CUPTI.
if(TARGET ppb_exec)
  foreach(mode unknown unavailable cupti)
    add_test(NAME cli.run_collectors_${mode}
      COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/collectors_run.py ${mode}
              $<TARGET_FILE:pipebench> ${MPIEXEC_EXECUTABLE} ${CMAKE_CURRENT_BINARY_DIR}/collectors-${mode})
    set_tests_properties(cli.run_collectors_${mode} PROPERTIES LABELS mpi TIMEOUT 180 SKIP_RETURN_CODE 77)
  endforeach()
endif()

# The bad-input corpus (bench/tests/data/bad_inputs.tsv, run by
# bench/tests/bad_inputs.py): every subcommand, flag and input file, each
# case in a fresh folder with a FIFO, a symbolic link and a regular file in
# it; exit code, exactly one line of error holding the expected fragment, no
# crash, and the folder (and /dev/null) exactly as before.
if(TARGET ppb_exec)
  # The cases that set PPB_CUDAEMU_* variables run on the CUDA emulator.
  set(bad_emulator "")
  if(PPB_HAVE_CUDAEMU)
    string(REPLACE "LD_LIBRARY_PATH=" "" bad_emulator_dir "${PPB_CUDAEMU_ENV}")
    set(bad_emulator --emulator ${bad_emulator_dir})
  endif()
  add_test(NAME cli.bad_inputs
    COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/bad_inputs.py ${bad}/bad_inputs.tsv
            $<TARGET_FILE:pipebench> ${MPIEXEC_EXECUTABLE}
            ${PROJECT_SOURCE_DIR}/reports/reference/documents.json -j 2 ${bad_emulator})
  set_tests_properties(cli.bad_inputs PROPERTIES LABELS mpi TIMEOUT 300)
endif()

# `list --json`: the document against the registries it prints (list_test)
# and, through the command, against the human table (list_json_check.py).
ppb_add_gtest(list_test SOURCES tests/list_test.cpp cmd_list.cpp
              LIBS ppb_cli ppb::core ppb::exec)
add_test(NAME cli.list_json
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/list_json_check.py $<TARGET_FILE:pipebench>)
set_tests_properties(cli.list_json PROPERTIES LABELS unit TIMEOUT 30)

# `plan` through the command: pipebench.plan/1, the winner's trace, the
# text table with reasons, the advice when nothing fits.
add_test(NAME cli.plan
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/plan_run.py $<TARGET_FILE:pipebench>
          ${CMAKE_CURRENT_BINARY_DIR}/plan-run)
set_tests_properties(cli.plan PROPERTIES LABELS unit TIMEOUT 120)
# `plan --validate` on the recorded H200 night, whose two ranks shared one
# GPU: the planner refuses their samples/s (the table and the mean say
# n/a, never "n/a%") and still predicts their memory.
add_test(NAME cli.plan_validate_shared_gpu
  COMMAND $<TARGET_FILE:pipebench> plan --validate ${PROJECT_SOURCE_DIR}/reports/tests/data/h200)
set_tests_properties(cli.plan_validate_shared_gpu PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "over 5 combinations: samples/s n/a, peak memory 0\\.[0-9]+%\n5 results: samples/s not predicted \\(peak memory is\\): 2 ranks shared one GPU"
  FAIL_REGULAR_EXPRESSION "n/a%")

# `report` on a 16 MiB result (a long timeline and half a million steps):
# peak memory bounded by a multiple of the file's size, in a child process
# (bench/tests/report_memory.py; every writer rendered the whole report
# whether asked or not, and the Google Benchmark JSON as one tree).
add_test(NAME cli.report_memory
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/report_memory.py $<TARGET_FILE:pipebench>
          ${bad}/result_ok.json ${CMAKE_CURRENT_BINARY_DIR}/report-memory)
set_tests_properties(cli.report_memory PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
if(PPB_SANITIZE)
  # AddressSanitizer's shadow memory and quarantine inflate the peak RSS
  # (540 MiB for the 16 MiB file); the bound is checked by the plain build.
  set_tests_properties(cli.report_memory PROPERTIES ENVIRONMENT "PPB_SANITIZED=${PPB_SANITIZE}")
endif()

# ci/suite resolves the paths it is given against the caller's folder
# (--regate r --baseline base/nights from outside the checkout).
add_test(NAME cli.suite_paths
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/suite_paths.sh $<TARGET_FILE:pipebench>
          ${bad}/result_ok.json)
set_tests_properties(cli.suite_paths PROPERTIES LABELS unit TIMEOUT 60 SKIP_RETURN_CODE 77)

# A data-parallel rank stopped (SIGSTOP) in the middle of a step is named by
# its MPI rank, stage and replica by the rank waiting for it (4 ranks, a few
# seconds).
if(TARGET ppb_exec)
  add_test(NAME cli.stop_rank
    COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/stop_rank.py $<TARGET_FILE:pipebench>
            ${MPIEXEC_EXECUTABLE} ${CMAKE_CURRENT_BINARY_DIR}/stop-rank)
  set_tests_properties(cli.stop_rank PROPERTIES LABELS mpi TIMEOUT 60)
endif()
# --make-vocab-size-divisible-by: a whole number >= 1 on run, simulate and plan.
ppb_expect_usage_error(vocab_divisor_zero
  "^pipebench: --make-vocab-size-divisible-by: expected an integer in \\[1, 16777216\\], got '0'"
  simulate --schedule 1f1b --stages 2 --microbatches 4 --model gpt-tiny
  --make-vocab-size-divisible-by 0)
ppb_expect_usage_error(vocab_divisor_negative
  "--make-vocab-size-divisible-by: expected an integer in \\[1, 16777216\\], got '-8'"
  plan --gpus 8 --model gpt-small --make-vocab-size-divisible-by -8)
ppb_expect_usage_error(vocab_divisor_not_integer
  "--make-vocab-size-divisible-by: expected an integer in \\[1, 16777216\\], got '1.5'"
  run --make-vocab-size-divisible-by 1.5)

# What a command prints must reach standard output: a full disk under
# `> out.json` is an error (exit 2, one line), not a truncated file and 0.
add_test(NAME cli.stdout_full_disk
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 2 20
          "^pipebench: standard output: cannot write \\(a full disk or a closed pipe\\?\\)$"
          -- sh -c "$<TARGET_FILE:pipebench> plan --gpus 8 --device h100 --model gpt-tiny --format json > /dev/full")
set_tests_properties(cli.stdout_full_disk PROPERTIES LABELS unit TIMEOUT 30)

# An output on a read-only file system is refused before any is written.
add_test(NAME cli.report_readonly_output
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/readonly_output.sh $<TARGET_FILE:pipebench>
          ${PROJECT_SOURCE_DIR}/reports/tests/data/h200)
set_tests_properties(cli.report_readonly_output PROPERTIES LABELS unit TIMEOUT 30 SKIP_RETURN_CODE 77)

# Ranks asked different things (other flags; other --rerun files) end the
# job before anything runs.
add_test(NAME cli.ranks_disagree
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/ranks_disagree.sh $<TARGET_FILE:pipebench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli.ranks_disagree PROPERTIES LABELS mpi TIMEOUT 120)

# p2p --timeout: a rank stopped while measuring ends the job, named.
add_test(NAME cli.p2p_timeout
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/p2p_timeout.sh $<TARGET_FILE:pipebench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli.p2p_timeout PROPERTIES LABELS mpi TIMEOUT 90)

# p2p --json is checked on rank 0, which writes it, not on every rank.
add_test(NAME cli.p2p_json_rank0
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/p2p_json_rank0.sh $<TARGET_FILE:pipebench>
          ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli.p2p_json_rank0 PROPERTIES LABELS mpi TIMEOUT 90 SKIP_RETURN_CODE 77)

# --chunks and --batches default to the schedule's own in schedule and
# simulate, as in run: interleaved-1f1b V=2, pipedream B=2.
add_test(NAME cli.simulate_default_chunks
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 0 20
          "^schedule interleaved-1f1b  P=2 M=4 V=2 "
          -- $<TARGET_FILE:pipebench> simulate --schedule interleaved-1f1b -p 2 -m 4)
add_test(NAME cli.schedule_default_batches
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 0 20
          "^# pipedream stages=2 microbatches=4 chunks=1 batches=2$"
          -- $<TARGET_FILE:pipebench> schedule --name pipedream -p 2 -m 4)
set_tests_properties(cli.simulate_default_chunks cli.schedule_default_batches
                     PROPERTIES LABELS unit TIMEOUT 30)

# Integers are decimal: "010" is not octal 8 nor "0x4" hex 4, whatever the flag.
ppb_expect_usage_error(octal_integer "--stages: expected a decimal integer, got '010'"
  schedule --name 1f1b --stages 010 --microbatches 4)
ppb_expect_usage_error(hex_integer "--microbatches: expected a decimal integer, got '0x4'"
  schedule --name 1f1b --stages 2 --microbatches 0x4)
# A list flag too (run's --microbatches 010 once ran M=10).
ppb_expect_usage_error(octal_integer_list
  "--microbatches: expected positive integers separated by commas, got '010'"
  run --microbatches 4,010)

# An empty value is refused, not taken as the option's default (through sh:
# CMake drops an empty argument).
add_test(NAME cli.empty_value
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/tests/expect_exit.sh 2 20
          "^pipebench: --gpu-memory: expected a value, got '' \\(see pipebench --help\\)$"
          -- sh -c "$<TARGET_FILE:pipebench> plan --gpus 8 --device h100 --model gpt-tiny --gpu-memory ''")
set_tests_properties(cli.empty_value PROPERTIES LABELS unit TIMEOUT 30)
