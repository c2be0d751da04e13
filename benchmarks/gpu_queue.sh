#!/usr/bin/env bash
# The GPU queue: everything a GPU session measures, as one script under one deadline.
#
#   bash benchmarks/gpu_queue.sh [--quick] [--minutes M] [--lab2-minutes L] [--results DIR]
#
# A lent GPU machine is short-lived (about 15 minutes of device time in all), so this
# runs, under one deadline of M minutes (default 9) counted from its start, one step
# after another, each alone on the GPU:
#
#   lab2              Lab 2 in full mode, at most L minutes (default: all that is left)
#                                                        -> DIR/labs_full_gpu.md
#   lab2_step         benchmarks/lab2_step.py, the rows that split the lab's epoch
#                     (model alone, the wires through the pipeline before and
#                     now, the lab now, negligible width, the lab's loop at
#                     negligible width), each epoch's time -> DIR/lab2_step_gpu.md
#   labs134           Labs 1, 3 and 4 in full mode       -> DIR/labs_full_gpu.md
#   lab2_study        benchmarks/lab2_study.py            -> DIR/lab2_study_gpu.md
#   transformer_step  benchmarks/transformer_step.py      -> DIR/transformer_step_gpu.md
#   cora_timing       benchmarks/cora.py --parts timing   -> DIR/cora_timing_gpu.md
#   retracing         benchmarks/retracing.py (the 3 rows the H100 run missed)
#                                                        -> DIR/retracing_gpu.md
#
# One step at a time: on 2026-11-26 Lab 2 shared the H100 with Labs 1, 3, 4 and
# lab2_step.py (separate processes, so separate CUDA contexts that the GPU time-slices),
# and its epochs took 7 to 37 s where its model's step alone costs about 3 ms; timings
# taken beside another GPU process do not say what the lab costs.
#
# Each step gets what is left of the deadline (a lab is stopped at its --budget and
# keeps what it printed; a benchmark past the deadline is killed and says so in
# DIR/queue.log). --skip names steps to leave out (lab2, lab2_step, labs134,
# lab2_study, transformer_step, cora_timing, retracing). --quick runs every step on tiny
# data (fast-mode labs, --quick benchmarks) to check the queue on a CPU:
# tests/bench/test_gpu_queue.py does. DIR defaults to benchmarks/results.
#
# On the GPU machine: Python with TensorFlow & co on PYTHONPATH (see
# ../shared/GUIDE.md section 7 and benchmarks/README.md), then
#   LABLIB_COMMIT=<sha> bash benchmarks/gpu_queue.sh --results "$OUT"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

QUICK=0; MINUTES=9; LAB2_MINUTES=0; RESULTS=benchmarks/results; SKIP=","
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --minutes) MINUTES=$2; shift ;;
    --lab2-minutes) LAB2_MINUTES=$2; shift ;;
    --results) RESULTS=$2; shift ;;
    --skip) SKIP=",$2,"; shift ;;
    *) echo "usage: bash benchmarks/gpu_queue.sh [--quick] [--minutes M] [--lab2-minutes L] [--results DIR] [--skip STEP,...]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$RESULTS"
PY=${PYTHON:-python3}
START=$(date +%s)
DEADLINE=$(( START + MINUTES * 60 ))
LOG="$RESULTS/queue.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2} TF_FORCE_GPU_ALLOW_GROWTH=true
[ "$QUICK" = 1 ] && export LABLIB_FAST=1

say() { printf '[%4ss] %s\n' "$(( $(date +%s) - START ))" "$*" >>"$LOG"; }
left() { echo $(( DEADLINE - $(date +%s) )); }
step() {  # step NAME OUTPUT -- command...: runs under the deadline, logs its outcome
  local name=$1 output=$2; shift 3
  local seconds; seconds=$(left)
  case "$SKIP" in *",$name,"*) say "$name: skipped (--skip)"; return ;; esac
  if [ "$seconds" -le 20 ]; then say "$name: skipped, the deadline is reached"; return; fi
  say "$name: started ($seconds s left)"
  timeout --kill-after=10 "$seconds" "$@" >"$RESULTS/$name.out" 2>"$RESULTS/$name.err"
  local rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then say "$name: killed at the deadline"
  elif [ "$rc" != 0 ]; then say "$name: failed (exit $rc); the end of its output:"; tail -5 "$RESULTS/$name.err" >>"$LOG"
  else say "$name: done"; fi
  if [ -n "$output" ] && [ ! -s "$output" ] && [ -s "$RESULTS/$name.out" ]; then
    cp "$RESULTS/$name.out" "$output"   # scripts that print their table only
  fi
}

quick_flag() { [ "$QUICK" = 1 ] && echo "$1"; }
budget_minutes() { echo $(( ($(left) - 30) / 60 )); }

say "queue on $(nproc) cores, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo 'no GPU'); deadline in $MINUTES min"

LAB_FLAGS=$(quick_flag --fast)  # fast-mode labs with --quick
LAB2_BUDGET=$(budget_minutes)
if [ "$LAB2_MINUTES" -gt 0 ] && [ "$LAB2_MINUTES" -lt "$LAB2_BUDGET" ]; then LAB2_BUDGET=$LAB2_MINUTES; fi

step lab2 "" -- "$PY" benchmarks/labs_full.py $LAB_FLAGS --labs lab2_transformer_reuters \
  --budget "$LAB2_BUDGET" --output "$RESULTS/labs_full_gpu.md"
step lab2_step "" -- "$PY" benchmarks/lab2_step.py $(quick_flag --quick) --epochs 4 \
  --rows alone,buckets,now,gathered,tiny,tiny_lab --output "$RESULTS/lab2_step_gpu.md"
step labs134 "" -- "$PY" benchmarks/labs_full.py $LAB_FLAGS \
  --labs lab1_attention,lab3_gcn_molecules,lab4_gat --budget "$(budget_minutes)" --output "$RESULTS/labs_full_gpu.md"
step lab2_study "" -- "$PY" benchmarks/lab2_study.py $(quick_flag --quick) --output "$RESULTS/lab2_study_gpu.md"
step transformer_step "$RESULTS/transformer_step_gpu.md" -- "$PY" benchmarks/transformer_step.py \
  $( [ "$QUICK" = 1 ] && echo "--steps 2 --rounds 1 --length 32" )
step cora_timing "" -- "$PY" benchmarks/cora.py --parts timing $(quick_flag --quick) \
  --output "$RESULTS/cora_timing_gpu.md"
step retracing "$RESULTS/retracing_gpu.md" -- "$PY" benchmarks/retracing.py $(quick_flag --quick) \
  --rows esol-disjoint,esol-disjoint-fixed,cora-gat --output "$RESULTS/retracing_gpu.md"

say "queue finished"
ls -l "$RESULTS" >>"$LOG"
