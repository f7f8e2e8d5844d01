#!/usr/bin/env bash
# GPU device check (issue 3): on a machine with a real NVIDIA GPU, exercise what the dev
# machines cannot - NVML sampling, gpu_health, a burn with 10 Hz telemetry - and capture raw
# tool output to turn into test data. Every step keeps its stdout, stderr and exit code under
# $OUT and the script never stops on a failed step. About 5 minutes on an 8-GPU node (the quick
# suite at the end included), plus POWER_S (default 120) seconds of power_headroom load.
#
#   prepare (a connected machine, repo root):  pip wheel -w wheels . && pip download -d wheels .
#   run (the GPU machine, repo root):           OUT=/some/dir benchmarks/gpu_device_check.sh
#
# BURN_S (default 60) sets the burn length; the burn uses the builtin bf16 engine when PyTorch
# is importable, else gpu_burn when it is on PATH, else it is left out (steps.log says which).
set -u
OUT=${OUT:-$PWD/gpu-device-check}; WHEELS=${WHEELS:-$PWD/wheels}; BURN_S=${BURN_S:-60}
VENV=${VENV:-/tmp/harness-venv}
mkdir -p "$OUT/raw"
log() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$OUT/steps.log"; }
step() {  # step NAME CMD...: output to raw/NAME.{out,err,rc}, bounded in time
  local name=$1; shift; log "$name: $*"
  timeout "${STEP_TIMEOUT:-600}" "$@" >"$OUT/raw/$name.out" 2>"$OUT/raw/$name.err"
  echo $? >"$OUT/raw/$name.rc"; log "$name: exit $(cat "$OUT/raw/$name.rc")"
}

# 1. raw captures straight from the tools (the parsers' future test data)
step nvidia-smi-L nvidia-smi -L
step nvidia-smi nvidia-smi
step nvidia-smi-dmon nvidia-smi dmon -s puc -c 5
step nvidia-smi-q nvidia-smi -q
step nvidia-smi-q-x nvidia-smi -q -x
step nvidia-smi-topo nvidia-smi topo -m
step nvidia-smi-csv nvidia-smi --format=csv --query-gpu=index,name,temperature.gpu,power.draw,power.limit,\
clocks.sm,clocks.max.sm,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,\
clocks_event_reasons.active,ecc.errors.uncorrected.volatile.total
step dmesg-xid sh -c 'dmesg 2>&1 | grep -E "NVRM: (Xid|GPU at)|SXid" || true'
command -v dcgmi >/dev/null && step dcgmi-diag-r1 dcgmi diag -r 1 -j

# 2. the package from carried wheels into a venv; without wheels, this source tree on PYTHONPATH
if [ -d "$WHEELS" ] && python3 -m venv --system-site-packages "$VENV"; then
  . "$VENV/bin/activate"
  step pip-install pip install --no-index --find-links "$WHEELS" gpu-acceptance-harness
else export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}; log "no wheels in $WHEELS: using $PWD as is"; fi
step harness-version python -c "import harness, pynvml; print(harness.__version__, pynvml.__file__)"

# 3. the parsers on this machine's real output
for k in nvidia-smi-q:nvidia-smi-q nvidia-smi-q:nvidia-smi-q-x nvidia-smi-csv:nvidia-smi-csv xid:dmesg-xid \
         nvidia-smi-topo:nvidia-smi-topo nvidia-smi:nvidia-smi nvidia-smi-dmon:nvidia-smi-dmon; do
  step "parse-${k#*:}" python -m harness parse "${k%%:*}" "$OUT/raw/${k#*:}.out"
done

# 4. the NVML edge for real: health facts, and the sampler at 10 Hz for 10 s on an idle node
step nvml-sampler python - "$OUT/raw/idle-telemetry.json" <<'EOF'
import json, sys, time
from dataclasses import asdict
from harness.run import sampler as telemetry
from harness.series import telemetry as telemetry_metrics
from harness.platform import nvml
with nvml.NvmlSession() as nv:
    print(json.dumps([asdict(h) for h in nv.health()], indent=1))
    s = telemetry.Sampler(nv.sample, 0.1).start(); time.sleep(10); series = s.stop()
open(sys.argv[1], "w").write(json.dumps(series.to_dict()))
print(f"samples {len(series.t)} in 10 s for {len(series.gpus)} GPUs; mean sample cost "
      f"{series.sample_cost_s * 1000:.2f} ms; overruns {series.overruns}")
for m in telemetry_metrics.derive(series):
    print(m.name, dict(m.labels), round(m.value, 3), m.unit)
EOF

# the sampler's cost against bare NVML calls, and 10 Hz scaled to 8 GPUs
step bench-telemetry python benchmarks/bench_telemetry.py --seconds 5

# 5. a real run: gpu_health and a burn with telemetry at 10 Hz, then the report re-rendered
if python -c "import torch" 2>/dev/null; then BURN="{engine: builtin, dtype: bf16, duration: $BURN_S}"
elif command -v gpu_burn >/dev/null; then BURN="{engine: gpu-burn, tensor_cores: true, duration: $BURN_S}"
else BURN=""; log "no PyTorch and no gpu_burn: the burn is left out"; fi
{ echo "name: device-check"; echo "checks:"
  echo "  - {id: inventory, kind: inventory}"
  echo "  - {id: gpu-health, kind: gpu_health}"
  [ -n "$BURN" ] && echo "  - {id: gpu-burn, kind: gpu_burn, params: ${BURN%\}}, telemetry_period: 0.1}}"
  # interconnect and data path on the real GPU: topology (judged only where the profile states a
  # shape), the builtin pinned-memory copy test (PyTorch/CuPy), nvbandwidth where installed, and
  # a small data_path sweep that copies into GPU memory
  echo "  - {id: topology, kind: topology}"
  echo "  - {id: gpu-copy-builtin, kind: gpu_bandwidth, params: {engine: builtin}}"
  command -v nvbandwidth >/dev/null && echo "  - {id: gpu-copy-nvbandwidth, kind: gpu_bandwidth, params: {engine: nvbandwidth}}"
  echo "  - {id: data-path, kind: data_path, params: {total_size: 1G, workers: [1, 4], step_seconds: 3, per_gpu_gbps: 0.27}}"
  # power_headroom: a full-system load with NVML power (node power estimated: GPU + ALLOWANCE_W
  # unless a local BMC answers); needs PyTorch for its bf16 burn, stress-ng for CPU/memory
  if python -c "import torch" 2>/dev/null; then
    command -v stress-ng >/dev/null && STRESS="" || STRESS=", cpu_workers: 0, vm_workers: 0"
    echo "  - {id: power-headroom, kind: power_headroom, params: {duration: ${POWER_S:-120}, cooldown: 15,"
    echo "     period: 0.5, allowance_w: ${ALLOWANCE_W:-1000}$STRESS}}"
  fi
} >"$OUT/suite.yaml"
step harness-run python -m harness run "$OUT/suite.yaml" --output "$OUT/runs"
RUN_DIR=$(ls -d "$OUT"/runs/*/ 2>/dev/null | head -n 1)
[ -n "$RUN_DIR" ] && step harness-report python -m harness report "$RUN_DIR"

# 6. issue #3's done-when, literally: the shipped quick suite (profile chosen from the hardware)
step quick-suite python -m harness run suites/quick.yaml --output "$OUT/quick"
log "done: $OUT (steps.log, raw/, runs/)"
