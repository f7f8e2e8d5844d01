"""Pure parsers for the RDMA facts: `ibv_devinfo` and `ofed_info -s`."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Hca:
    """One hca_id block of ibv_devinfo."""

    name: str
    fw_ver: str | None
    board_id: str | None
    vendor_part_id: str | None
    ports: tuple[tuple[int, str, str], ...]  # (port, state, link_layer)


def parse_ibv_devinfo(text: str) -> list[Hca]:
    """Every hca_id block, sorted by device name (ibv_devinfo lists them in any order)."""
    out = []
    for block in re.split(r"(?m)^hca_id:\s*", text)[1:]:
        lines = block.splitlines()
        name = lines[0].strip()
        kv: dict[str, str] = {}
        ports: list[list[str]] = []
        for ln in lines[1:]:
            key, sep, value = ln.strip().partition(":")
            if not sep:
                continue
            key, value = key.strip(), value.strip()
            if key == "port":
                ports.append([value, "", ""])
            elif ports and key == "state":
                ports[-1][1] = value.split(" (")[0]
            elif ports and key == "link_layer":
                ports[-1][2] = value
            elif not ports:
                kv[key] = value
        out.append(Hca(name, kv.get("fw_ver"), kv.get("board_id"), kv.get("vendor_part_id"),
                       tuple((int(p), st, ll) for p, st, ll in ports)))
    return sorted(out, key=lambda h: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", h.name)])


def parse_ofed_info(text: str) -> str | None:
    """`ofed_info -s` ('MLNX_OFED_LINUX-23.10-1.1.9.0:') -> '23.10-1.1.9.0'."""
    m = re.search(r"OFED(?:_LINUX|-internal)?-([0-9][\w.\-]*?):?\s*$", text.strip())
    return m.group(1) if m else None
