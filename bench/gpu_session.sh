#!/usr/bin/env bash
# Benchmark jobs on a GPU machine that has python3, torch and Triton of its own but no
# package index and at most 10 minutes a command (see bench/README.md, "First contact with
# a GPU": run bench/gpu_first_contact.sh first, it also runs the gpu tests). Run from the
# repository root; stridec is used from the working tree (no install). Everything it
# writes goes to $OUT (or bench/results/session when OUT is unset).
#
#   bash bench/gpu_session.sh bench [args]   # python bench/run.py (e.g. --only 'pack_*')
#   bash bench/gpu_session.sh tune [args]    # python bench/tune.py: the plan sweep
#
# Each ends within 570 s: SIGINT then (bench/run.py has written its JSON after every row
# by then; bench/tune.py its table so far), SIGKILL 20 s later. The whole suite does not
# fit one command: split it with --only, one command each.
set -uo pipefail
mode=${1:-}
shift || true
out=${OUT:-bench/results/session}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export STRIDEC_CACHE_DIR=${STRIDEC_CACHE_DIR:-/tmp/stridec-cache}
py=${PYTHON:-python3}

case "$mode" in
    bench) timeout -s INT -k 20 550 $py bench/run.py --out "$out" "$@" 2>&1 | tee "$out/bench.txt" ;;
    tune) timeout -s INT -k 20 550 $py bench/tune.py --out "$out" "$@" 2>&1 | tee "$out/tune.txt" ;;
    *) echo "usage: bash bench/gpu_session.sh bench|tune [args]" \
            "(the gpu tests: bash bench/gpu_first_contact.sh)" >&2; exit 2 ;;
esac
