#!/usr/bin/env bash
# The GPU queue: everything a GPU session measures, as one script under one deadline.
#
#   bash benchmarks/gpu_queue.sh [--quick] [--minutes M] [--results DIR]
#
# A lent GPU machine is short-lived (about 15 minutes of device time in all), so this
# runs, under one deadline of M minutes (default 9) counted from its start:
#
#   cores 0-7   Lab 2 in full mode, alone on its cores  -> DIR/labs_full_gpu.md
#   cores 8-15  Labs 1, 3 and 4 in full mode, one after another (the same report),
#               then benchmarks/lab2_step.py            -> DIR/lab2_step_gpu.md
#               benchmarks/lab2_study.py                -> DIR/lab2_study_gpu.md
#               benchmarks/transformer_step.py          -> DIR/transformer_step_gpu.md
#               benchmarks/cora.py --parts timing       -> DIR/cora_timing_gpu.md
#               benchmarks/retracing.py (the 3 rows the H100 run missed) -> DIR/retracing_gpu.md
#
# Each step gets what is left of the deadline (a lab is stopped at its --budget and
# keeps what it printed; a benchmark past the deadline is killed and says so in
# DIR/queue.log). With fewer than 16 cores the two halves share them. --skip names steps
# to leave out (lab2, labs134, lab2_step, lab2_study, transformer_step, cora_timing,
# retracing). --quick runs
# every step on tiny data (fast-mode labs, --quick benchmarks) to check the queue on a
# CPU: tests/bench/test_gpu_queue.py does. DIR defaults to benchmarks/results.
#
# On the GPU machine: Python with TensorFlow & co on PYTHONPATH (see
# ../shared/GUIDE.md section 7 and benchmarks/README.md), then
#   LABLIB_COMMIT=<sha> bash benchmarks/gpu_queue.sh --results "$OUT"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

QUICK=0; MINUTES=9; RESULTS=benchmarks/results; SKIP=","
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --minutes) MINUTES=$2; shift ;;
    --results) RESULTS=$2; shift ;;
    --skip) SKIP=",$2,"; shift ;;
    *) echo "usage: bash benchmarks/gpu_queue.sh [--quick] [--minutes M] [--results DIR] [--skip STEP,...]" >&2; exit 2 ;;
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
cores() {  # cores A-B, or all when the machine has fewer
  local n; n=$(nproc)
  if [ "$n" -ge 16 ]; then echo "taskset -c $1"; else echo ""; fi
}

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

# Lab 2 alone on cores 0-7 (its own process group, in the background).
(
  step lab2 "" -- $(cores 0-7) "$PY" benchmarks/labs_full.py $LAB_FLAGS --labs lab2_transformer_reuters \
    --budget "$(budget_minutes)" --output "$RESULTS/labs_full_gpu.md"
) &
LAB2=$!

# The rest on cores 8-15, one after another.
step labs134 "" -- $(cores 8-15) "$PY" benchmarks/labs_full.py $LAB_FLAGS \
  --labs lab1_attention,lab3_gcn_molecules,lab4_gat --budget "$(budget_minutes)" --output "$RESULTS/labs_full_gpu.md"
step lab2_step "" -- $(cores 8-15) "$PY" benchmarks/lab2_step.py $(quick_flag --quick) --output "$RESULTS/lab2_step_gpu.md"
step lab2_study "" -- $(cores 8-15) "$PY" benchmarks/lab2_study.py $(quick_flag --quick) --output "$RESULTS/lab2_study_gpu.md"
step transformer_step "$RESULTS/transformer_step_gpu.md" -- $(cores 8-15) "$PY" benchmarks/transformer_step.py \
  $( [ "$QUICK" = 1 ] && echo "--steps 2 --rounds 1 --length 32" )
step cora_timing "" -- $(cores 8-15) "$PY" benchmarks/cora.py --parts timing $(quick_flag --quick) \
  --output "$RESULTS/cora_timing_gpu.md"
step retracing "$RESULTS/retracing_gpu.md" -- $(cores 8-15) "$PY" benchmarks/retracing.py $(quick_flag --quick) \
  --rows esol-disjoint,esol-disjoint-fixed,cora-gat --output "$RESULTS/retracing_gpu.md"

wait "$LAB2"
say "queue finished"
ls -l "$RESULTS" >>"$LOG"
