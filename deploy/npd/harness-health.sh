#!/bin/sh
# node-problem-detector custom plugin: the harness health DaemonSet's last verdict on this node.
# The DaemonSet (`harness k8s render --kind daemonset`) runs `harness run prolog --npd` every few
# minutes and leaves "<exit code>\n<line>" in STATUS; this prints the line (80 bytes at most) and
# exits with the code, which already is NPD's: 0 OK (ACCEPTED), 1 NonOK (REJECTED), other Unknown
# (ERRORED, UNTESTED, invalid input). A status that is missing, unreadable or older than MAX_AGE
# seconds (the DaemonSet stopped) is Unknown (exit 2).
#   harness-health.sh [STATUS [MAX_AGE]]
STATUS=${1:-/var/lib/harness/npd/npd.status}
MAX_AGE=${2:-900}
if [ ! -r "$STATUS" ]; then
  echo "harness: no health status yet"
  exit 2
fi
age=$(( $(date +%s) - $(stat -c %Y "$STATUS") ))
if [ "$age" -gt "$MAX_AGE" ]; then
  echo "harness: health status is ${age} s old"
  exit 2
fi
rc=$(sed -n 1p "$STATUS")
sed -n 2p "$STATUS" | cut -c1-80
case "$rc" in
  0|1) exit "$rc" ;;
  *) exit 2 ;;
esac
