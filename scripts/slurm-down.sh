#!/usr/bin/env bash
# Stop the lab cluster that scripts/slurm-up.sh started (idempotent). Only processes named by this
# lab's own pid files are signalled, plus the job step processes `scontrol listpids` reports for
# this lab's nodes; jobs are cancelled first so nothing is left running.
#
#   SLURM_LAB=/tmp/harness-slurm   the lab directory (as for slurm-up.sh)
#   slurm-down.sh                  stop the daemons, keep $SLURM_LAB (config, state, logs)
#   slurm-down.sh --purge          also delete $SLURM_LAB
set -uo pipefail
LAB=${SLURM_LAB:-/tmp/harness-slurm}
export SLURM_CONF=$LAB/etc/slurm.conf
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
stop_pidfile() {  # TERM, wait up to 10 s, then KILL
  local f=$1 p
  alive "$f" || { rm -f "$f"; return 0; }
  p=$(cat "$f"); kill "$p" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
  rm -f "$f"; echo "stopped $(basename "$f" .pid) ($p)"
}
if [ -f "$SLURM_CONF" ] && alive "$LAB/run/slurmctld.pid"; then
  # 1. cancel this cluster's jobs (scontrol shutdown would leave their processes running)
  ids=$(squeue -h -t PD,R,CG,S -o %A 2>/dev/null | tr '\n' ' ')
  if [ -n "${ids// /}" ]; then
    # shellcheck disable=SC2086  # one id per word
    scancel --quiet $ids 2>/dev/null
    for _ in $(seq 150); do [ -z "$(squeue -h -t PD,R,CG,S 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  stepd=$(for n in $(sinfo -h -N -o %N 2>/dev/null | sort -u); do
            SLURMD_NODENAME=$n scontrol listpids 2>/dev/null | awk 'NR>1 && $1 ~ /^[0-9]+$/ {print $1}'; done)
  # 2. ask the controller to stop itself and every slurmd
  scontrol shutdown 2>/dev/null
  for _ in $(seq 100); do alive "$LAB/run/slurmctld.pid" || break; sleep 0.1; done
  for p in $stepd; do kill -9 "$p" 2>/dev/null && echo "killed leftover step pid $p"; done
fi
# 3. whatever is still alive, by pid file
for f in "$LAB"/run/slurmd-*.pid "$LAB/run/slurmctld.pid" "$LAB/munge/munged.pid"; do
  [ -e "$f" ] && stop_pidfile "$f"
done
rm -f "$LAB/munge/munge.socket" "$LAB/munge/munge.socket.lock"
if [ "${1:-}" = "--purge" ]; then rm -rf "${LAB:?}"; echo "removed $LAB"; fi
echo "slurm down"
