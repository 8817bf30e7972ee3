#!/usr/bin/env bash
# One job on a GPU machine that has python3, torch and Triton of its own but no package
# index and a limited time per command (see bench/README.md, "Before and on a GPU"): run
# from the repository root; stridec is used from the working tree (no install).
# Everything it writes goes to $OUT (or bench/results/session when OUT is unset), and it
# ends with the short tables.
#
#   bash bench/gpu_session.sh tests    # nvidia-smi, then pytest -m gpu (xdist if present)
#   bash bench/gpu_session.sh bench    # python bench/run.py: every row, JSON + md + png
#   bash bench/gpu_session.sh tune     # python bench/tune.py: the plan sweep, JSON + table
#   bash bench/gpu_session.sh quick    # tests, then bench without torch.compile's rows
#
# Each mode is bounded by `timeout` to end within 10 minutes (sized on an H200). Extra
# arguments go to the Python command (e.g. `bench --only 'pack_*'`).
set -uo pipefail
mode=${1:-tests}
shift || true
out=${OUT:-bench/results/session}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export STRIDEC_CACHE_DIR=${STRIDEC_CACHE_DIR:-/tmp/stridec-cache}
py=${PYTHON:-python3}

# Test-only packages the machine may lack travel as wheels in .whl (git-ignored).
if compgen -G ".whl/*.whl" >/dev/null; then
    $py -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

machine() {
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv | tee "$out/nvidia-smi.csv"
    $py -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda,
"triton", triton.__version__, torch.cuda.get_device_name())' | tee -a "$out/versions.txt"
}

tests() {
    local extra=()
    $py -c 'import filecheck' 2>/dev/null || extra+=(--ignore=tests/passes/test_ir_files.py)
    $py -c 'import xdist' 2>/dev/null && extra+=(-n 8)
    timeout 480 $py -m pytest -m gpu -q -p no:cacheprovider -rfE "${extra[@]}" "$@" 2>&1 \
        | tee "$out/pytest-gpu.txt" | tail -40
}

case "$mode" in
    tests) machine; tests "$@" ;;
    bench) machine; timeout 570 $py bench/run.py --out "$out" "$@" 2>&1 | tee "$out/bench.txt" ;;
    tune) machine; timeout 570 $py bench/tune.py --out "$out" "$@" 2>&1 | tee "$out/tune.txt" ;;
    quick)
        machine
        tests
        timeout 300 $py bench/run.py --out "$out" --no-torch-compile --rep-ms 100 "$@" 2>&1 \
            | tee "$out/bench.txt"
        ;;
    *) echo "usage: bash bench/gpu_session.sh tests|bench|tune|quick [args]" >&2; exit 2 ;;
esac
