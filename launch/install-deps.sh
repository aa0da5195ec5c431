#!/usr/bin/env bash
# install-deps.sh: every Debian package minimax-train needs to build, test and run (Debian 12).
# Idempotent and quick when everything is already there. Run as root (or with sudo available).
#   bash launch/install-deps.sh                  build, run and test (launch/test.sh, CI)
#   bash launch/install-deps.sh --no-test-deps   build and run only (launch/demo.sh): without
#                                                TEST_PACKAGES below
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang-format
  openmpi-bin libopenmpi-dev          # MPI: real ranks on CPU, bootstrap for NCCL
  libhdf5-openmpi-dev hdf5-tools      # parallel HDF5: token cache, resumable training state
  libopenblas-dev                     # CPU BLAS (see docs/blas.md for the core-type pin)
  libopenblas-openmp-dev              # its OpenMP build: one thread pool with our loops
  libcjson-dev libpcre2-dev           # config.json / tokenizer.json, tokenizer regexes
  gnuplot-nox                         # loss-curve picture at the end of training
  libmicrohttpd-dev                   # minimax-serve: its HTTP server
  clang libclang-rt-14-dev            # fuzz targets: libFuzzer (tools/fuzz.sh, CI)
)
# only the tests need these: the chat page of minimax-serve in a headless browser (serve_webui,
# skipped without one), with a font for its screenshot (about 150 MB, 20 s from a near mirror)
TEST_PACKAGES=(chromium fonts-liberation)
if [ "${1:-}" = --no-test-deps ]; then
  TEST_PACKAGES=()
elif [ $# -gt 0 ]; then
  echo "usage: bash launch/install-deps.sh [--no-test-deps]" >&2
  exit 2
fi

missing=()
for p in "${PACKAGES[@]}" "${TEST_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
