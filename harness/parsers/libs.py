"""Pure parsers for the library facts: `ldconfig -p`, versions in library file names, and the
integer version codes the libraries' own version functions return."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRY = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)(?:\s*,\s*OS ABI:[^=]*)?\s*=>\s*(\S+)\s*$")


@dataclass(frozen=True)
class LdEntry:
    """One line of `ldconfig -p`: soname, flags ('libc6,x86-64') and path."""

    soname: str
    flags: str
    path: str


def parse_ldconfig(text: str) -> list[LdEntry]:
    """The entries of `ldconfig -p`, in its order (the header line is skipped)."""
    out = []
    for line in text.splitlines():
        m = _ENTRY.match(line)
        if m:
            out.append(LdEntry(m.group(1), m.group(2), m.group(3)))
    return out


def find(entries: list[LdEntry], stem: str) -> list[LdEntry]:
    """Entries of one library ('libnccl' matches libnccl.so.2, not libnccl-net.so)."""
    return [e for e in entries if e.soname == f"{stem}.so" or e.soname.startswith(f"{stem}.so.")]


def version_from_filename(name: str) -> str | None:
    """'libnccl.so.2.21.5' -> '2.21.5'; 'libcudart.so.12' -> '12'; 'libfoo.so' -> None."""
    _, sep, tail = name.rpartition(".so.")
    if not sep or not re.fullmatch(r"\d+(\.\d+)*", tail):
        return None
    return tail


def rdma_core_version(libibverbs_file: str) -> str | None:
    """rdma-core names libibverbs 'libibverbs.so.1.<abi>.<rdma-core version>': 1.14.44.0 -> '44.0'."""
    v = version_from_filename(libibverbs_file)
    parts = v.split(".") if v else []
    return ".".join(parts[2:]) if len(parts) >= 4 else None


def decode_version(library: str, code: int) -> str:
    """The integer a library's version function returns, as text.

    cudaRuntimeGetVersion: 1000*major + 10*minor (12040 -> 12.4);
    ncclGetVersion: 10000*major + 100*minor + patch since 2.9 (22105 -> 2.21.5), else 1000*major+...;
    cudnnGetVersion: 10000*major + 100*minor + patch since 9 (90100 -> 9.1.0), else 1000*major + ...
    """
    if library == "cudart":
        return f"{code // 1000}.{(code % 1000) // 10}"
    if library in ("nccl", "cudnn"):
        big = 10000 if code >= (20900 if library == "nccl" else 90000) else 1000
        return f"{code // big}.{(code % big) // 100}.{code % 100}"
    raise ValueError(f"unknown library {library!r}")
