#!/usr/bin/env bash
# GPU device check (issues 3 and 21): on a machine with a real NVIDIA GPU, exercise what the dev
# machines cannot - NVML (health, instantaneous power, the 10 Hz sampler and its cost), the
# builtin burn and copy engines, gpu-burn and nccl-tests built here with nvcc, and a harness run -
# and capture raw tool output to turn into test data. Designed to work the first time:
#
# * the machine's python3 (a venv with PyTorch, CuPy, nvidia-ml-py, pandas, NCCL's wheel) is used
#   as it is; of the wheels carried in .device/wheels/cp312 (benchmarks/gpu_device_prep.sh) only
#   those whose distribution python3 lacks are installed, with --no-deps, into a target directory
#   put on PYTHONPATH (no new venv: that would hide PyTorch);
# * gpu-burn (a current wilicc/gpu-burn: its Makefile emits compare.fatbin, which the harness's
#   gpu-burn engine finds beside the binary) and nccl-tests' all_reduce_perf only are built with nvcc
#   from .device/src when both are there;
# * every step is bounded (STEP_TIMEOUT, default 120 s) and the whole run keeps within BUDGET_S
#   (default 450 s: the lent machine's 9 minutes with margin for its start and the transfers): a
#   step that would start with less than 20 s left is skipped, and said so;
# * the work happens in a fresh directory under /tmp (WORK); $OUT receives exactly two files (the
#   machine hands back at most 8, at most 2 folders down): ONE archive, device-check.tar.gz, and
#   summary.txt (per-GPU TFLOPS, temperatures, power average and instantaneous, throttling, the
#   telemetry cost).
#
#   prepare (here):     benchmarks/gpu_device_prep.sh
#   run (GPU machine):  benchmarks/gpu_device_check.sh      ($OUT is the machine's; carry .device)
#   rehearse (here):    HARNESS_DEVICE_REHEARSAL=1 PY=.venv/bin/python OUT=/tmp/x benchmarks/gpu_device_check.sh
#
# HARNESS_DEVICE_REHEARSAL=1 puts tests/support/fakenvml.py in place of pynvml (two fake H200s)
# and burns/copies on the CPU (NumPy backend), so the whole flow and the archive layout can be
# rehearsed without a GPU (the CPU burn stands in for both fake GPUs and must pass). BURN_S (default
# 40) sets the burn length.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$PWD/gpu-device-check}; DEV=${DEV:-$ROOT/.device}; PY=${PY:-python3}
BURN_S=${BURN_S:-40}; STEP_TIMEOUT=${STEP_TIMEOUT:-120}; BUDGET_S=${BUDGET_S:-450}
REHEARSAL=${HARNESS_DEVICE_REHEARSAL:-0}
START=$(date +%s)
mkdir -p "$OUT" || exit 2
W=${WORK:-$(mktemp -d /tmp/gpu-device-check.XXXXXX)} || exit 2
mkdir -p "$W/raw" "$W/site" "$W/build"
cd "$ROOT" || exit 2
log() { echo "== $(date -u +%H:%M:%S) +$(($(date +%s) - START))s $*" | tee -a "$W/steps.log"; }
step() {  # step NAME [TIMEOUT] -- CMD...: raw/NAME.{out,err,rc}, bounded by TIMEOUT and the budget
  local name=$1 t=$STEP_TIMEOUT; shift
  if [ "$1" != "--" ]; then t=$1; shift; fi; shift
  local left=$((BUDGET_S - ($(date +%s) - START)))
  if [ "$left" -lt 20 ]; then log "$name: SKIPPED (budget spent)"; echo skipped >"$W/raw/$name.rc"; return; fi
  [ "$t" -gt "$left" ] && t=$left
  log "$name (<= ${t}s): $*"
  timeout -k 5 "$t" "$@" >"$W/raw/$name.out" 2>"$W/raw/$name.err"
  echo $? >"$W/raw/$name.rc"; log "$name: exit $(cat "$W/raw/$name.rc")"
}

# 0. where we are
step python -- "$PY" -c "import sys, platform; print(sys.version); print(platform.platform())"
step torch -- "$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), \
torch.cuda.device_count()); [print(i, torch.cuda.get_device_properties(i)) for i in range(torch.cuda.device_count())]"

# 1. the package's missing dependencies from carried cp312 wheels into a target directory
if [ -d "$DEV/wheels/cp312" ]; then
  missing=()
  for whl in "$DEV"/wheels/cp312/*.whl; do
    dist=$(basename "$whl" | cut -d- -f1)
    "$PY" -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$dist" 2>/dev/null || missing+=("$whl")
  done
  log "wheels: ${#missing[@]} distribution(s) missing from $PY"
  if [ ${#missing[@]} -gt 0 ]; then
    step pip-install -- "$PY" -m pip install --no-index --no-deps --target "$W/site" "${missing[@]}"
  fi
else log "no wheels in $DEV/wheels/cp312: using $PY's own packages"; fi
export PYTHONPATH=$ROOT:$W/site${PYTHONPATH:+:$PYTHONPATH}
if [ "$REHEARSAL" = 1 ]; then  # the NVML fake in place of pynvml, for a dry run without a GPU
  mkdir -p "$W/fake"
  cat >"$W/fake/pynvml.py" <<EOF
"""Rehearsal only: the tests' fake NVML (two H200s, one with the instantaneous power field)."""
import sys
sys.path.insert(0, "$ROOT/tests/support")
import fakenvml as _f
_m = _f.module([_f.FakeGpu(power_instant_w=702.0), _f.FakeGpu(temp=64.0)])
globals().update({k: getattr(_m, k) for k in dir(_m) if not k.startswith("__")})
EOF
  export PYTHONPATH=$W/fake:$PYTHONPATH; BACKEND=numpy; DTYPE=fp32; SIZE="--size 128"
  log "REHEARSAL: fake NVML from tests/support/fakenvml.py, NumPy backend"
else BACKEND=auto; DTYPE=bf16; SIZE=""; fi
step harness-version -- "$PY" -c "import harness, pynvml, pydantic; print(harness.__version__, pynvml.__file__, \
pydantic.__version__)"

# 2. raw captures straight from the tools (the parsers' future test data)
step nvidia-smi-L 20 -- nvidia-smi -L
step nvidia-smi-q 30 -- nvidia-smi -q
step nvidia-smi-q-x 30 -- nvidia-smi -q -x
step nvidia-smi-topo 20 -- nvidia-smi topo -m
step nvidia-smi-dmon 20 -- nvidia-smi dmon -s puc -c 5
step dmesg-nvrm 20 -- sh -c 'dmesg 2>&1 | grep -E "NVRM|SXid" || true'

# 3. gpu-burn and nccl-tests built here with nvcc, from carried source
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true); NVCC=${NVCC:+$(readlink -f "$NVCC")}
ARCH=$("$PY" -c "import torch; p = torch.cuda.get_device_properties(0); print(f'{p.major}{p.minor}')" 2>/dev/null || echo 90)
if [ -n "$NVCC" ] && [ -d "$DEV/src/gpu-burn" ]; then
  cp -r "$DEV/src/gpu-burn" "$W/build/"
  step build-gpu-burn -- make -C "$W/build/gpu-burn" CUDAPATH="$(dirname "$(dirname "$NVCC")")" COMPUTE="$ARCH"
  log "gpu-burn kernel: $(cd "$W/build/gpu-burn" && ls compare.fatbin compare.ptx 2>/dev/null | tr '\n' ' ')"
else log "gpu-burn not built (nvcc: ${NVCC:-none}; source: $DEV/src/gpu-burn)"; fi
NCCL=$("$PY" -c "import nvidia.nccl as n; print(list(n.__path__)[0])" 2>/dev/null || true)
if [ -n "$NVCC" ] && [ -n "$NCCL" ] && [ -d "$DEV/src/nccl-tests" ]; then
  mkdir -p "$W/build/nccl/lib"; ln -sf "$NCCL/include" "$W/build/nccl/include"
  ln -sf "$(ls "$NCCL"/lib/libnccl.so* | head -n 1)" "$W/build/nccl/lib/libnccl.so"
  cp -r "$DEV/src/nccl-tests" "$W/build/"
  # only all_reduce_perf (and what it links), not the eleven binaries
  step build-nccl-tests 180 -- make -C "$W/build/nccl-tests/src" -j16 MPI=0 \
    CUDA_HOME="$(dirname "$(dirname "$NVCC")")" NCCL_HOME="$W/build/nccl" \
    NVCC_GENCODE="-gencode=arch=compute_$ARCH,code=sm_$ARCH" BUILDDIR="$W/build/nccl-tests/build" \
    "$W/build/nccl-tests/build/all_reduce_perf"
else log "nccl-tests not built (nvcc: ${NVCC:-none}; NCCL wheel: ${NCCL:-none})"; fi
export LD_LIBRARY_PATH=${NCCL:+$NCCL/lib:}${LD_LIBRARY_PATH:-}
NT=$W/build/nccl-tests/build
[ -x "$NT/all_reduce_perf" ] && step nccl-all-reduce -- "$NT/all_reduce_perf" -b 8 -e 1G -f 4 -g 1 -c 1

# 4. the NVML edge for real: health, instantaneous vs averaged power, the sampler at 10 Hz and its cost
step nvml-sampler -- "$PY" - "$W/raw/idle-telemetry.json" <<'EOF'
import json, sys, time
from dataclasses import asdict
from harness.platform import nvml
from harness.run.sampler import Sampler
from harness.series import telemetry
with nvml.NvmlSession() as nv:
    print(json.dumps({"health": [asdict(h) for h in nv.health()], "limits": [asdict(x) for x in nv.limits()],
                      "open_errors": nv.open_errors}, indent=1))
    t0 = time.perf_counter(); n = 50
    for _ in range(n):
        nv.sample()
    print(f"bare sample() of all GPUs: {(time.perf_counter() - t0) / n * 1000:.2f} ms")
    for x in nv.sample():
        how = {True: "instantaneous", False: "1-s average", None: "none"}[x.power_instant]
        print(f"GPU {x.gpu}: power {x.power} W ({how}), 1-s average {x.power_avg} W, temp {x.temp} C, "
              f"error {x.error}")
    s = Sampler(nv.sample, 0.1).start(); time.sleep(10); series = s.stop()
open(sys.argv[1], "w").write(json.dumps(series.to_dict()))
print(f"samples {len(series.t)} in 10 s for {len(series.gpus)} GPUs; mean sample cost "
      f"{series.sample_cost_s * 1000:.2f} ms; overruns {series.overruns}")
for m in telemetry.derive(series):
    print(m.name, dict(m.labels), round(m.value, 3), m.unit)
EOF

# 5. a harness run first (the verdict matters most): health, builtin burn with 10 Hz telemetry, gpu-burn
#    when built, copies
# the settle gate waits (bounded) for GPUs to cool between measuring checks: short here, recorded
SETTLE_S=${SETTLE_S:-$([ "$REHEARSAL" = 1 ] && echo 2 || echo 20)}
{ echo "name: device-check"; echo "defaults: {settle: {timeout: $SETTLE_S}}"; echo "checks:"
  echo "  - {id: inventory, kind: inventory}"
  echo "  - {id: gpu-health, kind: gpu_health}"
  echo "  - {id: burn-builtin, kind: gpu_burn, params: {engine: builtin, dtype: $DTYPE, backend: $BACKEND, \
duration: $BURN_S, telemetry_period: 0.1$([ "$BACKEND" = numpy ] && echo ", size: 128")}}"
  [ -x "$W/build/gpu-burn/gpu_burn" ] && echo "  - {id: burn-gpu-burn, kind: gpu_burn, params: {engine: gpu-burn, \
binary: $W/build/gpu-burn/gpu_burn, tensor_cores: true, duration: 20, telemetry_period: 0.1}}"
  echo "  - {id: copy-builtin, kind: gpu_bandwidth, params: {engine: builtin, backend: $BACKEND, samples: 3\
$([ "$BACKEND" = numpy ] && echo ", buffer_mib: 1")}}"
} >"$W/suite.yaml"
step harness-run $((BURN_S * 2 + 150)) -- "$PY" -m harness run "$W/suite.yaml" --output "$W/runs" --history off
RUN_DIR=$(ls -d "$W"/runs/*/ 2>/dev/null | head -n 1)

# 6. the engines on their own, after the run (their JSON lines are test data)
step burn-engine $((BURN_S / 2 + 60)) -- "$PY" -m harness.engines.burn --seconds $((BURN_S / 2)) --dtype $DTYPE \
  --backend $BACKEND $SIZE
step copy-engine -- "$PY" -m harness.engines.copy --backend $BACKEND --trials 3 $([ "$BACKEND" = numpy ] && echo "--size 1048576")

# 7. the numbers the issue asks for, from the run's record
step summary 30 -- "$PY" - "${RUN_DIR:-none}" "$W/raw/nvml-sampler.out" "$W/summary.json" <<'EOF'
import json, sys
from pathlib import Path
run, sampler, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
out = {"verdict": None, "checks": {}, "sampler": []}
if (run / "results.json").is_file():
    rec = json.loads((run / "results.json").read_text())
    out["verdict"] = rec.get("verdict")
    for c in rec.get("checks", []):
        want = ("gpu_burn.tflops", "gpu.temp_max", "gpu.mem_temp_max", "gpu.power_mean", "gpu.power_max",
                "gpu.power_avg_max", "gpu.throttle_pct", "gpu.hw_slowdown_episodes", "gpu_burn.mem_errors",
                "gpu.h2d_bw", "gpu.d2h_bw")
        out["checks"][c.get("id")] = {"status": c.get("status"), "message": c.get("message"),
            "metrics": [(m["name"], m.get("labels"), m["value"]) for m in c.get("metrics", []) if m["name"] in want]}
if sampler.is_file():
    out["sampler"] = [ln for ln in sampler.read_text().splitlines() if "sample" in ln or ln.startswith("GPU ")]
dest.write_text(json.dumps(out, indent=1))
for cid, c in out["checks"].items():
    print(f"{cid}: {c['status']}: {c['message']}")
    for name, labels, value in c["metrics"]:
        if name != "gpu.throttle_pct" or labels.get("reason") in ("any", "hw_slowdown", "power_cap"):
            print(f"   {name} {labels} {value:.4g}")
print("\n".join(out["sampler"]))
print("verdict:", out["verdict"])
EOF
cp "$W/raw/summary.out" "$W/summary.txt" 2>/dev/null || true

# 8. $OUT gets the archive and the summary, nothing else (the work directory stays under /tmp)
log "done in $(($(date +%s) - START)) s (work directory $W)"
tar -czf "$OUT/device-check.tar.gz" -C "$W" --exclude=./build --exclude=./site --exclude=./fake . 2>/dev/null
cp "$W/summary.txt" "$OUT/summary.txt" 2>/dev/null || echo "no summary: see steps.log in the archive" >"$OUT/summary.txt"
ls -la "$OUT"
