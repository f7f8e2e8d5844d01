#!/usr/bin/env bash
# Install what the harness needs on a fresh Debian/Ubuntu machine (as root), into ./.venv.
#   scripts/setup.sh          runtime: fio, util-linux, ethtool, stress-ng, Python venv with the package
#   scripts/setup.sh --test   also what the tests need: chromium, e2fsprogs, iperf3, stress-ng, Slurm +
#                             munge, prometheus-pushgateway, prometheus, pipx, test extras (with pandas
#                             and pyarrow)
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=0; [ "${1:-}" = "--test" ] && want_test=1

pkgs=(fio util-linux python3 python3-venv python3-pip)
# the nic_ports check reads NIC error counters with `ethtool -S` (its tests run the real one)
pkgs+=(ethtool)
# the power_headroom check loads CPUs and memory with stress-ng during its full-system load
pkgs+=(stress-ng)
[ $want_test = 1 ] && pkgs+=(chromium e2fsprogs fdisk iperf3 stress-ng poppler-utils)  # poppler: pdftoppm, pdftotext
# the data-loss guard's tests plant XFS and LVM headers past offset 0 on loop devices
[ $want_test = 1 ] && pkgs+=(xfsprogs lvm2)
# ... and make GPTs with sgdisk (partitions at 17 KiB, the backup table of a disk that grew)
[ $want_test = 1 ] && pkgs+=(gdisk)
# the storage tests run the real nvme-cli and smartctl (their errors on a node without NVMe)
[ $want_test = 1 ] && pkgs+=(nvme-cli smartmontools)
# the port-health tests run the real ibstat (its answer on a node without HCAs)
[ $want_test = 1 ] && pkgs+=(infiniband-diags)
# the rdma tests run the real perftest binaries (their errors on a node without HCAs) and the audit
# reads the rdma-core version
[ $want_test = 1 ] && pkgs+=(perftest rdma-core)
# the fleet tests start a real Slurm lab (scripts/slurm-up.sh) and a real Pushgateway themselves
[ $want_test = 1 ] && pkgs+=(slurmctld slurmd slurm-client munge prometheus-pushgateway)
# the monitoring test starts a real Prometheus (and its promtool) against monitoring/ (tests/report/test_monitoring.py)
[ $want_test = 1 ] && pkgs+=(prometheus)
# the packaging test installs the wheel with pipx as well as into a fresh venv
[ $want_test = 1 ] && pkgs+=(pipx)
# node power and PSU state come from the BMC through ipmitool (harness/platform/bmc.py); the BMC
# tests run it against OpenIPMI's ipmi_sim with a DCMI module built by gcc (tests/support/bmcsim.py) and
# Redfish against a local HTTPS server with an openssl certificate
pkgs+=(ipmitool)
[ $want_test = 1 ] && pkgs+=(openipmi gcc libopenipmi-dev openssl)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "setup: missing Debian packages ${missing[*]}; run as root" >&2; exit 1; fi
  echo "setup: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extra=""; [ $want_test = 1 ] && extra="[test]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extra}"
# A wheel install compiles the package; an editable one leaves that to the first import, and
# where PYTHONDONTWRITEBYTECODE is set no import keeps it: ~0.1 s of every harness start.
.venv/bin/python -m compileall -q harness
echo "setup: ok ($(.venv/bin/harness --version))"
