#!/usr/bin/env bash
# Wait until no apt or dpkg holds LOCK... (fcntl locks, probed by taking and dropping them), at most
# SECONDS; exit 1 naming the lock still held then. scripts/setup.sh calls it before apt-get.
#   scripts/apt-lock-wait.sh SECONDS LOCK...
set -euo pipefail
exec python3 - "$@" <<'PY'
import fcntl, os, sys, time
deadline, said = time.monotonic() + float(sys.argv[1]), False
for path in sys.argv[2:]:
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            break
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"setup: {path} is still held by another apt or dpkg after {sys.argv[1]} s; "
                         "run setup again when it has finished")
            if not said:
                print(f"setup: waiting (at most {sys.argv[1]} s) for another apt or dpkg to release {path}",
                      file=sys.stderr)
                said = True
            time.sleep(1)
        finally:
            os.close(fd)
PY
