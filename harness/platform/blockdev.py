"""The data-loss guard: decide whether a block device is safe to overwrite. Never writes.

`claim` opens the device exclusively (O_EXCL: from then on nothing can mount it, mkfs it or
add it to RAID/LVM), collects every reason to refuse (mounted, swap, partitions, holders,
signatures at offset 0 and past it, GPT headers anywhere, overlapping loop devices, loop
devices it backs, other writers, busy, unprobeable) and raises GuardRefusal naming them;
otherwise it keeps the claim until the block ends, so the write runs under it (fio opens
without O_EXCL, which the claim allows).
When in doubt it refuses: a missing probe tool or a device it cannot open is never blank.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from harness.errors import GuardRefusal, ToolMissing
from harness.platform import blockscan, proc

PROBE_TIMEOUT_S = 30.0
SYS_DEV_BLOCK = Path("/sys/dev/block")


def is_block_device(path: str | Path) -> bool:
    """True when `path` (symlinks followed) is a block special file."""
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def resolve(path: str | Path) -> Path:
    """The real path behind any symlinks (e.g. /dev/disk/by-id/... -> /dev/nvme0n1)."""
    return Path(os.path.realpath(path))


def check_writable(device: str | Path) -> None:
    """Raise GuardRefusal unless `device` is an unused block device without any signature."""
    with claim(device):
        pass


@contextmanager
def claim(device: str | Path) -> Iterator[Path]:
    """Hold `device` exclusively while the block runs; GuardRefusal unless it is safe to write.

    Yields the resolved device path."""
    given = str(device)
    dev = resolve(device)
    shown = str(dev) if str(dev) == given else f"{dev} (from {given})"

    def refuse(reasons: list[str]) -> GuardRefusal:
        return GuardRefusal(f"refusing to write to {shown}: " + "; ".join(reasons))

    if not dev.exists():
        raise refuse(["it does not exist"])
    if not is_block_device(dev):
        raise refuse(["not a block device"])
    fd, reasons = _exclusive_open(dev)  # first: nothing can claim it while we look
    try:
        sysdir = _sysfs_dir(dev)
        family = _family(dev, sysdir)  # the device and its partitions: path -> "major:minor"
        reasons += _mounts(family)
        reasons += _swaps(family)
        reasons += _partitions_and_holders(sysdir)
        reasons += blockscan.loop_overlaps(sysdir)
        reasons += blockscan.backed_loops(set(family.values()))
        reasons += blockscan.writers(set(family.values()))
        reasons += _lsblk(dev)
        found_by_blkid, blkid_reasons = _blkid(dev)
        reasons += blkid_reasons
        reasons += _wipefs(dev, skip_types=found_by_blkid)
        if fd is not None and sysdir is not None:
            reasons += blockscan.offset_signatures(dev, _size(sysdir), _block(sysdir), _tool)
        if reasons:
            raise refuse(list(dict.fromkeys(reasons)))
        yield dev
    finally:
        if fd is not None:
            os.close(fd)


def _size(sysdir: Path) -> int:
    sectors = _read(sysdir / "size")
    return int(sectors) * 512 if sectors and sectors.isdigit() else 0


def _block(sysdir: Path) -> int:
    value = _read(sysdir / "queue" / "logical_block_size")
    return int(value) if value and value.isdigit() else 512


def describe(device: str | Path) -> dict[str, Any]:
    """Facts for the report: path, size, model, vendor, serial, rotational, loop backing file."""
    dev = resolve(device)
    out: dict[str, Any] = {"path": str(dev)}
    if str(dev) != str(device):
        out["given"] = str(device)
    sysdir = _sysfs_dir(dev) if is_block_device(dev) else None
    if sysdir is None:
        return out
    sectors = _read(sysdir / "size")
    if sectors is not None and sectors.isdigit():
        out["size_bytes"] = int(sectors) * 512  # sysfs size is always in 512-byte units
    for key, rel in (("model", "device/model"), ("vendor", "device/vendor"),
                     ("serial", "device/serial"), ("rotational", "queue/rotational"),
                     ("logical_block_size", "queue/logical_block_size"),
                     ("read_only", "ro"), ("loop_backing_file", "loop/backing_file")):
        value = _read(sysdir / rel)
        if value:
            out[key] = int(value) if value.isdigit() else value
    return out


# --- probes: each returns the reasons it found to refuse --------------------------------------

def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _sysfs_dir(dev: Path) -> Optional[Path]:
    """/sys/class/block/<name> of a device node, found by its major:minor."""
    rdev = os.stat(dev).st_rdev
    path = SYS_DEV_BLOCK / f"{os.major(rdev)}:{os.minor(rdev)}"
    return Path(os.path.realpath(path)) if path.exists() else None


def _partition_dirs(sysdir: Optional[Path]) -> list[Path]:
    if sysdir is None:
        return []
    try:
        return sorted(p for p in sysdir.iterdir() if (p / "partition").is_file())
    except OSError:
        return []


def _family(dev: Path, sysdir: Optional[Path]) -> dict[str, str]:
    rdev = os.stat(dev).st_rdev
    fam = {str(dev): f"{os.major(rdev)}:{os.minor(rdev)}"}
    for part in _partition_dirs(sysdir):
        num = _read(part / "dev")
        if num:
            fam[f"/dev/{part.name}"] = num
    return fam


def _mounts(family: dict[str, str]) -> list[str]:
    """Mount points of the device or its partitions, from /proc/self/mountinfo."""
    numbers = {v: k for k, v in family.items()}
    found: list[str] = []
    text = _read(Path("/proc/self/mountinfo"))
    if text is None:
        return ["cannot be probed: /proc/self/mountinfo unreadable"]
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or " - " not in line:
            continue
        source = line.split(" - ", 1)[1].split()[1:2]
        src_path = os.path.realpath(source[0]) if source and source[0].startswith("/") else ""
        who = numbers.get(fields[2]) or (src_path if src_path in family else None)
        if who:
            found.append(f"{who} is mounted at {_unescape(fields[4])}")
    return found


def _unescape(path: str) -> str:
    return path.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _swaps(family: dict[str, str]) -> list[str]:
    text = _read(Path("/proc/swaps"))
    if text is None:
        return []
    found = []
    for line in text.splitlines()[1:]:
        name = _unescape(line.split()[0]) if line.split() else ""
        if name and (os.path.realpath(name) in family
                     or (is_block_device(name) and _number(name) in family.values())):
            found.append(f"{name} is in use as swap")
    return found


def _number(path: str) -> str:
    rdev = os.stat(path).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


def _partitions_and_holders(sysdir: Optional[Path]) -> list[str]:
    if sysdir is None:
        return ["cannot be probed: no sysfs entry under /sys/dev/block"]
    parts = _partition_dirs(sysdir)
    found = [f"it has partition {p.name}" for p in parts]
    for d in (sysdir, *parts):
        try:
            holders = sorted(h.name for h in (d / "holders").iterdir())
        except OSError:
            holders = []
        found += [f"{d.name} is held by {h} (LVM, RAID or device-mapper)" for h in holders]
    return found


def _tool(argv: list[str]) -> tuple[int, str, str]:
    """Run a read-only probe tool: (rc, stdout, stderr); ToolMissing when it is absent."""
    return proc.capture_rc(argv, timeout=PROBE_TIMEOUT_S)


def _lsblk(dev: Path) -> list[str]:
    """Partitions, holders (dm/LVM/RAID) and mount points as lsblk sees them."""
    try:
        rc, out, err = _tool(["lsblk", "-J", "-o", "NAME,PATH,TYPE,MOUNTPOINTS", str(dev)])
        if rc != 0:  # util-linux < 2.37 has no MOUNTPOINTS column
            rc, out, err = _tool(["lsblk", "-J", "-o", "NAME,PATH,TYPE,MOUNTPOINT", str(dev)])
    except ToolMissing as e:
        return [f"cannot be probed: {e}"]
    if rc != 0:
        return [f"cannot be probed: lsblk exit {rc}: {_first(err)}"]
    try:
        tree = json.loads(out)["blockdevices"]
    except (ValueError, KeyError, TypeError):
        return ["cannot be probed: lsblk printed no JSON"]
    found: list[str] = []
    for node in tree:
        _walk(node, found, top=True)
    return found


def _walk(node: dict[str, Any], found: list[str], top: bool) -> None:
    name = node.get("path") or node.get("name")
    points = node.get("mountpoints") or [node.get("mountpoint")]
    for mp in points:
        if mp == "[SWAP]":
            found.append(f"{name} is in use as swap")
        elif mp:
            found.append(f"{name} is mounted at {mp}")
    if not top and node.get("type") == "part":
        found.append(f"it has partition {node.get('name')}")
    elif not top:
        found.append(f"it is held by {node.get('name')} ({node.get('type')})")
    for child in node.get("children") or []:
        _walk(child, found, top=False)


def _exclusive_open(dev: Path) -> tuple[int | None, list[str]]:
    """Open O_RDONLY|O_EXCL and keep it: EBUSY means a mount, swap or holder claims it."""
    try:
        return os.open(dev, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC), []
    except OSError as e:
        if e.errno == errno.EBUSY:
            return None, ["it is in use (exclusive open: device or resource busy)"]
        if e.errno in (errno.EACCES, errno.EPERM):
            return None, ["cannot be probed: permission denied"]
        return None, [f"cannot be probed: open failed: {e.strerror}"]


def _blkid(dev: Path) -> tuple[set[str], list[str]]:
    """Low-level signature probe: exit 0 found, 2 nothing (with silent stderr), else unknown.

    Returns the signature types found and the reasons to refuse.
    """
    try:
        rc, out, err = _tool(["blkid", "-p", "-o", "export", str(dev)])
    except ToolMissing as e:
        return set(), [f"cannot be probed: {e}"]
    if rc == 2 and not err.strip():
        return set(), []
    if rc == 0:
        tags = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        types = {tags[k] for k in ("TYPE", "PTTYPE") if tags.get(k)}
        reasons = []
        if tags.get("TYPE"):
            reasons.append(f"{tags['TYPE']} signature found ({tags.get('USAGE') or 'blkid -p'})")
        if tags.get("PTTYPE"):
            reasons.append(f"{tags['PTTYPE']} signature found (partition table)")
        return types, reasons or ["unknown signature found (blkid -p)"]
    if rc == 8:
        return set(), ["ambivalent signatures found (blkid -p: several conflicting ones)"]
    return set(), [f"cannot be probed: blkid -p exit {rc}: {_first(err) or 'no reason given'}"]


def _wipefs(dev: Path, skip_types: set[str]) -> list[str]:
    """Signatures wipefs would erase (it lists every one; blkid -p names one per kind)."""
    try:
        rc, out, err = _tool(["wipefs", "-n", "-J", str(dev)])
    except ToolMissing as e:
        return [f"cannot be probed: {e}"]
    if rc != 0:
        return [f"cannot be probed: wipefs exit {rc}: {_first(err) or 'no reason given'}"]
    if not out.strip():
        return []
    try:
        sigs = json.loads(out).get("signatures") or []
    except (ValueError, AttributeError):
        return ["cannot be probed: wipefs printed no JSON"]
    return [f"{s.get('type', 'unknown')} signature found (wipefs, offset {s.get('offset', '?')})"
            for s in sigs if isinstance(s, dict) and s.get("type") not in skip_types]


def _first(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:200] if lines else ""
