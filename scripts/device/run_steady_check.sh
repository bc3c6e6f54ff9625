#!/usr/bin/env bash
# The steady-state check on a GPU machine: the steady-state oracle's real-CUDA run (its extended copy in
# device-oracle/steady/, which prepare_steady_check.sh lays out): one model and one AdamW for TWO training
# steps on real tensors, torch.cuda.memory_stats() read at every phase boundary of each step (peaks reset at
# each step's start: step 2's figures are step 2's alone), twice, under PyTorch's default allocator settings
# and under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; then, where a census binary runs on the
# machine, Census's `census step --allocator` (the steady state, the case's AdamW form; and --first-step)
# beside it for every case (compare_steady.py). scripts/device/README.md says how to read the result.
#
# Usage, from the repository root:
#   bash scripts/device/run_steady_check.sh [--cpu-fallback] [--only REGEX] [--toys-only]
#   --cpu-fallback  the runs on CPU tensors (tests this script without a GPU; no allocator figures)
#   --only REGEX    only the case ids matching REGEX
#   --toys-only     without the Llama-3-8B shape
# Cases (9 a run): the Llama and Qwen3-MoE toys (4 layers) at 128 tokens, each with single_adamw_steady
# (AdamW foreach=False), single_adamw_foreach_steady, single_adamw_fused_steady and accum_m4_adamw_steady (4
# micro-batches, foreach=False); the Llama-3-8B shape with 2 layers at 8192 tokens, single_adamw_foreach_steady.
# Output folder: $OUT if set, else ./out: run.log, steady_default/ and steady_expandable/ (cases/, logs/,
# summary.json), steady_comparison.json. Interpreter: $PY, else python3. Census: $CENSUS, else build/census
# (run with device-oracle/steady/lib on LD_LIBRARY_PATH). Limits (s): DEADLINE (100: a run starts no case
# group after it and kills what still runs), CASE_TIMEOUT (80), HARD_LIMIT (115 a run, then 5 to die): both runs and the
# comparison stay under 5 minutes. Workers: WORKERS (3).
set -u
script=run_steady_check.sh
. "$(dirname "${BASH_SOURCE[0]}")/check_setup.sh"
oracle_dir=$root/device-oracle/steady
oracle=$oracle_dir/census_oracle_steady.py
if [ ! -f "$oracle" ]; then
  echo "run_steady_check.sh: no $oracle; run scripts/device/prepare_steady_check.sh first and carry device-oracle" >&2
  exit 2
fi

kinds=single_adamw_steady,single_adamw_foreach_steady,single_adamw_fused_steady,accum_m4_adamw_steady
common=(--real "$device" --families llama,qwen3_moe --seqs 128 --kinds "$kinds" $llama8b
        --llama8b-kinds single_adamw_foreach_steady --workers "${WORKERS:-3}"
        --case-timeout "${CASE_TIMEOUT:-80}" --deadline "${DEADLINE:-100}" --empty-cache-before-step)
[ -n "$only" ] && common+=(--only "$only")
rc=0
for mode in default expandable; do
  say "== the steady-state oracle on $device, allocator $mode -> $out/steady_$mode"
  if [ "$mode" = default ]; then
    env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF timeout --kill-after=5 "${HARD_LIMIT:-115}" \
      "$PY" "$oracle" "${common[@]}" --out "$out/steady_$mode" > "$out/steady_$mode.log" 2>&1
  else
    env -u PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout --kill-after=5 \
      "${HARD_LIMIT:-115}" "$PY" "$oracle" "${common[@]}" --out "$out/steady_$mode" > "$out/steady_$mode.log" 2>&1
  fi
  run_rc=$?
  say "== $mode: exit $run_rc ($(( $(date +%s) - began ))s)"
  grep -h "ok peak=\|ERROR\| of .* ok" "$out/steady_$mode.log" "$out/steady_$mode"/logs/*.log 2>/dev/null \
    | cut -c1-400 | tee -a "$log"
  [ "$run_rc" = 0 ] || rc=$run_rc
  grep -h -A3 "Traceback\|Killed\|crashed\|OutOfMemory\|timeout" "$out/steady_$mode"/logs/*.log "$out/steady_$mode.log" \
    2>/dev/null | head -40 | tee -a "$log"
done

say "== Census beside PyTorch"
census_env=(env "LD_LIBRARY_PATH=$oracle_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
if "${census_env[@]}" "$CENSUS" --help > /dev/null 2>&1; then
  wrapper="$out/.census"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$oracle_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$(cd "$(dirname "$CENSUS")" && pwd)/$(basename "$CENSUS")" > "$wrapper"
  chmod +x "$wrapper"
  confs=()
  [ "$device" = cpu ] && confs=(--alloc-conf default= --alloc-conf expandable=expandable_segments:True)
  timeout 40 "$PY" "$here/compare_steady.py" --census "$wrapper" --run "default=$out/steady_default/cases" \
    --run "expandable=$out/steady_expandable/cases" "${confs[@]}" --fake "$oracle_dir/fake_cases" --out "$out" 2>&1 \
    | tee -a "$log"
  rm -f "$wrapper"
else
  say "no census binary runs here ($CENSUS: $("${census_env[@]}" "$CENSUS" --help 2>&1 | head -1)); compare where one does:"
  say "  python3 scripts/device/compare_steady.py --census build/census --run default=OUT/steady_default/cases \\"
  say "      --run expandable=OUT/steady_expandable/cases --fake device-oracle/steady/fake_cases --out OUT"
fi
say "== done in $(( $(date +%s) - began ))s"
exit $rc
