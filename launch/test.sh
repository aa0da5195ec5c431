#!/usr/bin/env bash
# test.sh: install dependencies, build with warnings as errors, run every test.
# Usage: bash launch/test.sh [ctest args...]   (e.g. -R grad_)
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/install-deps.sh
cmake -S . -B build -G Ninja -DMT_WERROR=ON > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
cd build
set +e
ctest --output-on-failure -j "$(nproc)" "$@" 2>&1 | tee ctest.log
rc=${PIPESTATUS[0]}
set -e
# ctest lists skipped tests (gpu_* without a GPU) after its summary: repeat the summary last
grep -E "tests passed|No tests were found" ctest.log | tail -1
exit "$rc"
