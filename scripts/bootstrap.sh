#!/usr/bin/env bash
# Install what Census needs from Debian's packages, then configure and build it into build/.
# Run from the repository root on Debian 12 (as root, or as a user with sudo). docs/setup.md.
#
#   scripts/bootstrap.sh          what the census command needs, and the census command alone
#   scripts/bootstrap.sh --all    and everything else: the tests and what they use (GoogleTest,
#                                 Chromium, clang and its fuzzing runtime, emscripten, pytest), the
#                                 benchmarks, the Python module, the browser page; then every target
#
# Both configure the same build/ (a unity build: see CMakeLists.txt), so --all after the first
# command builds only what the first did not.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all=OFF
case "${1:-}" in
  "") ;;
  --all) all=ON ;;
  *) echo "bootstrap.sh: unknown argument '$1'; give --all, or nothing" >&2; exit 2 ;;
esac

packages=(g++ cmake make nlohmann-json3-dev libcli11-dev libyaml-cpp-dev)
if [ "$all" = ON ]; then
  packages+=(libgtest-dev libbenchmark-dev python3-dev pybind11-dev python3-pytest python3-setuptools
             python3-pip python3-venv chromium clang libclang-rt-14-dev emscripten)
fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Compiled for a short first build (docs/setup.md has the figures): unity batches of eight files parse
# the common headers once a batch; -O1 takes a tenth less time to compile than -O2, and a census runs
# about 2% more instructions for it (11% more than -O3's).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
      -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
      -DCENSUS_TESTS=$all -DCENSUS_PYTHON=$all -DCENSUS_BENCHMARKS=$all -DCENSUS_WEB=$all ${CENSUS_CMAKE_ARGS:-}
if [ "$all" = ON ]; then
  cmake --build build -j "$(nproc)"
else
  cmake --build build -j "$(nproc)" --target census
fi
