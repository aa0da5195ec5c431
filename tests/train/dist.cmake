# The trainer on real MPI ranks: communicator, ZeRO-3, checkpoints, resume, expert parallelism.
mt_test_binary(test_dist_comm train/dist_comm.c)
mt_test_mpi_cases(test_dist_comm 2 dist_comm_np2)
mt_test_mpi_cases(test_dist_comm 3 dist_comm_np3)
mt_test_binary(test_dist_zero train/dist_zero.c)
mt_test_mpi_cases(test_dist_zero 1 dist_zero_np1)
mt_test_mpi_cases(test_dist_zero 2 dist_zero_np2)
mt_test_mpi_cases(test_dist_zero 3 dist_zero_np3)
mt_test_mpi_cases(test_dist_zero 1 dist_zero_bf16_np1)
mt_test_mpi_cases(test_dist_zero 2 dist_zero_bf16_np2)
mt_test_mpi_cases(test_dist_zero 3 dist_zero_bf16_np3)
mt_test_mpi_cases(test_dist_zero 2 dist_zero_node_np2)
mt_test_mpi_cases(test_dist_zero 3 dist_zero_node_np3)
mt_test_binary(test_dist_checkpoint train/dist_checkpoint.c)
mt_test_mpi_cases(test_dist_checkpoint 2 dist_checkpoint_save_np2)
mt_test_mpi_cases(test_dist_checkpoint 2 dist_checkpoint_load_np2)
mt_test_mpi_cases(test_dist_checkpoint 3 dist_checkpoint_load_np3)
mt_test_mpi_cases(test_dist_checkpoint 1 dist_checkpoint_load_np1)
mt_test_mpi_cases(test_dist_checkpoint 2 dist_checkpoint_format1_np2)
mt_test_mpi_cases(test_dist_checkpoint 3 dist_checkpoint_format1_np3)
set_tests_properties(dist_checkpoint_save_np2 PROPERTIES FIXTURES_SETUP dist_ckpt)
set_tests_properties(dist_checkpoint_load_np2 dist_checkpoint_load_np3 dist_checkpoint_load_np1
  PROPERTIES FIXTURES_REQUIRED dist_ckpt)

# End-to-end runs of minimax-train on real ranks, then comparisons: mt_test_run(NAME SCRIPT MODE
# [ARGS...]) runs `tests/train/SCRIPT.sh BIN MODE ARGS...` (run_common.sh: the launcher they share).
function(mt_test_run name script)
  add_test(NAME ${name} COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/${script}.sh
    $<TARGET_FILE:minimax-train> ${ARGN})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
    TIMEOUT 600 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
endfunction()
mt_test_run(dist_train_np1 run_ranks ranks 1)
mt_test_run(dist_train_np2 run_ranks ranks 2)
mt_test_run(dist_train_np4 run_ranks ranks 4)
mt_test_run(dist_train_m2_np1 run_ranks ranks 1 m2)
mt_test_run(dist_train_m2_np2 run_ranks ranks 2 m2)
mt_test_run(dist_train_m2_np4 run_ranks ranks 4 m2)
mt_test_run(dist_train_m3_np1 run_ranks ranks 1 m3)
mt_test_run(dist_train_m3_np2 run_ranks ranks 2 m3)
mt_test_run(dist_train_m3_np4 run_ranks ranks 4 m3)
mt_test_run(dist_train_resume_straight run_resume resume-straight)
mt_test_run(dist_train_resume_split run_resume resume-split)
mt_test_run(dist_resume_alone run_resume resume-alone)
mt_test_run(dist_resume_earlier_build run_resume resume-earlier $<TARGET_FILE:test_poke>)
mt_test_run(dist_eval_only run_eval eval-only)
mt_test_run(dist_train_kill run_stop kill)
mt_test_run(dist_train_signal run_stop signal)
mt_test_run(data_recipe_trainer_errors run_failures bad-recipe)
mt_test_run(dist_train_nonfinite run_failures nonfinite)
mt_test_run(dist_train_disk_full run_failures disk-full)
mt_test_run(dist_train_trim run_ranks trim)
mt_test_run(dist_train_padfree run_ranks padfree)
mt_test_run(dist_train_mpi_copies run_ranks mpi-copies)
mt_test_run(dist_train_expert run_ranks expert)
mt_test_run(dist_train_ep run_ep ep)
mt_test_run(dist_ep_kill run_stop ep-kill)
mt_test_run(dist_train_bf16_gather run_ranks bf16-gather)
mt_test_run(dist_train_recompute run_ranks recompute)
mt_test_run(dist_train_eval run_eval eval)
mt_test_run(dist_eval_generate run_eval generate)
mt_test_run(dist_train_mixed run_data mixed)
mt_test_run(dist_train_seed run_data seed)
mt_test_run(dist_train_metrics run_resume metrics)
# the logger's metrics.jsonl after that resume (--rewind) into the same directory
mt_test_binary(test_data_metrics train/data_metrics.c)
mt_test_cases(test_data_metrics data_logger_metrics_match)
set_tests_properties(dist_train_metrics PROPERTIES FIXTURES_SETUP dist_metrics)
set_tests_properties(data_logger_metrics_match PROPERTIES FIXTURES_REQUIRED dist_metrics)
# output.report_to's TensorBoard event files of such a run (eval.generate too), read back in C
mt_test_run(dist_train_tboard run_resume tboard)
mt_test_cases(test_data_tboard data_tboard_match)
set_tests_properties(dist_train_tboard PROPERTIES FIXTURES_SETUP dist_tboard)
set_tests_properties(data_tboard_match PROPERTIES FIXTURES_REQUIRED dist_tboard)
set_tests_properties(dist_train_mixed PROPERTIES SKIP_RETURN_CODE 77)
mt_test_run(dist_train_outdir run_outdir outdir)
mt_test_run(dist_train_watchdog run_stop watchdog)
mt_test_run(dist_train_global_batch run_resume global-batch)
mt_test_run(dist_train_resume_check run_resume resume-check $<TARGET_FILE:test_corrupt>)
# the branches of the long runs above that their shortest runs and refusals reach too
mt_test_run(dist_train_brief run_brief brief)
set_tests_properties(dist_train_np1 dist_train_np2 dist_train_np4 PROPERTIES FIXTURES_SETUP dist_ranks)
set_tests_properties(dist_train_m2_np1 dist_train_m2_np2 dist_train_m2_np4 PROPERTIES
  FIXTURES_SETUP dist_m2_ranks)
set_tests_properties(dist_train_m3_np1 dist_train_m3_np2 dist_train_m3_np4 PROPERTIES
  FIXTURES_SETUP dist_m3_ranks)
set_tests_properties(dist_train_resume_straight PROPERTIES FIXTURES_SETUP dist_resume_a)
set_tests_properties(dist_train_resume_split PROPERTIES FIXTURES_REQUIRED dist_resume_a FIXTURES_SETUP dist_resume_b)
mt_test_binary(test_dist_compare train/dist_compare.c)
mt_test_cases(test_dist_compare dist_ranks_match dist_m2_ranks_match dist_m3_ranks_match dist_resume_match dist_global_batch_match dist_trim_match
  dist_padfree_match dist_mpi_copies_match
  dist_expert_match dist_bf16_gather_match dist_recompute_match dist_eval_match dist_ep_match)
set_tests_properties(dist_train_recompute PROPERTIES FIXTURES_REQUIRED dist_expert
  FIXTURES_SETUP dist_recompute)
set_tests_properties(dist_recompute_match PROPERTIES FIXTURES_REQUIRED "dist_recompute;dist_expert")
set_tests_properties(dist_train_eval PROPERTIES FIXTURES_SETUP dist_eval)
set_tests_properties(dist_eval_match PROPERTIES FIXTURES_REQUIRED dist_eval)
set_tests_properties(dist_train_bf16_gather PROPERTIES FIXTURES_SETUP dist_bf16g)
set_tests_properties(dist_bf16_gather_match PROPERTIES FIXTURES_REQUIRED dist_bf16g)
set_tests_properties(dist_train_expert PROPERTIES FIXTURES_SETUP dist_expert)
set_tests_properties(dist_train_ep PROPERTIES FIXTURES_SETUP dist_ep)
set_tests_properties(dist_ep_match PROPERTIES FIXTURES_REQUIRED
  "dist_ep;dist_ranks;dist_m2_ranks;dist_m3_ranks")
set_tests_properties(dist_expert_match PROPERTIES FIXTURES_REQUIRED "dist_expert;dist_ranks")
set_tests_properties(dist_train_trim PROPERTIES FIXTURES_SETUP dist_trim)
set_tests_properties(dist_trim_match PROPERTIES FIXTURES_REQUIRED dist_trim)
set_tests_properties(dist_train_padfree PROPERTIES FIXTURES_SETUP dist_padfree)
set_tests_properties(dist_padfree_match PROPERTIES FIXTURES_REQUIRED
  "dist_padfree;dist_trim;dist_ranks;dist_m2_ranks;dist_m3_ranks")
set_tests_properties(dist_train_mpi_copies PROPERTIES FIXTURES_SETUP dist_mpi_copies)
set_tests_properties(dist_mpi_copies_match PROPERTIES FIXTURES_REQUIRED
  "dist_mpi_copies;dist_ranks;dist_bf16g")
set_tests_properties(dist_ranks_match PROPERTIES FIXTURES_REQUIRED dist_ranks)
set_tests_properties(dist_m2_ranks_match PROPERTIES FIXTURES_REQUIRED dist_m2_ranks)
set_tests_properties(dist_m3_ranks_match PROPERTIES FIXTURES_REQUIRED dist_m3_ranks)
set_tests_properties(dist_resume_match PROPERTIES FIXTURES_REQUIRED "dist_resume_a;dist_resume_b")
set_tests_properties(dist_train_global_batch PROPERTIES FIXTURES_SETUP dist_gb)
set_tests_properties(dist_global_batch_match PROPERTIES FIXTURES_REQUIRED dist_gb)
mt_test_binary(test_dist_adversarial train/dist_adversarial.c)
mt_test_mpi_cases(test_dist_adversarial 2 dist_adversarial_routing_np2)
mt_test_mpi_cases(test_dist_adversarial 4 dist_adversarial_routing_np4)
mt_test_mpi_cases(test_dist_adversarial 2 dist_adversarial_experts_np2)
mt_test_mpi_cases(test_dist_adversarial 3 dist_adversarial_experts_np3)
mt_test_mpi_cases(test_dist_adversarial 2 dist_adversarial_m2_routing_np2)
mt_test_mpi_cases(test_dist_adversarial 4 dist_adversarial_m2_routing_np4)
mt_test_mpi_cases(test_dist_adversarial 3 dist_adversarial_m2_experts_np3)
mt_test_mpi_cases(test_dist_adversarial 2 dist_ep_adversarial_np2)
mt_test_mpi_cases(test_dist_adversarial 4 dist_ep_adversarial_np4)
mt_test_mpi_cases(test_dist_adversarial 4 dist_ep_adversarial_m2_np4)
set_tests_properties(dist_ep_adversarial_np2 dist_ep_adversarial_np4 dist_ep_adversarial_m2_np4
  PROPERTIES TIMEOUT 120)
set_tests_properties(dist_adversarial_routing_np2 dist_adversarial_routing_np4
  dist_adversarial_m2_routing_np2 dist_adversarial_m2_routing_np4 PROPERTIES TIMEOUT 120)
# the MPI communicator's byte tally (mt_comm_mpi_bytes), hand-counted (tests/train/dist_comm_bytes.c)
mt_test_binary(test_dist_comm_bytes train/dist_comm_bytes.c)
mt_test_mpi_cases(test_dist_comm_bytes 3 dist_comm_bytes_np3)
# what a resume, or any run, may do to output directories: another run's results, train.max_steps
# at or below the checkpoint's step, an older checkpoint (--rewind), outputs over inputs
add_test(NAME dist_resume_guard COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/dist_resume_guard.sh
  ${CMAKE_BINARY_DIR})
set_tests_properties(dist_resume_guard PROPERTIES ENVIRONMENT "${MT_TEST_ENV};${MT_TEST_ENV_MPI}"
  TIMEOUT 300 WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# how a user starts and ends a run (tests/train/run_launch.sh): a recipe run from another
# directory, its error as the first line, a clean stop without mpirun's abort banner
mt_test_run(data_recipe_anywhere run_launch anywhere)
mt_test_run(data_recipe_error_first run_launch error-first)
mt_test_run(dist_train_stop_clean run_launch clean-stop)
# the head objectives (tests/train/run_head.sh): a reward model on 1, 2 and 4 ranks, resumed,
# with expert parallelism and bf16 gathers; classification, token classification and QA on 1
# and 2 ranks
mt_test_run(dist_train_rm_np1 run_head reward 1)
mt_test_run(dist_train_rm_np2 run_head reward 2)
mt_test_run(dist_train_rm_np4 run_head reward 4)
mt_test_run(dist_train_rm_m2_np1 run_head reward 1 m2)
mt_test_run(dist_train_rm_m2_np2 run_head reward 2 m2)
mt_test_run(dist_train_rm_m3_np1 run_head reward 1 m3)
mt_test_run(dist_train_rm_m3_np2 run_head reward 2 m3)
mt_test_run(dist_train_rm_layouts run_head reward-layouts)
mt_test_run(dist_train_tiny_rm run_head tiny-rm)
mt_test_run(dist_train_heads_np1 run_head heads 1)
mt_test_run(dist_train_heads_np2 run_head heads 2)
set_tests_properties(dist_train_rm_np1 dist_train_rm_np2 dist_train_rm_np4 dist_train_rm_m2_np1
  dist_train_rm_m2_np2 dist_train_rm_m3_np1 dist_train_rm_m3_np2 PROPERTIES FIXTURES_SETUP dist_rm)
set_tests_properties(dist_train_rm_layouts PROPERTIES FIXTURES_REQUIRED dist_rm
  FIXTURES_SETUP dist_rm_layouts)
set_tests_properties(dist_train_heads_np1 dist_train_heads_np2 PROPERTIES FIXTURES_SETUP dist_heads)
mt_test_cases(test_dist_compare dist_rm_ranks_match dist_rm_layouts_match dist_heads_match)
set_tests_properties(dist_rm_ranks_match PROPERTIES FIXTURES_REQUIRED dist_rm)
set_tests_properties(dist_rm_layouts_match PROPERTIES FIXTURES_REQUIRED "dist_rm;dist_rm_layouts")
set_tests_properties(dist_heads_match PROPERTIES FIXTURES_REQUIRED dist_heads)
# Context parallelism in the trainer (tests/train/run_cp.sh; the ops and the model alone:
# tests/train/cp.cmake): runs against the 1-rank runs of mode ranks, resume, refusals, a kill
mt_test_run(dist_train_cp run_cp cp)
mt_test_run(dist_cp_kill run_stop cp-kill)
set_tests_properties(dist_train_cp PROPERTIES FIXTURES_SETUP dist_cp)
mt_test_cases(test_dist_compare dist_cp_match)
set_tests_properties(dist_cp_match PROPERTIES FIXTURES_REQUIRED "dist_cp;dist_ranks;dist_m2_ranks;dist_m3_ranks")
# label heavy: left out of CI's sanitizer pass (2.5 minutes there for 13 runs), run in its normal
# pass; their code runs under the sanitizers through dist_cp_model, dist_cp_msa,
# dist_cp_attention, dist_cp_lightning and dist_cp_kill
set_tests_properties(dist_train_cp dist_cp_match PROPERTIES LABELS heavy)
