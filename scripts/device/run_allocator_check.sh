#!/usr/bin/env bash
# The caching-allocator check on a GPU machine: the step oracle's real-CUDA run (its extended copy in
# device-oracle/, which prepare_allocator_check.sh lays out) twice, under PyTorch's default allocator settings and under
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, recording torch.cuda.memory_stats() at every phase
# boundary; then, where a census binary runs on the machine, Census's `census step --allocator` beside
# it for every case (compare_allocator.py). scripts/device/README.md says how to read the result.
#
# Usage, from the repository root:
#   bash scripts/device/run_allocator_check.sh [--cpu-fallback] [--only REGEX] [--toys-only]
#   --cpu-fallback  the runs on CPU tensors (tests this script without a GPU; no allocator figures)
#   --only REGEX    only the case ids matching REGEX
#   --toys-only     without the Llama-3-8B shapes
# Cases: the Llama and Qwen3-MoE toys at 128 tokens (17 kinds each; the two-sequence kinds are skipped
# by the comparison: census step runs one sequence a micro-batch) and the Llama-3-8B shapes (4 layers
# at 4096 tokens, 2 at 8192: one micro-batch, and 4 then AdamW).
# Output folder: $OUT if set, else ./out: run.log, real_default/ and real_expandable/ (cases/, logs/,
# summary.json), allocator_comparison.json. Interpreter: $PY, else python3. Census: $CENSUS, else
# build/census. Limits (s): DEADLINE (180: a run starts no case group after it), CASE_TIMEOUT (150),
# HARD_LIMIT (240 a run): both runs and the comparison stay under 9 minutes. Workers: WORKERS (3).
set -u
script=run_allocator_check.sh
. "$(dirname "${BASH_SOURCE[0]}")/check_setup.sh"
oracle=$root/device-oracle/census_oracle_step.py
if [ ! -f "$oracle" ]; then
  echo "run_allocator_check.sh: no $oracle; run scripts/device/prepare_allocator_check.sh first and carry device-oracle" >&2
  exit 2
fi

common=(--real "$device" --families llama,qwen3_moe --seqs 128 $llama8b --workers "${WORKERS:-3}"
        --case-timeout "${CASE_TIMEOUT:-150}" --deadline "${DEADLINE:-180}" --empty-cache-before-step)
[ -n "$only" ] && common+=(--only "$only")
rc=0
for mode in default expandable; do
  say "== the step oracle on $device, allocator $mode -> $out/real_$mode"
  if [ "$mode" = default ]; then
    env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF timeout --kill-after=15 "${HARD_LIMIT:-240}" \
      "$PY" "$oracle" "${common[@]}" --out "$out/real_$mode" > "$out/real_$mode.log" 2>&1
  else
    env -u PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout --kill-after=15 "${HARD_LIMIT:-240}" \
      "$PY" "$oracle" "${common[@]}" --out "$out/real_$mode" > "$out/real_$mode.log" 2>&1
  fi
  run_rc=$?
  say "== $mode: exit $run_rc ($(( $(date +%s) - began ))s)"
  tail -n 3 "$out/real_$mode.log" | tee -a "$log"
  [ "$run_rc" = 0 ] || rc=$run_rc
  grep -h -A3 "ERROR \|Traceback\|Killed\|crashed\|OutOfMemory" "$out/real_$mode"/logs/*.log 2>/dev/null | head -40 | tee -a "$log"
done

say "== Census beside PyTorch"
if "$CENSUS" --help > /dev/null 2>&1; then
  confs=()
  [ "$device" = cpu ] && confs=(--alloc-conf expandable=expandable_segments:True)
  "$PY" "$here/compare_allocator.py" --census "$CENSUS" --run "default=$out/real_default/cases" \
    --run "expandable=$out/real_expandable/cases" "${confs[@]}" --out "$out" 2>&1 | tee -a "$log"
else
  say "no census binary runs here ($CENSUS); compare where one does:"
  say "  python3 scripts/device/compare_allocator.py --census build/census --run default=OUT/real_default/cases \\"
  say "      --run expandable=OUT/real_expandable/cases --out OUT"
fi
say "== done in $(( $(date +%s) - began ))s"
exit $rc
