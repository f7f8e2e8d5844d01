"""data_path for real: the worker generates and reads files on this machine (host-memory path).

Sets are a few MiB and steps a fraction of a second, so each run takes about a second. No GPU
here: the PyTorch/CuPy sinks are exercised against small fakes (labelled) in-process; the real
GPU path needs a machine with a GPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import mmap
import os
import signal
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from clihelp import harness, results, run_dirs, write
from faulthelp import procs_with, start, wait_for
from pydantic import ValidationError

from harness.checks.base import CheckContext
from harness.checks.data_path import KIND, DataPathParams
from harness.engines import data_path as worker
from harness.errors import ToolError
from harness.platform import proc

SMALL = {"total_size": "6M", "record_size": "64k", "record_max": "512k", "workers": [1, 2],
         "step_seconds": 0.3}


def ctx(run_dir: Path, **kw) -> CheckContext:
    return CheckContext("data-path", run_dir, kw.pop("timeout_s", 120), False, False,
                        kw.pop("inventory", {}), logging.getLogger("t"), **kw)


def scratch_left(parent: Path) -> list[Path]:
    return sorted(parent.glob("harness-data_path-*"))


@pytest.mark.parametrize("params, words", [
    ({"target": "/a", "dataset": "/b"}, "either `target`"),
    ({"files": 10, "total_size": "1G"}, "either `files` or `total_size`"),
    ({"record_size": "4M", "record_max": "64k"}, "record_size"),
    ({"record_size": "1k"}, "4k <= record_size"),
    ({"buffer_size": "6000"}, "multiple of 4k"),
    ({"workers": [2, 2]}, "listed twice"),
    ({"workers": [0]}, "between 1 and 1024"),
    ({"required_gbps": 1, "per_gpu_gbps": 0.1}, "one required rate"),
    ({"total_size": "lots"}, "not a size"),
    ({"direct": "sometimes"}, "direct"),
])
def test_bad_params(params, words):
    with pytest.raises(ValidationError, match=words):
        DataPathParams.model_validate(params)


def test_plan_generates_then_reads_once_per_worker_count():
    p = DataPathParams.model_validate({**SMALL, "target": "/scratch", "workers": [4, 1], "direct": False})
    gen, *reads = KIND.plan(p, {})
    assert gen.argv[1:4] == ("-m", "harness.engines.data_path", "generate")
    assert "/scratch/<scratch>" in gen.argv and "removed afterwards" in gen.note
    assert [r.argv[r.argv.index("--workers") + 1] for r in reads] == ["1", "4"]  # sorted
    assert all("--direct" in r.argv and r.argv[r.argv.index("--direct") + 1] == "off" for r in reads)
    ds = KIND.plan(DataPathParams.model_validate({"dataset": "/data/imagenet", "workers": [8]}), {})
    assert len(ds) == 1 and "/data/imagenet" in ds[0].argv
    assert ds[0].note == "read with 8 workers for up to 5 s"


def test_generated_set_is_read_from_the_device_and_removed(tmp_path: Path):
    target = tmp_path / "target"
    target.mkdir()
    p = DataPathParams.model_validate({**SMALL, "target": str(target), "required_gbps": 0.001})
    c = ctx(tmp_path / "run")
    out = KIND.run(p, c)
    assert out.problems == ()
    assert scratch_left(target) == []  # the generated set is gone
    bw = {m.labels["workers"]: m.value for m in out.metrics if m.name == "data_path.read_bw"}
    sps = {m.labels["workers"]: m.value for m in out.metrics if m.name == "data_path.samples_per_s"}
    assert set(bw) == set(sps) == {1, 2} and all(v > 0 for v in (*bw.values(), *sps.values()))
    by = {m.name: m for m in out.metrics if "workers" not in m.labels}
    assert by["data_path.required_bw"].value == 0.001
    assert by["data_path.feed_ratio"].value == pytest.approx(max(bw.values()) / 0.001)
    assert by["data_path.saturation_workers"].value in (1, 2)
    units = {m.name: m.unit for m in out.metrics}
    assert units == {"data_path.read_bw": "GB/s", "data_path.samples_per_s": "samples/s",
                     "data_path.saturation_workers": "count", "data_path.required_bw": "GB/s",
                     "data_path.feed_ratio": "ratio"}
    d = out.details
    assert next(iter(d)) == "verdict" and d["verdict"].startswith("storage can feed")
    gen = d["generated"]
    assert gen["removed_afterwards"] is True and gen["files"] == gen["cache_dropped_after_write"] > 0
    assert gen["bytes"] >= 6 * 2**20 and d["files_read"] == gen["files"]
    assert d["io"] == "O_DIRECT" and "bypassed" in d["page_cache"]  # tmp_path is not tmpfs here
    assert d["memory"] == "host memory only (no GPU copy)"
    assert d["required"] == "0.001 GB/s for the node (param required_gbps)"
    assert len(d["sweep"]) == 2 and d["sweep"][0].startswith("1 worker: ")
    assert out.summary.startswith("storage can feed") and "GB/s needed" in out.summary
    names = sorted(p.name for p in c.raw_dir.iterdir())
    assert names == ["01-generate.stderr", "01-generate.stdout", "02-read-1w.stderr", "02-read-1w.stdout",
                     "03-read-2w.stderr", "03-read-2w.stdout"]


def test_buffered_reads_drop_the_page_cache_first(tmp_path: Path):
    p = DataPathParams.model_validate({**SMALL, "target": str(tmp_path), "direct": False, "workers": [2]})
    out = KIND.run(p, ctx(tmp_path / "run", inventory={"gpus": [{"index": 0}]}))
    d = out.details
    if not (importlib.util.find_spec("torch") or importlib.util.find_spec("cupy")):
        assert d["memory"].startswith("host memory only: 1 GPU(s) found but no copy (torch not importable")
    assert d["io"] == "buffered (direct: false)"
    assert f"({d['files_read']} of {d['files_read']} files)" in d["page_cache"]
    assert "posix_fadvise(DONTNEED)" in d["page_cache"]
    assert "one worker count tried (2): saturation unknown" in out.summary
    assert "no required input rate given" in out.summary and d["verdict"].startswith("no feed ratio")
    assert not any(m.name == "data_path.feed_ratio" for m in out.metrics)


def test_an_existing_dataset_is_only_read(tmp_path: Path):
    data = tmp_path / "dataset" / "class0"
    data.mkdir(parents=True)
    for i in range(12):
        (data / f"img{i}.jpg").write_bytes(os.urandom(20_000 + 1000 * i))  # not 4 KiB multiples
    (tmp_path / "dataset" / "empty").write_bytes(b"")
    before = {f: (f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest())
              for f in data.iterdir()}
    p = DataPathParams.model_validate({"dataset": str(tmp_path / "dataset"), "workers": [1],
                                       "step_seconds": 0.3,
                                       "per_gpu_samples_per_s": 1000, "gpus": 2})
    out = KIND.run(p, ctx(tmp_path / "run", hardware={"gpu_input_gbps": 99.0}))
    assert out.problems == ()
    after = {f: (f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest()) for f in data.iterdir()}
    assert after == before and (tmp_path / "dataset" / "empty").exists()
    d = out.details
    assert d["dataset"] == str(tmp_path / "dataset") and "generated" not in d
    assert d["files_read"] == 12  # the empty file is no sample
    assert d["io"] == "O_DIRECT" and out.problems == ()  # sizes off the 4 KiB grid read fine
    sps = next(m for m in out.metrics if m.name == "data_path.samples_per_s")
    need = next(m for m in out.metrics if m.name == "data_path.required_bw")
    mean = sum(20_000 + 1000 * i for i in range(12)) / 12
    assert need.value == pytest.approx(1000 * mean * 2 / 1e9)  # params win over the profile's 99 GB/s
    assert "x 2 GPUs (param gpus)" in d["required"] and sps.value > 0


def test_a_failing_step_errors_and_the_set_is_still_removed(tmp_path: Path):
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed here: the torch backend would not fail")
    p = DataPathParams.model_validate({**SMALL, "target": str(tmp_path), "backend": "torch"})
    with pytest.raises(ToolError, match="data_path: 1 worker: RuntimeError: torch not importable"):
        KIND.run(p, ctx(tmp_path / "run"))
    assert scratch_left(tmp_path) == []


def test_a_target_without_room_is_refused_before_writing(tmp_path: Path):
    p = DataPathParams.model_validate({"target": str(tmp_path), "total_size": "100000T"})
    with pytest.raises(ToolError, match="GB free, the file set needs up to"):
        KIND.run(p, ctx(tmp_path / "run"))
    assert scratch_left(tmp_path) == []
    with pytest.raises(ToolError, match="not an existing directory"):
        KIND.run(DataPathParams(target=str(tmp_path / "nope")), ctx(tmp_path / "run"))


def test_interrupt_keeps_the_finished_steps_and_removes_the_set(tmp_path: Path):
    p = DataPathParams.model_validate({**SMALL, "target": str(tmp_path), "step_seconds": 1.5,
                                       "required_gbps": 0.001})
    c = ctx(tmp_path / "run")
    second = c.raw_dir / "03-read-2w.stdout"

    def interrupt() -> None:  # what the runner's SIGINT handler does, once step 2 is running
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not second.exists():
            time.sleep(0.02)
        time.sleep(0.3)
        proc.kill_all()

    t = threading.Thread(target=interrupt)
    t.start()
    out = KIND.run(p, c)
    t.join()
    assert out.problems == ("2 workers: interrupted; the steps before it are kept",)
    assert [m.labels for m in out.metrics if m.name == "data_path.read_bw"] == [{"workers": 1}]
    assert scratch_left(tmp_path) == []


def test_o_direct_falls_back_where_the_kernel_refuses_it():
    buf = memoryview(mmap.mmap(-1, 4096))
    flags, io = worker.open_flags("auto", "/proc/self/status", buf)  # procfs has no O_DIRECT
    assert flags == os.O_RDONLY and io == "buffered (O_DIRECT refused: Invalid argument)"
    with pytest.raises(RuntimeError, match="set direct: auto or false"):
        worker.open_flags("on", "/proc/self/status", buf)


class _FakeTensor:
    """FAKE torch tensor over a ctypes buffer: only what TorchSink uses."""

    def __init__(self, buf, start: int = 0, stop: int | None = None) -> None:
        self.buf, self.start, self.stop = buf, start, len(buf) if stop is None else stop

    def data_ptr(self) -> int:
        return ctypes.addressof(self.buf) + self.start

    def __getitem__(self, s: slice) -> _FakeTensor:
        return _FakeTensor(self.buf, self.start, self.start + s.stop)

    def copy_(self, src: _FakeTensor, non_blocking: bool = False) -> None:
        n = self.stop - self.start
        ctypes.memmove(self.data_ptr(), src.data_ptr(), n)


def _fake_torch(copies: list[int]) -> types.ModuleType:
    """FAKE PyTorch: two 'GPUs' whose memory is host memory, so the copies can be checked."""
    t = types.ModuleType("torch")
    t.uint8 = "uint8"
    t.device = lambda kind, index: (kind, index)

    def empty(size, dtype, pin_memory=False, device=None):
        if device is not None:
            copies.append(device[1])
        return _FakeTensor((ctypes.c_ubyte * size)())

    class Stream:
        def __init__(self, device):
            self.device = device

        def synchronize(self):
            pass

    class _Ctx:
        def __init__(self, s):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    t.empty = empty
    t.cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 2, Stream=Stream,
                                   stream=_Ctx)
    return t


def test_torch_sink_reads_into_pinned_memory_and_copies_to_each_workers_gpu(tmp_path, monkeypatch):
    placed: list[int] = []
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(placed))
    files = []
    for i in range(6):
        f = tmp_path / f"s{i}"
        f.write_bytes(bytes([i]) * (8192 * (i + 1)))
        files.append((str(f), f.stat().st_size))
    be, note = worker.sink("auto")
    assert (be.name, be.devices(), note) == ("torch", [0, 1], "")
    slots = [be.slot(w, 8192) for w in range(3)]
    assert placed == [0, 1, 0]  # workers round-robin over the GPUs
    tallies, _, complete = worker.read_pass(files, slots, os.O_RDONLY, 30)
    assert complete and sum(t.samples for t in tallies) == 6 and not any(t.errors for t in tallies)
    assert sum(t.bytes for t in tallies) == sum(s for _, s in files)
    for slot in slots:  # the 'GPU' copy holds what the pinned buffer last received
        gpu = slot.keep[1]
        assert bytes(gpu.buf) == bytes(slot.view)


def _fake_cupy(devices: list[int]) -> types.ModuleType:
    """FAKE CuPy: pinned and device memory are host ctypes buffers; the copy is a memmove."""
    cp = types.ModuleType("cupy")

    class Pinned:
        def __init__(self, size):
            self.buf = (ctypes.c_ubyte * size)()
            self.ptr = ctypes.addressof(self.buf)

    class DeviceMem(Pinned):
        def copy_from_host_async(self, src, size, stream=None):
            ctypes.memmove(self.ptr, src.value, size)

    class Device:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            devices.append(self.index)
            return self

        def __exit__(self, *a):
            return False

    class Stream:
        def __init__(self, non_blocking=False):
            pass

        def synchronize(self):
            pass

    cp.cuda = types.SimpleNamespace(alloc_pinned_memory=Pinned, alloc=DeviceMem, Device=Device, Stream=Stream,
                                    runtime=types.SimpleNamespace(getDeviceCount=lambda: 4))
    return cp


def test_cupy_sink_copies_what_each_read_brought(tmp_path, monkeypatch):
    used: list[int] = []
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(used))
    f = tmp_path / "one"
    f.write_bytes(b"\x07" * 4096 + b"\x09" * 4096)
    be, note = worker.sink("auto")
    assert (be.name, be.devices(), note) == ("cupy", [0, 1, 2, 3], "")  # torch missing: CuPy next
    slot = be.slot(5, 4096)  # worker 5 of 4 GPUs -> GPU 1
    tallies, _, complete = worker.read_pass([(str(f), 8192)], [slot], os.O_RDONLY, 30)
    assert complete and tallies[0].bytes == 8192 and set(used) == {1}
    assert bytes(slot.keep[1].buf) == b"\x09" * 4096  # the GPU holds the second read


def test_auto_sink_is_host_memory_without_a_gpu_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import fails
    monkeypatch.setitem(sys.modules, "cupy", None)
    be, note = worker.sink("auto")
    assert be.name == "host" and "torch not importable" in note and "cupy not importable" in note
    with pytest.raises(RuntimeError, match="cupy not importable"):
        worker.sink("cupy")


# ---------------------------------------------------------------- through the real CLI

SUITE = """\
name: data
checks:
  - id: feeds
    kind: data_path
    params: {total_size: 4M, record_size: 64k, record_max: 256k, workers: [1, 2], step_seconds: 0.3,
             target: TARGET}
  - id: starved
    kind: data_path
    params: {total_size: 4M, record_size: 64k, record_max: 256k, workers: [2], step_seconds: 0.3,
             target: TARGET, required_gbps: 100000}
"""

PROFILE = """\
name: tiny-gpus
hardware:
  gpu_input_gbps: 0.0001
expectations:
  - {metric: data_path.feed_ratio, min: 1, unit: ratio}
"""


def test_cli_run_judges_the_feed_ratio_and_reports_it_in_words(tmp_path: Path):
    target = tmp_path / "scratch"
    target.mkdir()
    suite = write(tmp_path / "data.yaml", SUITE.replace("TARGET", str(target)))
    profile = write(tmp_path / "p.yaml", PROFILE)
    out = tmp_path / "reports"
    r = harness("run", str(suite), "--profile", str(profile), "--output", str(out))
    assert r.returncode == 1, r.stdout + r.stderr
    (run_dir,) = run_dirs(out)
    checks = {c["id"]: c for c in results(run_dir)["checks"]}
    feeds, starved = checks["feeds"], checks["starved"]
    assert feeds["status"] == "passed" and feeds["message"].startswith("storage can feed")
    assert "x 1 GPU (none found, 1 assumed)" in feeds["details"]["required"]
    assert starved["status"] == "failed" and starved["message"].startswith("I/O-bound: feeds ")
    (ev,) = starved["evaluations"]
    assert ev["metric"] == "data_path.feed_ratio" and ev["outcome"] == "fail" and ev["measured"] < 1
    html = (run_dir / "report.html").read_text()
    assert "storage can feed" in html and "I/O-bound: feeds" in html
    assert "samples/s" in html
    assert scratch_left(target) == []


def _workers_of(target: Path) -> list[int]:
    """Live data_path workers reading under `target`."""
    return sorted(set(procs_with("harness.engines.data_path")) & set(procs_with(str(target))))


def test_ctrl_c_mid_step_leaves_results_and_no_files_or_workers(tmp_path: Path):
    target = tmp_path / "scratch"
    target.mkdir()
    suite = write(tmp_path / "s.yaml", "name: s\nchecks:\n  - id: dp\n    kind: data_path\n    params: "
                  f"{{total_size: 4M, workers: [1], step_seconds: 60, target: {target}}}\n")
    out = tmp_path / "reports"
    p = start("run", str(suite), "--profile", "generic", "--output", str(out))
    try:
        wait_for(lambda: out.exists() and run_dirs(out)
                 and any(run_dirs(out)[0].glob("raw/dp/*read-1w.stdout")), 60, "the read step", step=0.1)
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGINT)
        stdout, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, stdout + stderr
    (run_dir,) = run_dirs(out)
    (check,) = results(run_dir)["checks"]
    assert (check["status"], check["message"]) == ("not_run", "interrupted by SIGINT while running")
    assert (run_dir / "report.html").exists()
    assert scratch_left(target) == []
    assert _workers_of(target) == []
