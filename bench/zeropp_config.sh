# shellcheck shell=bash
# Sourced by bench/zeropp.sh and bench/zeropp_seeds.sh: the job of one ZeRO++ comparison run (its settings'
# defaults and its ds_config), so both benchmarks train exactly the same job. DTYPE (fp32 | bf16), SHAPE (zinc
# train's shape options), TEXT (the training text), MB (micro batch per rank; 4 ranks), THREADS (per rank), LR
# (the peak) and ZERO (more zero_optimization members, may be empty) keep what the caller set.
DTYPE=${DTYPE:-fp32}
SHAPE=${SHAPE:---layers 4 --width 128 --heads 4 --context 64}
TEXT=${TEXT:-/usr/share/common-licenses/GPL-3}
MB=${MB:-4}
THREADS=${THREADS:-1}
LR=${LR:-6e-4}
ZERO=${ZERO-\"stage3_max_reuse_distance\": 0}
zeropp_zero_of() { # config name -> its zero_optimization members
  case $1 in
  plain) echo '"stage": 3' ;;
  qwz) echo '"stage": 3, "zero_quantized_weights": true' ;;
  hpz) echo '"stage": 3, "zero_hpz_partition_size": 2' ;;
  qgz) echo '"stage": 3, "zero_quantized_gradients": true' ;;
  all) echo '"stage": 3, "zero_quantized_weights": true, "zero_hpz_partition_size": 2, "zero_quantized_gradients": true' ;;
  *) echo "zeropp: unknown config $1 (plain, qwz, hpz, qgz or all)" >&2; return 1 ;;
  esac
}

zeropp_write_config() { # config name, steps, file: the README's optimizer and schedule at LR, to the last step
  local c=$1 s=$2 f=$3 zero bf16=false
  zero=$(zeropp_zero_of "$c") || return 1
  [ "$DTYPE" = bf16 ] && bf16=true
  {
    printf '{"train_batch_size": %d, "train_micro_batch_size_per_gpu": %d, "bf16": {"enabled": %s},\n' \
      $((MB * 4)) "$MB" "$bf16"
    printf ' "optimizer": {"type": "AdamW", "params": {"lr": %s, "betas": [0.9, 0.95], "weight_decay": 0.1}},\n' "$LR"
    printf ' "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": %s,\n' "$LR"
    printf '   "warmup_num_steps": %d, "total_num_steps": %d}},\n' $((s < 20 ? s : 20)) "$s"
    printf ' "gradient_clipping": 1.0, "steps_per_print": 1000000, "zero_optimization": {%s%s}}\n' "$zero" \
      "${ZERO:+, $ZERO}"
  } >"$f"
}

zeropp_plot() { # losses.dat (step, then one column per config), the svg, its title, the configs in column order
  local dat=$1 svg=$2 title=$3 plot="" k=2 c
  shift 3
  command -v gnuplot >/dev/null || { echo "zeropp: gnuplot not found, no plot $svg" >&2; return 0; }
  for c in "$@"; do
    plot+="${plot:+, }'$dat' using 1:$k with lines title '$c'"
    k=$((k + 1))
  done
  gnuplot -e "set terminal svg size 800,480; set output '$svg'; set xlabel 'step'; set ylabel 'training loss'; \
set title '$title'; plot $plot"
}
