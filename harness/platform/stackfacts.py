"""Read the GPU, library and RDMA facts: nvidia-smi -q -x, PCI, ldconfig -p, /sys/class/infiniband.

Without a GPU every GPU fact is None with the reason (NVML's own when nvidia-smi is absent);
without RDMA devices every per-HCA fact is None with "no RDMA devices".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ToolMissing
from harness.facts import ABSENT, FACTS, Fact
from harness.parsers import libs as lp
from harness.parsers.base import last_line
from harness.parsers.hostfacts import running
from harness.parsers.ibports import hcas as devinfo_hcas
from harness.parsers.ibports import parse_ofed_info
from harness.parsers.nvsmi import SmiLog, parse_smi_xml
from harness.platform.sysfs import SYS, read

Tool = Callable[[Sequence[str]], "tuple[int, str, str]"]  # argv -> (exit code, stdout, stderr)
NVIDIA = "0x10de"
NVSWITCH_CLASS = "0x0680"  # PCI class "bridge: other", as NVSwitch chips show
GPU_FACTS = [n for n, s in FACTS.items() if s.needs in ("gpu", "nvswitch")]
LIBRARIES = (("lib.cuda_runtime", "libcudart", "cudart"), ("lib.cudnn", "libcudnn", "cudnn"),
             ("lib.nccl", "libnccl", "nccl"))

# Run in a child Python so that a broken library cannot take the harness down with it.
_PROBE = """import ctypes, sys
kind, path = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(path)
if kind == "cudnn":
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    print(lib.cudnnGetVersion())
else:
    v = ctypes.c_int()
    fn = lib.cudaRuntimeGetVersion if kind == "cudart" else lib.ncclGetVersion
    print(v.value if fn(ctypes.byref(v)) == 0 else -1)
"""


def _last_line(text: str) -> str:
    return last_line(text, 200)


# ---------------------------------------------------------------- GPU

def nvswitch_count() -> int:
    """NVIDIA PCI functions of class 0x0680 (NVSwitch)."""
    n = 0
    for dev in (SYS / "bus/pci/devices").glob("*"):
        if (read(dev / "vendor") or "").strip() == NVIDIA and \
                (read(dev / "class") or "").strip().startswith(NVSWITCH_CLASS):
            n += 1
    return n


def _smi(tool: Tool, inventory: Mapping[str, Any]) -> tuple[SmiLog | None, str]:
    """nvidia-smi -q -x parsed, or None and why not."""
    nvml = inventory.get("nvml", {}) if isinstance(inventory.get("nvml"), Mapping) else {}
    try:
        rc, out, err = tool(["nvidia-smi", "-q", "-x"])
    except ToolMissing:
        if nvml.get("reason"):
            return None, f"no NVIDIA GPU: {nvml['reason']}"
        return None, "nvidia-smi not found"
    if rc != 0:
        return None, f"nvidia-smi -q -x failed (exit {rc}): {_last_line(err or out)}"
    try:
        log = parse_smi_xml(out)
    except ValueError as e:
        return None, f"nvidia-smi -q -x output unreadable: {e}"
    if not log.gpus:
        return None, "nvidia-smi lists no GPU"
    return log, ""


def gpu_facts(tool: Tool, inventory: Mapping[str, Any], names: Sequence[str]) -> Iterator[Fact]:
    log, why = _smi(tool, inventory)
    src = "nvidia-smi -q -x"
    if log is None:
        gpus = [g for g in inventory.get("gpus", []) if isinstance(g, Mapping)]
        if gpus:  # NVML saw GPUs but nvidia-smi is unusable: what NVML told the inventory
            yield from _from_inventory(inventory, gpus, why)
        else:
            for name in GPU_FACTS:
                yield Fact(name, None, src, reason=why)
            return
    else:
        yield Fact("gpu.driver_version", log.driver_version, src,
                   reason="" if log.driver_version else "not in nvidia-smi output")
        yield Fact("gpu.cuda_driver_version", log.cuda_version, src,
                   reason="" if log.cuda_version else "not in nvidia-smi output")
        for g in log.gpus:
            labels = {"gpu": str(g.index)}
            s = f"{src} ({g.pci_bus_id})"
            for name, value in (("persistence_mode", g.persistence_mode), ("mig_mode", g.mig_mode),
                                ("ecc_mode", g.ecc_mode), ("vbios_version", g.vbios_version),
                                ("fabric_state", g.fabric_state)):
                yield Fact(f"gpu.{name}", value, s, labels,
                           reason="" if value is not None else "not reported by this driver or GPU")
    switches = nvswitch_count()
    yield Fact("gpu.nvswitch_count", switches, "/sys/bus/pci/devices/*/{vendor,class}")
    if switches:
        yield Fact("gpu.fabricmanager_running", running(names, "nv-fabricmanager"), "/proc/*/comm")
    else:
        yield Fact("gpu.fabricmanager_running", None, "/sys/bus/pci/devices",
                   reason="no NVSwitch on PCI: fabric manager not needed")
    mods = [m for m in ("nvidia_peermem", "nv_peer_mem") if (SYS / "module" / m).is_dir()]
    yield Fact("gpu.peermem_loaded", bool(mods), "/sys/module/" + (mods[0] if mods else "nvidia_peermem"))


def _from_inventory(inv: Mapping[str, Any], gpus: Sequence[Mapping[str, Any]], why: str) -> Iterator[Fact]:
    sw = inv.get("software", {}) if isinstance(inv.get("software"), Mapping) else {}
    for name, key in (("gpu.driver_version", "nvidia_driver"), ("gpu.cuda_driver_version", "cuda_driver")):
        yield Fact(name, sw.get(key), "NVML", reason="" if sw.get(key) else "NVML did not say")
    for i, g in enumerate(gpus):
        labels = {"gpu": str(g.get("index", i))}
        yield Fact("gpu.vbios_version", g.get("vbios"), "NVML", labels,
                   reason="" if g.get("vbios") else "NVML did not say")
        for name in ("persistence_mode", "mig_mode", "ecc_mode", "fabric_state"):
            yield Fact(f"gpu.{name}", None, "nvidia-smi -q -x", labels, reason=why)


# ---------------------------------------------------------------- libraries

def ld_entries(tool: Tool) -> list[lp.LdEntry]:
    """The dynamic linker cache (`ldconfig -p`), or [] when ldconfig is absent."""
    for exe in ("ldconfig", "/sbin/ldconfig"):
        try:
            rc, out, _ = tool([exe, "-p"])
        except ToolMissing:
            continue
        return lp.parse_ldconfig(out) if rc == 0 else []
    return []


def _candidates(entries: list[lp.LdEntry], stem: str, env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(path, how found) of a library: LD_LIBRARY_PATH first, as the loader does, then the cache."""
    out: list[tuple[str, str]] = []
    for d in filter(None, env.get("LD_LIBRARY_PATH", "").split(":")):
        out += [(str(p), "LD_LIBRARY_PATH") for p in sorted(Path(d).glob(f"{stem}.so.*"))]
    found = lp.find(entries, stem)
    wide = [e for e in found if "64" in e.flags] or found
    return out + [(e.path, "ldconfig -p") for e in wide]


def lib_facts(tool: Tool, entries: list[lp.LdEntry], env: Mapping[str, str]) -> Iterator[Fact]:
    for name, stem, kind in LIBRARIES:
        cands = _candidates(entries, stem, env)
        if not cands:
            yield Fact(name, ABSENT, f"ldconfig -p, LD_LIBRARY_PATH: no {stem}.so")
            continue
        path, how = cands[0]
        real = os.path.realpath(path)
        version = lp.version_from_filename(os.path.basename(real))
        if version and "." in version:
            yield Fact(name, version, f"{how}: {real}")
            continue
        yield _symbol_version(tool, name, kind, real, how, version)


def _symbol_version(tool: Tool, name: str, kind: str, path: str, how: str, soname_major: str | None) -> Fact:
    fn = {"cudart": "cudaRuntimeGetVersion", "nccl": "ncclGetVersion", "cudnn": "cudnnGetVersion"}[kind]
    src = f"{how}: {path}, {fn}()"
    try:
        rc, out, err = tool([sys.executable, "-c", _PROBE, kind, path])
    except ToolMissing as e:
        return Fact(name, soname_major, src, reason="" if soname_major else str(e))
    code = out.strip().splitlines()[-1] if out.strip() else ""
    if rc != 0 or not code.lstrip("-").isdigit() or int(code) < 0:
        why = f"{fn}() failed: {_last_line(err or out) or f'exit {rc}'}"
        return Fact(name, soname_major, f"{src} failed; soname", reason="" if soname_major else why)
    return Fact(name, lp.decode_version(kind, int(code)), src)


# ---------------------------------------------------------------- RDMA

def rdma_facts(tool: Tool, entries: list[lp.LdEntry]) -> Iterator[Fact]:
    verbs = [e for e in lp.find(entries, "libibverbs") if "64" in e.flags] or lp.find(entries, "libibverbs")
    if verbs:
        real = os.path.realpath(verbs[0].path)
        v = lp.rdma_core_version(os.path.basename(real))
        yield Fact("net.rdma_core_version", v, f"ldconfig -p: {real}",
                   reason="" if v else "libibverbs file name carries no rdma-core version")
    else:
        yield Fact("net.rdma_core_version", ABSENT, "ldconfig -p: no libibverbs.so")
    try:
        rc, out, err = tool(["ofed_info", "-s"])
        ofed = parse_ofed_info(out) if rc == 0 else None
        yield Fact("net.ofed_version", ofed, "ofed_info -s",
                   reason="" if ofed else f"ofed_info -s: {_last_line(err or out) or 'no version'}")
    except ToolMissing:
        yield Fact("net.ofed_version", ABSENT, "ofed_info not installed (inbox rdma-core)")
    yield from _hca_facts(tool)


def _hca_facts(tool: Tool) -> Iterator[Fact]:
    root = SYS / "class/infiniband"
    hcas = sorted(p.name for p in root.glob("*")) if root.is_dir() else []
    if not hcas:
        for name in ("net.hca_fw_version", "net.hca_netdevs"):
            yield Fact(name, None, str(root), reason="no RDMA devices")
        return
    fw: dict[str, str | None] = {}
    src = "ibv_devinfo"
    try:
        rc, out, _ = tool(["ibv_devinfo"])
        if rc == 0:
            fw = {h.name: h.fw_ver for h in devinfo_hcas(out)}
    except ToolMissing:
        pass
    for hca in hcas:
        labels = {"hca": hca}
        if hca in fw:
            yield Fact("net.hca_fw_version", fw[hca], src, labels, reason="" if fw[hca] else "no fw_ver")
        else:
            v = (read(root / hca / "fw_ver") or "").strip() or None
            yield Fact("net.hca_fw_version", v, f"{root / hca / 'fw_ver'}", labels,
                       reason="" if v else "fw_ver not readable")
        nets = sorted(p.name for p in (root / hca / "device/net").glob("*"))
        yield Fact("net.hca_netdevs", ",".join(nets) or "none", f"{root / hca}/device/net", labels)
