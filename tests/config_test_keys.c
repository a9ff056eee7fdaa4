/* The key table of the ds_config loader tests (config_test.h). Every key in the schema has a row here with
 * its canonical path, the zinc_config field it must land in (offsetof, written by hand so a mis-mapped schema
 * entry is caught), a valid value and its effect, and the default; test_config_schema's coverage check fails
 * when a schema key has no row. */
#include <stddef.h>
#include <string.h>

#include "config_test.h"

const key_row rows[] = {
    /* batch triad (defaults are the resolved values for train_batch_size 8 on one rank) */
    {"train_batch_size", F(train_batch_size), NULL, "16", "16", "8", 0},
    {"train_micro_batch_size_per_gpu", F(train_micro_batch_size_per_gpu), NULL, "4", "4", "8", 0},
    {"gradient_accumulation_steps", F(gradient_accumulation_steps), NULL, "2", "2", "1", 0},
    /* top-level scalars */
    {"gradient_clipping", F(gradient_clipping), NULL, "0.5", "0.5", "1.0", 0}, /* 0.19.8 constants.py */
    {"steps_per_print", F(steps_per_print), NULL, "10", "10", "0", 0},       /* code default None: no report */
    {"wall_clock_breakdown", F(wall_clock_breakdown), NULL, "true", "true", "false", 0},
    {"memory_breakdown", F(memory_breakdown), NULL, "true", "true", "false", 0},
    {"dump_state", F(dump_state), NULL, "true", "true", "false", 0},
    {"communication_data_type", F(comm_dtype), NULL, "\"bf16\"", "\"bf16\"", "\"fp32\"", 0},
    {"prescale_gradients", F(prescale_gradients), NULL, "true", "true", "false", 0},
    {"gradient_predivide_factor", F(gradient_predivide_factor), NULL, "2.0", "2.0", "1.0", 0},
    /* optimizer */
    {"optimizer.type", F(optimizer.type), NULL, "\"adamw\"", "\"AdamW\"", "\"Adam\"", 0},
    {"optimizer.params.lr", F(optimizer.lr), NULL, "0.01", "0.01", "0.001", 0},
    {"optimizer.params.betas", F(optimizer.beta1), NULL, "[0.8, 0.99]", "[0.8, 0.99]", "[0.9, 0.999]", 0},
    {"optimizer.params.eps", F(optimizer.eps), NULL, "1e-6", "1e-6", "1e-8", 0},
    {"optimizer.params.weight_decay", F(optimizer.weight_decay), NULL, "0.1", "0.1", "0.0", 0},
    {"optimizer.params.bias_correction", F(optimizer.bias_correction), NULL, "false", "false", "true", 0},
    {"optimizer.params.adam_w_mode", F(optimizer.adam_w_mode), NULL, "false", "false", "true", 0},
    {"optimizer.params.torch_adam", F(optimizer.torch_adam), NULL, "true", "true", "false", 0},
    {"optimizer.params.max_coeff", F(optimizer.max_coeff), OPT_LAMB, "5.0", "5.0", "10.0", 0},
    {"optimizer.params.min_coeff", F(optimizer.min_coeff), OPT_LAMB, "0.1", "0.1", "0.01", 0},
    {"optimizer.params.eps_inside_sqrt", F(optimizer.eps_inside_sqrt), OPT_LAMB, "true", "true", "false", 0},
    /* scheduler */
    {"scheduler.type", F(scheduler.type), NULL, "\"warmuplr\"", "\"WarmupLR\"", "\"none\"", 0},
    {"scheduler.params.warmup_min_lr", F(scheduler.warmup_min_lr), SCHED_WLR, "1e-5", "1e-5", "0.0", 0},
    {"scheduler.params.warmup_max_lr", F(scheduler.warmup_max_lr), SCHED_WDL, "0.01", "0.01", "0.001", 0},
    {"scheduler.params.warmup_num_steps", F(scheduler.warmup_num_steps), SCHED_WCL, "50", "50", "1000", 0},
    {"scheduler.params.warmup_type", F(scheduler.warmup_type), SCHED_WLR, "\"linear\"", "\"linear\"", "\"log\"", 0},
    {"scheduler.params.total_num_steps", F(scheduler.total_num_steps), "{\"scheduler\":{\"type\":\"WarmupDecayLR\"}}",
     "5000", "5000", "0", REQUIRED},
    {"scheduler.params.warmup_min_ratio", F(scheduler.warmup_min_ratio), SCHED_WCL, "0.1", "0.1", "0.0", 0},
    {"scheduler.params.cos_min_ratio", F(scheduler.cos_min_ratio), SCHED_WCL, "0.01", "0.01", "1e-4", 0},
    {"scheduler.params.cycle_min_lr", F(scheduler.cycle_min_lr),
     "{\"scheduler\":{\"type\":\"OneCycle\",\"params\":{\"cycle_max_lr\":0.1}}}", "0.002", "0.002", "0", REQUIRED},
    {"scheduler.params.cycle_max_lr", F(scheduler.cycle_max_lr),
     "{\"scheduler\":{\"type\":\"OneCycle\",\"params\":{\"cycle_min_lr\":0.001}}}", "0.1", "0.1", "0", REQUIRED},
    {"scheduler.params.decay_lr_rate", F(scheduler.decay_lr_rate), SCHED_OC, "0.5", "0.5", "0.0", 0},
    {"scheduler.params.cycle_first_step_size", F(scheduler.cycle_first_step_size), SCHED_OC, "100", "100", "2000", 0},
    {"scheduler.params.cycle_second_step_size", F(scheduler.cycle_second_step_size), SCHED_OC, "50", "50", "-1", 0},
    {"scheduler.params.cycle_first_stair_count", F(scheduler.cycle_first_stair_count), SCHED_OC, "4", "4", "0", 0},
    {"scheduler.params.cycle_second_stair_count", F(scheduler.cycle_second_stair_count), SCHED_OC, "4", "4", "0", 0},
    {"scheduler.params.decay_step_size", F(scheduler.decay_step_size), SCHED_OC, "10", "10", "0", 0},
    {"scheduler.params.cycle_momentum", F(scheduler.cycle_momentum), SCHED_OC, "false", "false", "true", 0},
    {"scheduler.params.cycle_min_mom", F(scheduler.cycle_min_mom), SCHED_OC, "0.7", "0.7", "0.8", 0},
    {"scheduler.params.cycle_max_mom", F(scheduler.cycle_max_mom), SCHED_OC, "0.95", "0.95", "0.9", 0},
    {"scheduler.params.decay_mom_rate", F(scheduler.decay_mom_rate), SCHED_OC, "0.1", "0.1", "0.0", 0},
    /* fp16 / bf16 */
    {"fp16.enabled", F(fp16.enabled), NULL, "true", "true", "false", 0},
    {"fp16.auto_cast", F(fp16.auto_cast), NULL, "true", "true", "false", 0},
    {"fp16.loss_scale", F(fp16.loss_scale), NULL, "128", "128.0", "0.0", 0},
    {"fp16.initial_scale_power", F(fp16.initial_scale_power), NULL, "12", "12", "16", 0},
    {"fp16.loss_scale_window", F(fp16.loss_scale_window), NULL, "500", "500", "1000", 0},
    {"fp16.hysteresis", F(fp16.hysteresis), NULL, "4", "4", "2", 0},
    {"fp16.consecutive_hysteresis", F(fp16.consecutive_hysteresis), NULL, "true", "true", "false", 0},
    {"fp16.min_loss_scale", F(fp16.min_loss_scale), NULL, "2", "2.0", "1.0", 0},
    {"bf16.enabled", F(bf16_enabled), NULL, "true", "true", "false", 0},
    {"bf16.immediate_grad_update", F(bf16_immediate_grad_update), NULL, "true", "true", "false", 0},
    {"bf16.check_grad_overflow", F(bf16_check_grad_overflow), NULL, "false", "false", "true", 0},
    /* zero_optimization */
    {"zero_optimization.stage", F(zero.stage), NULL, "2", "2", "0", 0},
    {"zero_optimization.contiguous_gradients", F(zero.contiguous_gradients), NULL, "false", "false", "true", 0},
    {"zero_optimization.overlap_comm", F(zero.overlap_comm), NULL, "true", "true", "false", 0},
    {"zero_optimization.reduce_scatter", F(zero.reduce_scatter), NULL, "false", "false", "true", 0},
    {"zero_optimization.reduce_bucket_size", F(zero.reduce_bucket_size), NULL, "5e5", "500000", "500000000", 0},
    {"zero_optimization.allgather_bucket_size", F(zero.allgather_bucket_size), NULL, "2e8", "200000000", "500000000",
     0},
    {"zero_optimization.allgather_partitions", F(zero.allgather_partitions), NULL, "false", "false", "true", 0},
    {"zero_optimization.sub_group_size", F(zero.sub_group_size), NULL, "1e6", "1000000", "1000000000", 0},
    {"zero_optimization.stage3_prefetch_bucket_size", F(zero.prefetch_bucket_size), STAGE3, "1e5", "100000", "50000000",
     0},
    {"zero_optimization.stage3_param_persistence_threshold", F(zero.param_persistence_threshold), STAGE3, "1000",
     "1000", "100000", 0},
    {"zero_optimization.stage3_model_persistence_threshold", F(zero.model_persistence_threshold), STAGE3, "1e9",
     "1000000000", "9223372036854775807", 0},
    {"zero_optimization.stage3_max_live_parameters", F(zero.max_live_parameters), STAGE3, "1e6", "1000000",
     "1000000000", 0},
    {"zero_optimization.stage3_max_reuse_distance", F(zero.max_reuse_distance), STAGE3, "1e6", "1000000", "1000000000",
     0},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", F(zero.gather_16bit_weights_on_model_save), STAGE3,
     "true", "true", "false", 0},
    {"zero_optimization.round_robin_gradients", F(zero.round_robin_gradients), NULL, "true", "true", "false", 0},
    {"zero_optimization.ignore_unused_parameters", F(zero.ignore_unused_parameters), NULL, "false", "false", "true", 0},
    {"zero_optimization.load_from_fp32_weights", F(zero.load_from_fp32_weights), NULL, "false", "false", "true", 0},
    /* only true is accepted (false is refused, test_config_rules) */
    {"zero_optimization.compute_grad_norm", F(zero.compute_grad_norm), NULL, "true", "true", "true", 0},
    /* offload_optimizer (DeepSpeed's code default device is "none"; its docs say cpu) */
    {"zero_optimization.offload_optimizer.device", F(zero.offload_optimizer.device), STAGE2, "\"cpu\"", "\"cpu\"",
     "\"none\"", 0},
    {"zero_optimization.offload_optimizer.nvme_path", F(zero.offload_optimizer.nvme_path), STAGE2, "\"/tmp/x\"",
     "\"/tmp/x\"", "\"\"", 0},
    {"zero_optimization.offload_optimizer.buffer_count", F(zero.offload_optimizer.buffer_count), STAGE2, "8", "8", "4",
     0},
    {"zero_optimization.offload_optimizer.pin_memory", F(zero.offload_optimizer.pin_memory), STAGE2, "false",
     "false", "true", 0},
    {"zero_optimization.offload_optimizer.pipeline_read", F(zero.offload_optimizer.pipeline_read), STAGE2, "true",
     "true", "false", 0},
    {"zero_optimization.offload_optimizer.pipeline_write", F(zero.offload_optimizer.pipeline_write), STAGE2, "true",
     "true", "false", 0},
    {"zero_optimization.offload_optimizer.fast_init", F(zero.offload_optimizer.fast_init), STAGE2, "true", "true",
     "false", 0},
    {"zero_optimization.offload_optimizer.ratio", F(zero.offload_optimizer.ratio), STAGE3, "0.5", "0.5", "1.0", 0},
    /* offload_param */
    {"zero_optimization.offload_param.device", F(zero.offload_param.device), STAGE3, "\"cpu\"", "\"cpu\"", "\"none\"",
     0},
    {"zero_optimization.offload_param.nvme_path", F(zero.offload_param.nvme_path), STAGE3, "\"/tmp/p\"", "\"/tmp/p\"",
     "\"\"", 0},
    {"zero_optimization.offload_param.buffer_count", F(zero.offload_param.buffer_count), STAGE3, "3", "3", "5", 0},
    {"zero_optimization.offload_param.buffer_size", F(zero.offload_param.buffer_size), STAGE3, "1e7", "10000000",
     "100000000", 0},
    {"zero_optimization.offload_param.max_in_cpu", F(zero.offload_param.max_in_cpu), STAGE3, "1e8", "100000000",
     "1000000000", 0},
    {"zero_optimization.offload_param.pin_memory", F(zero.offload_param.pin_memory), STAGE3, "false", "false", "true",
     0},
    /* aio */
    {"aio.block_size", F(aio.block_size), NULL, "262144", "262144", "1048576", 0},
    {"aio.queue_depth", F(aio.queue_depth), NULL, "16", "16", "8", 0},
    {"aio.intra_op_parallelism", F(aio.intra_op_parallelism), NULL, "4", "4", "1", 0},
    {"aio.single_submit", F(aio.single_submit), NULL, "true", "true", "false", 0},
    {"aio.overlap_events", F(aio.overlap_events), NULL, "false", "false", "true", 0},
    {"aio.use_gds", F(aio.use_gds), NULL, "false", "false", "false", 0}, /* true is an error (tested below) */
    /* checkpoint */
    {"checkpoint.tag_validation", F(checkpoint.tag_validation), NULL, "\"FAIL\"", "\"Fail\"", "\"Warn\"", 0},
    {"checkpoint.load_universal", F(checkpoint.load_universal), NULL, "true", "true", "false", 0},
    {"checkpoint.use_node_local_storage", F(checkpoint.use_node_local_storage), NULL, "true", "true", "false", 0},
    {"checkpoint.parallel_write.pipeline_stage", F(checkpoint.parallel_write_pipeline_stage), NULL, "true", "true",
     "false", 0},
    /* data_types, zinc */
    /* at stage 0 only the compute dtype is allowed (DeepSpeed 0.19.8 raises NotImplementedError) */
    {"data_types.grad_accum_dtype", F(grad_accum_dtype), STAGE2, "\"torch.bfloat16\"", "\"bf16\"", "\"fp32\"", 0},
    {"data_types.param_dtype", F(param_dtype), NULL, "\"float32\"", "\"fp32\"", "\"fp32\"", 0},
    {"zinc.device", F(device), NULL, "\"cpu\"", "\"cpu\"", "\"auto\"", 0},
    {"zinc.max_skipped_steps", F(fp16.max_skipped_steps), NULL, "10", "10", "0", 0},
    {"zinc.allow_buffered_io", F(aio.allow_buffered_io), NULL, "true", "true", "false", 0},
    {"zinc.deterministic_reduction", F(deterministic_reduction), NULL, "true", "true", "false", 0},
    /* comms_logger (DeepSpeed's deepspeed/comm/config.py defaults) */
    /* the block's presence turns logging on (comm/config.py reads only that): no default of its own to check
     * here (test_config_rules checks the presence rule) */
    {"comms_logger.enabled", F(comms_logger.enabled), NULL, "true", "true", "false", REQUIRED},
    {"comms_logger.verbose", F(comms_logger.verbose), NULL, "true", "true", "false", 0},
    {"comms_logger.prof_all", F(comms_logger.prof_all), NULL, "false", "false", "true", 0},
    {"comms_logger.prof_ops", F(comms_logger.prof_ops), "{\"comms_logger\":{\"prof_all\":false}}", "[\"all_gather\", \"all_reduce\", \"all_gather\"]",
     "[\"all_reduce\", \"all_gather\"]", "[]", 0},
    {"comms_logger.debug", F(comms_logger.debug), NULL, "true", "true", "false", 0},
    /* monitors (DeepSpeed's deepspeed/monitor/config.py defaults) */
    {"tensorboard.enabled", F(tensorboard.enabled), NULL, "true", "true", "false", 0},
    {"tensorboard.output_path", F(tensorboard.output_path), NULL, "\"/tmp/tb\"", "\"/tmp/tb\"", "\"\"", 0},
    {"tensorboard.job_name", F(tensorboard.job_name), NULL, "\"run1\"", "\"run1\"", "\"DeepSpeedJobName\"", 0},
    {"csv_monitor.enabled", F(csv_monitor.enabled), NULL, "true", "true", "false", 0},
    {"csv_monitor.output_path", F(csv_monitor.output_path), NULL, "\"out\"", "\"out\"", "\"\"", 0},
    {"csv_monitor.job_name", F(csv_monitor.job_name), NULL, "\"a/b\"", "\"a/b\"", "\"DeepSpeedJobName\"", 0},
};
const size_t n_rows = sizeof rows / sizeof rows[0];

/* Other spellings: alias path -> canonical path, whether it warns. */
const alias_row aliases[] = {
    {"zero_optimization.prefetch_bucket_size", "zero_optimization.stage3_prefetch_bucket_size", STAGE3, "1e5", "100000",
     0},
    {"zero_optimization.param_persistence_threshold", "zero_optimization.stage3_param_persistence_threshold", STAGE3,
     "77", "77", 0},
    {"zero_optimization.model_persistence_threshold", "zero_optimization.stage3_model_persistence_threshold", STAGE3,
     "78", "78", 0},
    {"zero_optimization.max_live_parameters", "zero_optimization.stage3_max_live_parameters", STAGE3, "79", "79", 0},
    {"zero_optimization.max_reuse_distance", "zero_optimization.stage3_max_reuse_distance", STAGE3, "80", "80", 0},
    {"zero_optimization.gather_16bit_weights_on_model_save",
     "zero_optimization.stage3_gather_16bit_weights_on_model_save", STAGE3, "true", "true", 0},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save",
     "zero_optimization.stage3_gather_16bit_weights_on_model_save", STAGE3, "true", "true", 1},
    {"aio.thread_count", "aio.intra_op_parallelism", NULL, "4", "4", 1},
    {"bfloat16", "bf16.enabled", NULL, "{\"enabled\": true}", "true", 1},
};
const size_t n_aliases = sizeof aliases / sizeof aliases[0];

/* Keys with their own translation (ZKEY_LEGACY). */
const char *const legacy_paths[] = {"zero_optimization.cpu_offload", "zero_optimization.cpu_offload_param",
                                    "zero_optimization.cpu_offload_use_pin_memory"};
const size_t n_legacy_paths = sizeof legacy_paths / sizeof legacy_paths[0];

/* Accepted-and-ignored (warn when active) and refused (error when active) keys: an active and an inactive value. */
const onoff_row ignored[] = {
    {"scheduler.params.last_batch_iteration", SCHED_WLR, "10", NULL},
    {"zero_optimization.use_multi_rank_bucket_allreduce", NULL, "true", "false"},
    {"zero_optimization.stage3_module_granularity_threshold", STAGE3, "100", "0"},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", STAGE3, "true", "false"},
    {"zero_optimization.memory_efficient_linear", NULL, "true", "false"},
    {"zero_optimization.override_module_apply", NULL, "true", "false"},
    {"zero_optimization.log_trace_cache_warnings", NULL, "true", "false"},
    {"zero_optimization.elastic_checkpoint", NULL, "true", "false"},
    {"zero_optimization.pipeline_loading_checkpoint", NULL, "true", "false"},
    {"zero_optimization.mics_hierarchical_params_gather", NULL, "true", "false"},
    {"wandb", NULL, "{\"enabled\": true, \"project\": \"p\"}", "{\"enabled\": false}"},
    {"comet", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"flops_profiler", NULL, "{\"enabled\": true, \"profile_step\": 1}", "{\"enabled\": false, \"profile_step\": 1}"},
    {"activation_checkpointing.partition_activations", NULL, "true", "false"},
    {"activation_checkpointing.cpu_checkpointing", NULL, "true", "false"},
    {"activation_checkpointing.number_checkpoints", NULL, "4", "null"},
    {"activation_checkpointing.contiguous_memory_optimization", NULL, "true", "false"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", NULL, "true", "false"},
    {"activation_checkpointing.profile", NULL, "true", "false"},
    {"autotuning", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"zero_allow_untested_optimizer", NULL, "true", "false"},
    {"zero_force_ds_cpu_optimizer", NULL, "true", "false"},
    {"disable_allgather", NULL, "true", "false"},
    {"gradient_accumulation_dtype", NULL, "\"fp32\"", NULL},
    {"seq_parallel_communication_data_type", NULL, "\"fp32\"", NULL},
    {"pipeline", NULL, "{\"stages\": \"auto\"}", "{}"},
    {"timers", NULL, "{\"throughput\": {\"enabled\": true}}", "{\"throughput\": {\"enabled\": false}}"},
    {"nebula", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"zero_force_ds_cpu_initialization", NULL, "true", "false"},
    /* newer DeepSpeed keys (release 0.19.6) */
    {"compile", NULL, "{\"deepcompile\": true}", "{}"},
    {"hybrid_engine", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"torch_autocast", NULL, "{\"enabled\": true, \"dtype\": \"bfloat16\"}", "{\"enabled\": false}"},
    {"dataloader_drop_last", NULL, "true", "false"},
    {"eigenvalue", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"comms_config", NULL, "{\"verbose\": true}", "{}"},
    {"graph_harvesting", NULL, "true", "false"},
    {"log_level", NULL, "\"info\"", NULL},
    {"lower_precision_safe_modules", NULL, "[\"torch.nn.Linear\"]", "[]"},
    {"use_data_before_expert_parallelism", NULL, "true", "false"},
    {"weight_quantization", NULL, "{\"post_init_quant\": {\"fc\": {\"num_bits\": 8}}}", "{}"},
    {"zero_optimization.allgather_sequential", NULL, "true", "false"},
    {"zero_optimization.stage3_allgather_sequential", NULL, "true", "false"},
    {"zero_optimization.parameter_alignment", NULL, "true", "false"},
    {"data_types.buffer_dtype", NULL, "\"bf16\"", "null"},
    {"zero_optimization.enable_sanity_checks", NULL, "true", "false"},
    {"zero_optimization.save_muon_momentum_buffer_in_memory", NULL, "true", "false"},
    {"zero_optimization.leaf_module", NULL, "{\"classes\": [\"MoE\"]}", "{}"},
    {"zero_optimization.offload_optimizer.super_offload", NULL, "true", "false"},
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", NULL, "50", "0"},
};
const size_t n_ignored = sizeof ignored / sizeof ignored[0];
const onoff_row refused[] = {
    {"optimizer.params.amsgrad", NULL, "true", "false"},
    {"optimizer.params.max_grad_norm", NULL, "1.0", "null"},
    {"fp16.fp16_master_weights_and_grads", NULL, "true", "false"},
    {"zero_optimization.zero_quantized_weights", STAGE3, "true", "false"},
    {"zero_optimization.zero_quantized_nontrainable_weights", STAGE3, "true", "false"},
    {"zero_optimization.zero_quantized_gradients", STAGE3, "true", "false"},
    {"zero_optimization.zero_hpz_partition_size", STAGE3, "8", "1"},
    {"zero_optimization.mics_shard_size", STAGE3, "4", "-1"},
    {"zero_optimization.zeropp_loco_param", STAGE3, "{\"err_beta\": 0.8, \"reset_T\": 1024}", "null"},
    {"zero_optimization.legacy_stage1", NULL, "true", "false"},
    {"amp", NULL, "{\"enabled\": true, \"opt_level\": \"O1\"}", "{\"enabled\": false}"},
    {"elasticity", NULL, "{\"enabled\": true, \"max_train_batch_size\": 64}", "{\"enabled\": false}"},
    {"sparse_gradients", NULL, "true", "false"},
    {"curriculum_learning", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"data_efficiency", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"compression_training", NULL, "{\"weight_quantization\": {\"shared_parameters\": {\"enabled\": true}}}",
     "{\"weight_quantization\": {\"shared_parameters\": {\"enabled\": false}}}"},
    {"sparse_attention", NULL, "{\"mode\": \"fixed\"}", "{}"},
    {"fp32_allreduce", NULL, "true", "false"},
    {"tensor_parallel", NULL, "{\"autotp_size\": 2}", "{}"},
    {"quantize_training", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"progressive_layer_drop", NULL, "{\"enabled\": true, \"theta\": 0.5}", "{\"enabled\": false}"},
    {"expert_parallel", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"fp8", NULL, "{\"enabled\": true}", "{\"enabled\": false}"},
    {"bf16.bf16_master_weights_and_grads", NULL, "true", "false"},
    {"bf16.bf16_optimizer_states", NULL, "true", "false"},
    {"zero_optimization.zenflow", STAGE3, "{\"topk_ratio\": 0.1}", "null"},
    {"data_types.keep_in_fp32_modules", NULL, "[\"lm_head\"]", "\"auto\""},
};
const size_t n_refused = sizeof refused / sizeof refused[0];

const key_row *find_row(const char *path) {
    for (size_t i = 0; i < NROWS; i++)
        if (!strcmp(rows[i].path, path)) return &rows[i];
    return NULL;
}
