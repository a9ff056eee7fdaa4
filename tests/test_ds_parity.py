#!/usr/bin/env python3
"""Every key zinc resolves, compared with DeepSpeed 0.19.8's own effective value (issue 34).

For each of a set of minimal configs (fp32/fp16/bf16 at stages 0-3, offload cpu/nvme, every optimizer and
scheduler zinc takes) it runs `zinc config check` and builds DeepSpeed's `DeepSpeedConfig(dict)` from the
same dict, then compares key by key. Where the effective value is decided outside DeepSpeedConfig (the
optimizer's hyperparameters come from the class the engine builds, grad_accum_dtype from
engine.get_data_types), the test reads that class's signature or states the engine's rule with its file.

Every key of zinc's dump must be either compared here or listed in ZINC_ONLY / DELIBERATE with the reason,
so a key added to the schema without a DeepSpeed counterpart fails this test until someone decides.
Configs DeepSpeed rejects must be rejected by zinc too (REJECTED).

Run: python3 tests/test_ds_parity.py ZINC_BINARY, with a Python that imports deepspeed==0.19.8
(scripts/ds-venv.sh makes build/dsenv). Exit 77 when deepspeed cannot be imported.
"""
import copy
import inspect
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")
try:
    import deepspeed
    import torch
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.model_checkpointing.config import get_checkpoint_writer_config
    from deepspeed.runtime import lr_schedules
except Exception as exc:  # noqa: BLE001 - any import failure means the reference is not here
    print(f"SKIP: deepspeed 0.19.8 cannot be imported ({exc!r}); run scripts/ds-venv.sh", file=sys.stderr)
    sys.exit(77)

if deepspeed.__version__ != "0.19.8":
    print(f"SKIP: deepspeed {deepspeed.__version__} is installed, this test compares with 0.19.8", file=sys.stderr)
    sys.exit(77)

ZINC = sys.argv[1] if len(sys.argv) > 1 else "build/zinc"

# zinc keys with no DeepSpeed counterpart (zinc's own block, output metadata).
# zinc.checkpoint_busy: DeepSpeed 0.19.8's decoupled engine has no such key: a second save waits for the
# first's commit (decoupled_checkpoint_engine.py, commit), zinc's default "wait"; "skip" is zinc's own.
ZINC_ONLY = {
    "zinc.device", "zinc.max_skipped_steps", "zinc.allow_buffered_io", "zinc.deterministic_reduction",
    "zinc.checkpoint_busy",
}
# Deliberate differences: (config label, key) -> the reason; each is documented (README "Config keys") and a
# user gets DeepSpeed's behaviour by one key.
DELIBERATE = {
    ("comms_logger disabled", "comms_logger.enabled"):
        "an explicit enabled false is honoured with a warning (DeepSpeed never reads it); remove the block or "
        "write true for DeepSpeed's behaviour",
}
# Without an "optimizer" block DeepSpeed uses the client's optimizer object; zinc trains with Adam and warns
# naming the key, so its optimizer.* values have no DeepSpeed counterpart there.
NO_OPTIMIZER_BLOCK = "optimizer."

BASE = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 8}


def cfg(**over):
    c = copy.deepcopy(BASE)
    for k, v in over.items():
        c[k] = v
    return c


def zero(stage, **kw):
    z = {"stage": stage}
    z.update(kw)
    return z


NVME = {"device": "nvme", "nvme_path": "/tmp"}


def configs():
    out = []
    for prec in ("fp32", "fp16", "bf16"):
        for stage in range(4):
            c = cfg(zero_optimization=zero(stage))
            if prec != "fp32":
                c[prec] = {"enabled": True}
            out.append((f"{prec} stage {stage}", c))
    for stage in (1, 2, 3):
        out.append((f"offload cpu stage {stage}", cfg(zero_optimization=zero(stage, offload_optimizer={"device": "cpu"}))))
        out.append((f"offload nvme stage {stage}", cfg(zero_optimization=zero(stage, offload_optimizer=dict(NVME)))))
    out.append(("offload param cpu stage 3",
                cfg(zero_optimization=zero(3, offload_param={"device": "cpu"}, offload_optimizer={"device": "cpu"}))))
    out.append(("bf16 offload cpu stage 2",
                cfg(bf16={"enabled": True}, zero_optimization=zero(2, offload_optimizer={"device": "cpu"}))))
    for opt in ("Adam", "AdamW", "Lion", "Lamb", "Adagrad"):
        out.append((f"{opt} no params", cfg(optimizer={"type": opt})))
        out.append((f"{opt} lr", cfg(optimizer={"type": opt, "params": {"lr": 3e-4}})))
        if opt not in ("Lamb",):
            out.append((f"{opt} offload", cfg(optimizer={"type": opt},
                                              zero_optimization=zero(2, offload_optimizer={"device": "cpu"}))))
    out.append(("SGD no params", cfg(optimizer={"type": "SGD"})))
    out.append(("SGD momentum", cfg(optimizer={"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9,
                                                                        "weight_decay": 5e-4, "nesterov": True}})))
    out.append(("SGD dampening offload", cfg(optimizer={"type": "SGD", "params": {"momentum": 0.9, "dampening": 0.1}},
                                             zero_optimization=zero(2, offload_optimizer={"device": "cpu"}))))
    out.append(("Adam torch_adam", cfg(optimizer={"type": "Adam", "params": {"torch_adam": True}})))
    out.append(("AdamW torch_adam", cfg(optimizer={"type": "AdamW", "params": {"torch_adam": True}})))
    out.append(("Adam torch_adam L2", cfg(optimizer={"type": "Adam", "params": {"torch_adam": True, "adam_w_mode": False}})))
    out.append(("Adam adam_w_mode false", cfg(optimizer={"type": "Adam", "params": {"adam_w_mode": False}})))
    sch = {
        "WarmupLR": {},
        "WarmupDecayLR": {"total_num_steps": 100},
        "WarmupCosineLR": {"total_num_steps": 100},
        "OneCycle": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3},
    }
    if "LRRangeTest" in SCHEDULERS:
        sch["LRRangeTest"] = {}
        out.append(("LRRangeTest staircase", cfg(scheduler={"type": "LRRangeTest", "params": {
            "lr_range_test_min_lr": 1e-4, "lr_range_test_step_size": 10, "lr_range_test_step_rate": 2.0,
            "lr_range_test_staircase": True}})))
    for name, params in sch.items():
        out.append((f"{name} defaults", cfg(scheduler={"type": name, "params": dict(params)})))
        out.append((f"{name} warmup 5", cfg(optimizer={"type": "AdamW", "params": {"lr": 2e-3}},
                                           scheduler={"type": name, "params": dict(params, **(
                                               {"cycle_first_step_size": 5} if name == "OneCycle" else
                                               {"lr_range_test_step_size": 5} if name == "LRRangeTest" else
                                               {"warmup_num_steps": 5}))})))
    out.append(("WarmupLR max lr", cfg(scheduler={"type": "WarmupLR", "params": {"warmup_max_lr": 5e-3}})))
    out.append(("ZeRO++", cfg(train_batch_size=16, train_micro_batch_size_per_gpu=4,
                             zero_optimization=zero(3, zero_quantized_weights=True, zero_quantized_gradients=True,
                                                    zero_hpz_partition_size=1,
                                                    zero_quantized_nontrainable_weights=True))))
    out.append(("comms_logger present", cfg(comms_logger={})))
    out.append(("comms_logger disabled", cfg(comms_logger={"enabled": False})))
    out.append(("comms_logger enabled", cfg(comms_logger={"enabled": True, "verbose": True})))
    out.append(("monitors", cfg(tensorboard={"enabled": True, "output_path": "/tmp/tb"},
                               csv_monitor={"enabled": True, "job_name": "j"})))
    out.append(("clipping 0", cfg(gradient_clipping=0.0)))
    out.append(("bf16 no overflow check", cfg(bf16={"enabled": True, "check_grad_overflow": False},
                                              zero_optimization=zero(2))))
    out.append(("fp16 static", cfg(fp16={"enabled": True, "loss_scale": 128}, zero_optimization=zero(1))))
    out.append(("fp16 dynamic params", cfg(fp16={"enabled": True, "initial_scale_power": 12, "loss_scale_window": 100,
                                                 "hysteresis": 4, "min_loss_scale": 2},
                                           zero_optimization=zero(2))))
    out.append(("grad accum steps", cfg(train_batch_size=32, gradient_accumulation_steps=4)))
    out.append(("communication dtype", cfg(bf16={"enabled": True}, communication_data_type="fp32",
                                           zero_optimization=zero(2))))
    out.append(("bf16 stage 1 fp32 accum", cfg(bf16={"enabled": True}, zero_optimization=zero(1),
                                               data_types={"grad_accum_dtype": "fp32"})))
    out.append(("aio", cfg(aio={"block_size": 262144, "queue_depth": 16})))
    out.append(("keys at defaults", cfg(zero_optimization=zero(3, compute_grad_norm=True, parameter_alignment=1,
                                                              stage3_allgather_sequential=False),
                                        data_types={"param_dtype": None, "buffer_dtype": None,
                                                    "keep_in_fp32_modules": "auto"})))
    out.append(("param_dtype matching", cfg(bf16={"enabled": True}, zero_optimization=zero(2),
                                            data_types={"param_dtype": "bf16", "keep_in_fp32_modules": []})))
    out.append(("steps_per_print", cfg(steps_per_print=25, wall_clock_breakdown=True)))
    out.append(("checkpoint", cfg(checkpoint={"tag_validation": "Fail", "load_universal": True})))
    out.append(("checkpoint writer", cfg(checkpoint={"writer": {"decoupled": True, "type": "python",
                                                                  "io_buffer_size": 1 << 20, "show_statistics": True,
                                                                  "data_parallel": "socket"}})))
    out.append(("checkpoint writer defaults", cfg(checkpoint={"writer": {}})))
    return out


# Configs DeepSpeed 0.19.8 refuses (at config load or engine construction); zinc must refuse them too, and its
# message must name the key.
REJECTED = [
    ("bf16 stage 0 fp32 accum", cfg(bf16={"enabled": True}, zero_optimization=zero(0),
                                    data_types={"grad_accum_dtype": "fp32"}),
     "data_types.grad_accum_dtype", "engine.py _do_optimizer_sanity_check: NotImplementedError unsupported mix"),
    ("fp16 stage 0 fp32 accum", cfg(fp16={"enabled": True}, zero_optimization=zero(0),
                                    data_types={"grad_accum_dtype": "fp32"}),
     "data_types.grad_accum_dtype", "engine.py _do_optimizer_sanity_check: NotImplementedError unsupported mix"),
    ("fp16 min_loss_scale 0", cfg(fp16={"enabled": True, "min_loss_scale": 0}),
     "fp16.min_loss_scale", "precision_config.py DeepSpeedFP16Config: min_loss_scale > 0 when dynamic"),
    ("fp16 min_loss_scale 0.5", cfg(fp16={"enabled": True, "min_loss_scale": 0.5}),
     "fp16.min_loss_scale", "precision_config.py DeepSpeedFP16Config: min_loss_scale is an int"),
    ("compute_grad_norm false stage 3", cfg(zero_optimization=zero(3, compute_grad_norm=False)),
     "compute_grad_norm", "zero/config.py compute_grad_norm_valid: only stages 1 and 2"),
    ("keep_in_fp32_modules null", cfg(data_types={"keep_in_fp32_modules": None}),
     "keep_in_fp32_modules", "config.py: keep_in_fp32_modules must be \"auto\" or a list"),
    ("param_dtype mismatch", cfg(data_types={"param_dtype": "bf16"}),
     "data_types.param_dtype", "engine.py _assert_valid_mixed_precision_config"),
    ("max_grad_norm", cfg(optimizer={"type": "Adam", "params": {"max_grad_norm": 1.0}}),
     "max_grad_norm", "engine.py _configure_basic_optimizer: ValueError"),
]

DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def ds_dtype_name(v, model):
    if v is None:
        return model
    s = str(v).lower()
    for k, n in (("float32", "fp32"), ("fp32", "fp32"), ("float16", "fp16"), ("fp16", "fp16"), ("half", "fp16"),
                 ("bfloat16", "bf16"), ("bf16", "bf16")):
        if k in s:
            return n
    raise AssertionError(f"unknown dtype {v!r}")


def signature_defaults(cls):
    out = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if p.default is not inspect.Parameter.empty:
            out[name] = p.default
    return out


def optimizer_class(d, raw):
    """The class engine.py _configure_basic_optimizer builds, and the keyword arguments it adds."""
    name = (d.optimizer_name or "").lower()
    params = dict(d.optimizer_params or {})
    cpu_opt = d.zero_enabled and d.zero_config.offload_optimizer is not None and \
        str(d.zero_config.offload_optimizer.device).lower().endswith(("cpu", "nvme"))
    if name in ("adam", "adamw"):
        adam_w_mode = params.pop("adam_w_mode", True)
        eff = name == "adamw" or adam_w_mode
        if params.pop("torch_adam", False):
            return (torch.optim.AdamW if eff else torch.optim.Adam), {}, eff
        if cpu_opt:
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            return DeepSpeedCPUAdam, {"adamw_mode": eff}, eff
        from deepspeed.ops.adam import FusedAdam
        return FusedAdam, {"adam_w_mode": eff}, eff
    if name == "adagrad":
        if cpu_opt:
            from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad
            return DeepSpeedCPUAdagrad, {}, False
        return torch.optim.Adagrad, {}, False
    if name == "sgd":
        # engine.py _configure_basic_optimizer: a name not in DeepSpeed's list is getattr(torch.optim, name)
        return torch.optim.SGD, {}, False
    if name == "lamb":
        from deepspeed.ops.lamb import FusedLamb
        return FusedLamb, {}, False
    if name == "lion":
        if cpu_opt:
            from deepspeed.ops.lion import DeepSpeedCPULion
            return DeepSpeedCPULion, {}, True
        from deepspeed.ops.lion import FusedLion
        return FusedLion, {}, True
    raise AssertionError(f"no class for optimizer {name!r}")


def expected_optimizer(d, raw):
    """optimizer.* as DeepSpeed's engine would build it (no optimizer block: zinc's documented Adam)."""
    if not d.optimizer_name:
        return {}
    cls, extra, eff = optimizer_class(d, raw)
    given = dict(d.optimizer_params or {})
    given.pop("torch_adam", None)
    given.pop("adam_w_mode", None)
    kw = signature_defaults(cls)
    kw.update(given)
    kw.update(extra)
    e = {"optimizer.type": d.optimizer_name}
    for key in ("lr", "eps", "weight_decay", "bias_correction", "max_coeff", "min_coeff", "eps_inside_sqrt",
                "momentum", "dampening", "nesterov", "maximize"):
        if key in kw:
            e[f"optimizer.params.{key}"] = kw[key]
    if "betas" in kw:
        e["optimizer.params.betas"] = list(kw["betas"])
    if (d.optimizer_name or "").lower() in ("adam", "adamw"):
        e["optimizer.params.adam_w_mode"] = eff
        e["optimizer.params.torch_adam"] = bool((d.optimizer_params or {}).get("torch_adam", False))
    return e


SCHEDULERS = {
    "WarmupLR": lr_schedules.WarmupLR,
    "WarmupDecayLR": lr_schedules.WarmupDecayLR,
    "WarmupCosineLR": lr_schedules.WarmupCosineLR,
    "OneCycle": lr_schedules.OneCycle,
}
if hasattr(lr_schedules, "LRRangeTest"):
    SCHEDULERS["LRRangeTest"] = lr_schedules.LRRangeTest


def expected_scheduler(d, e_opt):
    if not d.scheduler_name:
        return {"scheduler.type": "none"}
    cls = SCHEDULERS[d.scheduler_name]
    kw = signature_defaults(cls)
    kw.pop("last_batch_iteration", None)
    kw.update(d.scheduler_params or {})
    e = {"scheduler.type": d.scheduler_name}
    if d.scheduler_name == "WarmupLR" and kw.get("warmup_max_lr") is None:
        # lr_schedules.py WarmupLR: warmup_max_lr None takes the optimizer's lr (v0.17.2)
        kw["warmup_max_lr"] = e_opt.get("optimizer.params.lr", 1e-3)
    if d.scheduler_name == "OneCycle":
        # lr_schedules.py OneCycle._initialize_cycle: None means the first half's value
        if kw.get("cycle_second_step_size") is None:
            kw["cycle_second_step_size"] = kw["cycle_first_step_size"]
        if kw.get("cycle_second_stair_count") is None:
            kw["cycle_second_stair_count"] = kw["cycle_first_stair_count"]
    for k, v in kw.items():
        e[f"scheduler.params.{k}"] = v
    return e


def expected(d, raw):
    model = "fp16" if d.float16_config.enabled else "bf16" if d.bfloat16_config.enabled else "fp32"
    e = {
        "train_batch_size": d.train_batch_size,
        "train_micro_batch_size_per_gpu": d.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": d.gradient_accumulation_steps,
        "gradient_clipping": d.gradient_clipping,
        # engine.py _take_model_step: None prints no progress, zinc's 0
        "steps_per_print": 0 if d.steps_per_print is None else d.steps_per_print,
        "wall_clock_breakdown": d.wall_clock_breakdown,
        "memory_breakdown": d.memory_breakdown,
        "dump_state": d.dump_state,
        "prescale_gradients": d.prescale_gradients,
        "gradient_predivide_factor": d.gradient_predivide_factor,
        "communication_data_type": ds_dtype_name(d.communication_data_type, model),
        # engine.py get_data_types: None means the model dtype
        "data_types.grad_accum_dtype": ds_dtype_name(d.grad_accum_dtype, model),
        # engine.py _assert_valid_mixed_precision_config: a written param_dtype is the model dtype
        "data_types.param_dtype": ds_dtype_name(d.param_dtype, model),
        "checkpoint.tag_validation": "Fail" if d.checkpoint_tag_validation_fail else
        "Warn" if d.checkpoint_tag_validation_enabled else "Ignore",
        "checkpoint.load_universal": d.load_universal_checkpoint,
        "checkpoint.use_node_local_storage": d.use_node_local_storage,
        "checkpoint.parallel_write.pipeline_stage": d.checkpoint_parallel_write_pipeline,
    }
    # model_checkpointing/config.py: no writer block is None (the torch engine); zinc's dump shows the
    # defaults a block {} resolves to. data_parallel's default None is zinc's "none".
    w = d.checkpoint_config.get("writer") or get_checkpoint_writer_config({"writer": {}})
    for k in ("type", "decoupled", "io_buffer_size", "io_buffer_double", "show_statistics", "data_parallel"):
        e[f"checkpoint.writer.{k}"] = "none" if w[k] is None else w[k]
    f16 = d.float16_config
    for k in ("enabled", "auto_cast", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
              "consecutive_hysteresis", "min_loss_scale"):
        e[f"fp16.{k}"] = getattr(f16, k)
    b16 = d.bfloat16_config
    for k in ("enabled", "immediate_grad_update", "check_grad_overflow"):
        e[f"bf16.{k}"] = getattr(b16, k)
    z = d.zero_config
    e["zero_optimization.stage"] = int(z.stage)
    for k in ("zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients",
              "zero_hpz_partition_size", "compute_grad_norm", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_bucket_size",
              "allgather_partitions", "sub_group_size", "round_robin_gradients", "ignore_unused_parameters",
              "load_from_fp32_weights", "save_muon_momentum_buffer_in_memory"):
        e[f"zero_optimization.{k}"] = getattr(z, k)
    # zero/config.py: overlap_comm None resolves to stage 3 (DeepSpeedZeroConfig.overlap_comm_valid)
    e["zero_optimization.overlap_comm"] = bool(z.overlap_comm)
    for zk, dk in (("stage3_prefetch_bucket_size", "prefetch_bucket_size"),
                   ("stage3_param_persistence_threshold", "param_persistence_threshold"),
                   ("stage3_model_persistence_threshold", "model_persistence_threshold"),
                   ("stage3_max_live_parameters", "max_live_parameters"),
                   ("stage3_max_reuse_distance", "max_reuse_distance"),
                   ("stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save")):
        v = getattr(z, dk)
        e[f"zero_optimization.{zk}"] = (2**63 - 1) if v == sys.maxsize else v
    for block in ("offload_optimizer", "offload_param"):
        o = getattr(z, block)
        if o is None:
            e[f"zero_optimization.{block}.device"] = "none"
            continue
        fields = ["device", "buffer_count", "pin_memory"]
        fields += ["pipeline_read", "pipeline_write", "fast_init", "ratio"] if block == "offload_optimizer" else \
            ["buffer_size", "max_in_cpu"]
        for k in fields:
            v = getattr(o, k)
            if k == "device":
                v = str(v.value if hasattr(v, "value") else v).lower().split(".")[-1]
            e[f"zero_optimization.{block}.{k}"] = v
        e[f"zero_optimization.{block}.nvme_path"] = str(o.nvme_path) if o.nvme_path is not None else ""
    aio = d.aio_config
    for k in ("block_size", "queue_depth", "intra_op_parallelism", "single_submit", "overlap_events", "use_gds"):
        e[f"aio.{k}"] = aio[k]
    mon = d.monitor_config
    for name in ("tensorboard", "csv_monitor"):
        m = getattr(mon, name)
        e[f"{name}.enabled"] = m.enabled
        e[f"{name}.output_path"] = m.output_path
        e[f"{name}.job_name"] = m.job_name
    cc = d.comms_config
    # comm/config.py DeepSpeedCommsConfig: the block's presence turns logging on; "enabled" is never read
    e["comms_logger.enabled"] = cc.comms_logger_enabled
    if cc.comms_logger_enabled:
        for k in ("verbose", "prof_all", "debug"):
            e[f"comms_logger.{k}"] = getattr(cc.comms_logger, k)
        e["comms_logger.prof_ops"] = list(cc.comms_logger.prof_ops)
    e_opt = expected_optimizer(d, raw)
    e.update(e_opt)
    e.update(expected_scheduler(d, e_opt))
    return e


def flatten(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        if k.startswith("_"):
            continue
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            if not v:
                out[path] = {}
            out.update(flatten(v, path + "."))
        else:
            out[path] = v
    return out


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (a == b and type(a) is type(b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def zinc_check(raw, tmp):
    path = os.path.join(tmp, "ds_config.json")
    with open(path, "w") as f:
        json.dump(raw, f)
    r = subprocess.run([ZINC, "config", "check", path, "--quiet"], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def main():
    failures = []
    compared = 0
    seen = set()
    with tempfile.TemporaryDirectory() as tmp:
        for label, raw in configs():
            try:
                d = DeepSpeedConfig(copy.deepcopy(raw))
            except Exception as exc:  # noqa: BLE001
                failures.append(f"{label}: DeepSpeed refuses this config ({exc!r}); move it to REJECTED")
                continue
            rc, out, err = zinc_check(raw, tmp)
            if rc != 0:
                failures.append(f"{label}: zinc refuses a config DeepSpeed accepts: {err.strip()}")
                continue
            z = flatten(json.loads(out))
            # zinc writes -1 for "the first half's value" (OneCycle); compare the resolved value
            for half in ("step_size", "stair_count"):
                key = f"scheduler.params.cycle_second_{half}"
                if z.get(key) == -1:
                    z[key] = z[f"scheduler.params.cycle_first_{half}"]
            e = expected(d, raw)
            for path, zv in z.items():
                seen.add(path)
                if path in ZINC_ONLY or (label, path) in DELIBERATE:
                    continue
                if d.optimizer_name is None and path.startswith(NO_OPTIMIZER_BLOCK):
                    continue
                if path == "activation_checkpointing":
                    continue  # an empty object: its presence is the setting
                if path not in e:
                    if path.startswith(("scheduler.params.", "optimizer.params.", "comms_logger.",
                                        "zero_optimization.offload_")):
                        continue  # not resolved by DeepSpeed for this config (another optimizer's key, no block)
                    failures.append(f"{label}: {path} has no DeepSpeed counterpart in this test: compare it or "
                                    "list it in ZINC_ONLY/DELIBERATE with the reason")
                    continue
                compared += 1
                if not same(zv, e[path]):
                    failures.append(f"{label}: {path}: zinc {zv!r}, DeepSpeed 0.19.8 {e[path]!r}")
            for path, ev in e.items():
                if path not in z and not path.startswith(("scheduler.params.", "optimizer.params.")):
                    failures.append(f"{label}: DeepSpeed resolves {path} = {ev!r}, zinc's dump lacks it")
        for label, raw, key, why in REJECTED:
            rc, out, err = zinc_check(raw, tmp)
            if rc == 0:
                failures.append(f"{label}: zinc accepts what DeepSpeed refuses ({why})")
            elif key not in err:
                failures.append(f"{label}: zinc refuses it but its message does not name {key}: {err.strip()}")
    for f in failures:
        print("FAIL", f)
    print(f"ds_parity: {len(configs())} configs, {compared} values compared, {len(REJECTED)} refusals, "
          f"{len(failures)} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
