"""The suite's long tail: the tests the README's test command skips and CI runs next
(`python -m pytest -m long`), chosen by their CPU time (their own and their waited-for
children's, gcc included; the README's "The long tail of the tests" says how long each part
takes and how that was measured). tests/conftest.py marks them `long`."""

# Each entry is a node id prefix (a test function covers all its parameters).
LONG_TAIL = (
    # C units built for other ISAs than the host's
    "tests/compiler/test_c_isas.py::test_every_unit_builds_for_avx512",
    "tests/compiler/test_copy_plan_casts.py::test_every_pair_converts_as_torch[avx2",
    "tests/compiler/test_copy_plan_casts.py::test_every_pair_converts_as_torch[portable",
    "tests/compiler/test_copy_plan_casts.py::test_half_round_trip_through_float32_is_exact[avx2",
    "tests/compiler/test_copy_plan_casts.py::test_half_round_trip_through_float32_is_exact[portable",
    "tests/compiler/test_copy_plan_casts.py::test_kernels_built_for_avx2",
    "tests/compiler/test_copy_plan_casts.py::test_kernels_built_without_vectors",
    # every bench row run small, end to end; the GPU first-contact script's dry run
    "tests/bench/test_first_contact.py::test_dry_run_end_to_end",
    "tests/bench/test_suites.py::test_smoke_checks_every_row",
    "tests/bench/test_smoke.py::test_smoke_run_end_to_end",
    "tests/bench/test_smoke.py::test_tune_smoke_checks_every_variant",
    # the graph fuzzer's CI profile (about 150 graphs)
    "tests/reliability/test_fuzz.py::test_fuzz_graphs_against_the_reference",
    # Inductor compiles, processes started, forked or racing: the copy planner's library
    # against guard pages and the C units under the sanitizers, each in a child process
    "tests/compiler/test_copy_plan_bounds.py::test_plans_stay_inside_their_storages",
    "tests/compiler/test_copy_plan_bounds.py::test_wide_runs_that_flip_or_gather_are_right",
    "tests/compiler/test_copy_plan_cast_masks.py::test_masked_casts_stay_inside_their_storages",
    "tests/reliability/test_sanitized.py::test_the_generated_c_runs_clean_under_the_sanitizers",
    "tests/torch/test_out_op.py::test_out_overload_under_torch_compile",
    "tests/torch/test_symbolic_op.py::test_torch_compile_dynamic_compiles_once_for_every_batch_size",
    "tests/reliability/test_sanitized.py::test_the_sanitizers_report_a_read_past_a_tensor",
    "tests/compiler/test_codegen_c_copy.py::test_a_corrupt_cached_library_is_rebuilt",
    # the call keys' TensorImpl reader: a C++ build against torch's headers
    "tests/runtime/test_builtin_calls.py::test_keys_read_from_the_tensor_fields_tell_calls_apart_as_the_getters",
    "tests/runtime/test_builtin_calls.py::test_versions_bumped_through_the_tensor_fields",
    "tests/runtime/test_builtin_calls.py::test_cached_calls_on_keys_from_the_tensor_fields",
    "tests/runtime/test_cache.py::test_a_second_process_reuses_the_disk_entry",
    "tests/runtime/test_cache.py::test_a_damaged_c_library_is_rebuilt",
    "tests/reliability/test_cache_faults.py::test_a_build_killed_then_retried",
    "tests/bench/test_first_contact.py::test_a_phase_past_its_deadline_is_stopped_and_the_next_runs",
    "tests/test_stop_after.py::test_a_run_past_its_time_ends_with_its_summary_and_junit",
    "tests/runtime/test_without_triton.py::test_without_triton",
    "tests/torch/test_einops.py::test_einops_is_imported_only_when_traced",
    "tests/reliability/test_fork.py",
    "tests/reliability/test_cache_faults.py::test_two_processes_compile_the_same_graph_at_once",
    "tests/runtime/test_cache_size.py::test_processes_compile_while_another_clears_the_cache",
    "tests/reliability/test_no_litter.py::test_a_run_leaves_its_temporary_folder_empty",
    # copies of more than 2**31 elements
    "tests/reliability/test_large.py::test_cpu_copy_above_2_31_elements",
)
