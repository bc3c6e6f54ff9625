#!/usr/bin/env bash
# Build the browser page (docs/web.md) with Debian's emscripten: the census command's sources compiled
# to WebAssembly, beside web/'s page, in BUILD_DIR/site/ (default build-web/site/), the folder to
# publish. It opens from file:// as from any static host.
#   scripts/build_web.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-build-web}
if ! command -v emcmake > /dev/null; then
  echo "build_web.sh: emscripten is not installed; apt-get install emscripten" >&2
  exit 1
fi
# emscripten's JavaScript optimizer requires Debian's acorn (node-acorn), which a node that is not
# Debian's own (nodesource's, say) does not look for in /usr/share/nodejs.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
mkdir -p "$out"
emcmake cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
      ${CENSUS_WEB_CMAKE_ARGS:-} > "$out/configure.log" 2>&1 ||
  { cat "$out/configure.log" >&2; exit 1; }
cmake --build "$out" -j "$(nproc)" --target census_web
echo "the page: $out/site/index.html ($(du -k "$out/site/census.js" | cut -f1) KiB of module, WebAssembly inline)"
