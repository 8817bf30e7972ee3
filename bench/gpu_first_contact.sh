#!/usr/bin/env bash
# First contact with a GPU: one command that tells what works there, within one 10-minute
# command of a GPU machine (python3 with torch and Triton of its own, no package index):
#
#   OUT=$OUT bash bench/gpu_first_contact.sh               # on the GPU machine, timeout ~570 s
#   bash bench/gpu_first_contact.sh --dry-run              # the same phases on the CPU
#   bash bench/gpu_first_contact.sh --only bench,host      # some phases (names below)
#   bash bench/gpu_first_contact.sh --plan                 # the phases and their deadlines
#   ... --only gpu-tests --budget gpu-tests:500            # a rerun: a phase's own seconds
#
# Run from anywhere; stridec is used from this working tree (no install). The phases run in
# order, each with a deadline counted from the script's start (a phase gets what is left
# to its deadline; its failure, or its running out of time, never stops the next):
#
#   env         versions, the device, the compilers
#   quickstart  examples/quickstart.py on CUDA
#   torch-op    the gpu tests of tests/torch: eager then torch.compile (Inductor), CUDA
#               graphs capturing a copy and an in-place Philox, the op's strides
#   philox      Philox bits and uniforms, Triton on the GPU == C on the CPU, 4M elements
#   gpu-tests   the other gpu tests, only the files that hold them, in parallel
#   host        host µs per call of fn, fn(out=), the torch op, against eager
#   bench       the key rows of bench/run.py with torch.compile; its JSON after every row
#
# A phase that reaches its deadline is stopped: pytest starts no test 25 s before it
# (--stop-after: the run then ends with its summary and junit XML), and every command gets
# SIGINT 10 s before the deadline and SIGKILL at it. Files under $OUT (default: a new
# temporary folder), at most 8, none in a folder: summary.txt (versions and one line per
# phase, also printed last), log.txt (every phase's output), torch-op.xml and gpu-tests.xml
# (junit), first-contact.json (env, philox, host), and bench/run.py's
# <date>-<gpu>.{json,md,png}. --dry-run runs every phase on the CPU (the CUDA parts
# skipped, with a line saying so, or run small: Philox against Triton's interpreter,
# bench/run.py --smoke), with deadlines 4 times as long, as CI does
# (tests/bench/test_first_contact.py). bench/README.md, "First contact with a GPU", says
# how to read the files and what to commit.
set -uo pipefail
cd "$(dirname "$0")/.."

# name:seconds, in order; the deadlines are the running sums (checked < 570 by the tests).
PHASES=(env:30 quickstart:45 torch-op:120 philox:45 gpu-tests:160 host:25 bench:120)
KEY_ROWS=(transpose2d_float32 transpose2d_float16 nchw_to_nhwc_fp16 nhwc_to_nchw_fp16
          pack_nchw4_int8 cast_transpose_fp32_fp16 cat_channels_fp16 above_2e31_transpose_int8
          philox_bits_uint32 philox_uniform_float32)
GRACE=10  # SIGINT this long before a deadline; SIGKILL at it
STOP=25   # pytest starts no test this long before a deadline (--stop-after)

dry=0 only="" plan=0 args="$*" budgets=()
while (($#)); do
    case "$1" in
        --dry-run) dry=1 ;;
        --plan) plan=1 ;;
        --only) only=",$2,"; shift ;;
        --budget) budgets+=("$2"); shift ;;  # NAME:SECONDS instead of the phase's own
        *) echo "usage: bash bench/gpu_first_contact.sh [--dry-run] [--only PHASE,...]" \
                "[--budget PHASE:SECONDS] [--plan]" >&2
           exit 2 ;;
    esac
    shift
done

for b in "${budgets[@]}"; do
    for i in "${!PHASES[@]}"; do
        [[ "${PHASES[$i]%%:*}" == "${b%%:*}" ]] && PHASES[$i]=$b
    done
done
# The phases to run (--only: those), each with its deadline: the running sum of their
# budgets. A dry run's deadlines are DRY times longer: it checks what the phases do on a
# CPU, maybe a busy one, not how long they take there.
DRY=4
selected=() end=0
for p in "${PHASES[@]}"; do
    [[ -n "$only" && "$only" != *",${p%%:*},"* ]] && continue
    end=$((end + ${p#*:} * (dry ? DRY : 1)))
    selected+=("${p%%:*}:$end")
done

if ((plan)); then  # name, seconds, deadline
    before=0
    for p in "${selected[@]}"; do echo "${p%%:*} $((${p#*:} - before)) ${p#*:}"; before=${p#*:}; done
    exit 0
fi

out=${OUT:-$(mktemp -d -t stridec-first-contact-XXXXXX)}
mkdir -p "$out"
log="$out/log.txt" summary="$out/summary.txt"
: >"$log"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export STRIDEC_CACHE_DIR=${STRIDEC_CACHE_DIR:-$(mktemp -d -t stridec-cache-XXXXXX)}
py=${PYTHON:-python3}
mode=$( ((dry)) && echo "dry run, on the CPU" || echo "GPU")
started=$SECONDS
lines=()

note() { echo "$*" | tee -a "$log"; }  # the main loop's lines (a phase's output is logged whole)

# Every command of a phase ends by the phase's deadline: SIGINT GRACE s before it (pytest
# then prints its summary and writes its junit XML), SIGKILL at it.
limit() {
    local rest=$((deadline - (SECONDS - started) - GRACE))
    ((rest < 1)) && { echo "(no time left for: $1 ...)"; return 124; }
    timeout -s INT -k "$GRACE" "$rest" "$@"
}

# The gpu tests' files: those that mark a test gpu, under tests/torch or elsewhere.
gpu_files() {
    grep -rlE "pytest\.mark\.gpu|marks=pytest\.mark\.gpu|mark\.gpu" tests --include='test_*.py' \
        | sort | if [[ "$1" == torch ]]; then grep '^tests/torch/'; else grep -v '^tests/torch/'; fi
}

pytest_phase() {  # pytest_phase JUNIT WORKERS FILE...: the gpu tests of FILEs
    local junit=$1 workers=$2 rc=0
    shift 2
    if ((dry)); then
        echo "(dry run: no CUDA here, the gpu tests are collected and skip themselves)"
        workers=0
    fi
    # Past --stop-after (tests/stop_after.py) no test starts: the run ends as interrupted,
    # with its summary and junit XML, STOP s before the deadline; SIGINT and SIGKILL after.
    local options=(-m gpu -q -p no:cacheprovider -rfEs --junitxml="$out/$junit"
                   --stop-after $((deadline - (SECONDS - started) - STOP)))
    ((workers)) && $py -c 'import xdist' 2>/dev/null && options+=(-n "$workers")
    $py -c 'import pytest_timeout' 2>/dev/null && options+=(--timeout 150)
    limit "$py" -m pytest "${options[@]}" "$@" || rc=$?
    # pytest's "interrupted" (2) once --stop-after has passed is the deadline's doing.
    ((rc == 2 && SECONDS - started >= deadline - STOP)) && rc=124
    return $rc
}

phase_env() {
    local rc=0
    if ((dry)); then
        echo "(dry run: no nvidia-smi query)"
    else
        limit nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw \
            --format=csv || rc=$?
    fi
    limit "$py" bench/first_contact.py env --out "$out" $( ((dry)) && echo --dry-run) || rc=$?
    return $rc
}

phase_quickstart() {
    ((dry)) && echo "(dry run: the quickstart runs on the CPU, the C backend)"
    limit "$py" examples/quickstart.py
}

phase_torch-op() { mapfile -t files < <(gpu_files torch); pytest_phase torch-op.xml 4 "${files[@]}"; }

phase_philox() {
    ((dry)) && echo "(dry run: the GPU's Triton kernels replaced by Triton's interpreter, small)"
    limit "$py" bench/first_contact.py philox --out "$out" $( ((dry)) && echo --dry-run)
}

phase_gpu-tests() { mapfile -t files < <(gpu_files other); pytest_phase gpu-tests.xml 8 "${files[@]}"; }

phase_host() {
    ((dry)) && echo "(dry run: CPU tensors, the cpu backend)"
    limit "$py" bench/first_contact.py host --out "$out" $( ((dry)) && echo --dry-run)
}

phase_bench() {
    if ((dry)); then
        echo "(dry run: bench/run.py --smoke, tiny sizes through the interpreter, untimed)"
        limit "$py" bench/run.py --smoke --only "${KEY_ROWS[@]}" --out "$out"
    else
        limit "$py" bench/run.py --only "${KEY_ROWS[@]}" --warmup-ms 25 --rep-ms 100 \
            --torch-compile --out "$out"
    fi
}

for p in "${selected[@]}"; do
    name=${p%%:*} deadline=${p#*:}
    left=$((deadline - (SECONDS - started)))
    note ""
    note "=== $name: $((SECONDS - started)) s in, deadline $deadline s ($mode)"
    if ((left <= GRACE + 2)); then
        note "=== $name: not started, ${left} s left to its deadline"
        lines+=("$(printf '%-11s %-9s %5s s  deadline %3d s' "$name" "no-time" 0 "$deadline")")
        continue
    fi
    began=$SECONDS
    "phase_$name" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
    took=$((SECONDS - began))
    case $rc in
        0) status=ok ;;
        124 | 137) status=timeout ;;  # timeout's own codes: the deadline came first
        *) status="failed($rc)" ;;
    esac
    note "=== $name: $status after $took s"
    lines+=("$(printf '%-11s %-9s %5d s  deadline %3d s' "$name" "$status" "$took" "$deadline")")
done

{
    echo "stridec first contact ($mode), $(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - started)) s"
    echo "command: bash bench/gpu_first_contact.sh${args:+ $args}"
    if [[ -f "$out/first-contact.json" ]]; then
        $py -c 'import json, sys; env = json.load(open(sys.argv[1])).get("env", {});
print("\n".join(f"{k}: {v}" for k, v in env.items()))' "$out/first-contact.json" 2>/dev/null
    fi
    echo
    printf '%s\n' "${lines[@]}"
    echo
    echo "files: $(cd "$out" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
} >"$summary"
cat "$summary"
# Every phase ok (or, in a dry run, ok with its CUDA parts skipped): exit 0.
! grep -qE '^[a-z-]+ +(failed|timeout|no-time)' "$summary"
