#!/usr/bin/env bash
# Make sure the pgbouncer binary the pooler tests use (tests/test_pgbouncer.py) is installed. The
# tests start their own pgbouncer processes on free ports with configs of their own; the Debian
# service is never started (a policy-rc.d refuses it during the install). Without root or apt, say
# so and go on: the tests then skip, saying why.
set -euo pipefail

if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "pgbouncer is not installed (apt-get install pgbouncer needs root); its tests will skip" >&2
    exit 0
fi
policy=/usr/sbin/policy-rc.d
made_policy=no
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    made_policy=yes
fi
cleanup() { if [ "$made_policy" = yes ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends pgbouncer >/dev/null; then
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends pgbouncer >/dev/null ||
        echo "could not install pgbouncer; its tests will skip" >&2
fi
exit 0
