#!/usr/bin/env bash
# Lays out the caching-allocator check's oracle in device-oracle/ (git ignores it): the team's step
# oracle, census_oracle_step.py and the torch2 oracle it imports, copied from the shared oracle folder
# at the versions the check was written against, census_oracle_step.py then extended by
# allocator_check.patch (what it records beyond the shared oracle: see that file and README.md).
#
# Usage, from the repository root: bash scripts/device/prepare_allocator_check.sh [ORACLE_STEP_DIR]
#   ORACLE_STEP_DIR  the shared oracle's step folder (default ../shared/oracle/step)
# Then carry device-oracle (and build/census) to the GPU machine: README.md.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
from=${1:-$root/../shared/oracle/step}
to=$root/device-oracle
# The sha256 of each file the patch was made against; another version may not take it.
declare -A expected=([census_oracle_step.py]=c38dd91c3cd5 [census_oracle_torch2.py]=cddf251885ed)
for file in census_oracle_step.py census_oracle_torch2.py; do
  if [ ! -f "$from/$file" ]; then
    echo "prepare_allocator_check.sh: no $from/$file; give the shared oracle's step folder" >&2
    exit 2
  fi
  sum=$(sha256sum "$from/$file" | cut -c1-12)
  if [ "$sum" != "${expected[$file]}" ]; then
    echo "prepare_allocator_check.sh: $from/$file is another version (sha256 $sum..., the patch is for ${expected[$file]}...)" >&2
    exit 2
  fi
done
rm -rf "$to"
mkdir -p "$to"
cp "$from/census_oracle_step.py" "$from/census_oracle_torch2.py" "$to/"
(cd "$to" && patch --quiet -p0 < "$here/allocator_check.patch")
echo "device-oracle/: the step oracle with the allocator check's extension; carry it with build/census"
