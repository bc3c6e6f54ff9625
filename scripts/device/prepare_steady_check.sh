#!/usr/bin/env bash
# Lays out the steady-state check's oracle in device-oracle/steady/ (git ignores device-oracle/): the team's
# steady-state oracle, the step oracle it imports and the torch2 oracle that imports, copied from the shared
# oracle folder at the versions the check was written against; census_oracle_step.py extended by
# allocator_check.patch (torch.cuda.memory_stats() in full at every phase boundary, as the first-step check
# reads it) and census_oracle_steady.py by steady_check.patch (the step oracle's real mode for its two steps,
# the allocator read per step, AdamW(fused=True), the Llama-3-8B shape, a deadline: see that file and
# README.md). Also copied: the fake-tensor steady cases of the llama and qwen3_moe toys (fake_cases/, the
# reference the real run's tracked numbers are compared with) and, where build/census links one,
# libyaml-cpp (lib/), so that census may run on the GPU machine too.
#
# Usage, from the repository root: bash scripts/device/prepare_steady_check.sh [ORACLE_STEP_DIR]
#   ORACLE_STEP_DIR  the shared oracle's step folder (default ../shared/oracle/step)
# prepare_allocator_check.sh removes device-oracle/ whole: run this one after it. Then carry device-oracle
# (and build/census) to the GPU machine: README.md.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
from=${1:-$root/../shared/oracle/step}
to=$root/device-oracle/steady
# The sha256 of each file the patches were made against; another version may not take them.
declare -A expected=([census_oracle_step.py]=c38dd91c3cd5 [census_oracle_torch2.py]=cddf251885ed
                     [census_oracle_steady.py]=ed507b75310a)
for file in census_oracle_step.py census_oracle_torch2.py census_oracle_steady.py; do
  if [ ! -f "$from/$file" ]; then
    echo "prepare_steady_check.sh: no $from/$file; give the shared oracle's step folder" >&2
    exit 2
  fi
  sum=$(sha256sum "$from/$file" | cut -c1-12)
  if [ "$sum" != "${expected[$file]}" ]; then
    echo "prepare_steady_check.sh: $from/$file is another version (sha256 $sum..., the patches are for ${expected[$file]}...)" >&2
    exit 2
  fi
done
rm -rf "$to"
mkdir -p "$to/fake_cases" "$to/lib"
cp "$from/census_oracle_step.py" "$from/census_oracle_torch2.py" "$from/census_oracle_steady.py" "$to/"
chmod u+w "$to"/*.py
(cd "$to" && patch --quiet -p0 < "$here/allocator_check.patch" && patch --quiet -p0 < "$here/steady_check.patch")
cp "$from"/steady/cases/llama_toy_*_steady.json "$from"/steady/cases/qwen3_moe_toy_*_steady.json "$to/fake_cases/"
census=$root/build/census
if [ -x "$census" ]; then
  yaml=$(ldd "$census" 2>/dev/null | awk '/libyaml-cpp/ {print $3}')
  [ -n "$yaml" ] && [ -f "$yaml" ] && cp -L "$yaml" "$to/lib/"
fi
echo "device-oracle/steady/: the steady-state oracle with the check's extension ($(ls "$to/fake_cases" | wc -l) fake" \
     "cases, lib: $(ls "$to/lib" | tr '\n' ' ')); carry device-oracle with build/census"
