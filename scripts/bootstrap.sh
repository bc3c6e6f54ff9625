#!/usr/bin/env bash
# Install what Census needs from Debian's packages, then configure and build it into build/.
# Run from the repository root on Debian 12 (as root, or as a user with sudo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
packages=(g++ cmake make libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
          python3-dev pybind11-dev python3-pytest python3-setuptools python3-pip python3-venv chromium)
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
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CENSUS_CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"
