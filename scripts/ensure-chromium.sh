#!/usr/bin/env bash
# The dashboard's browser tests drive Debian's chromium with Playwright (never a browser build of
# Playwright's own). Install the package when it is missing (CI runs as root on a Debian machine).
set -euo pipefail
CHROMIUM=${CONVEYOR_CHROMIUM:-/usr/bin/chromium}

if [ -x "$CHROMIUM" ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "no chromium at $CHROMIUM: install Debian's chromium package (apt-get install chromium)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
    echo "chromium was installed but $CHROMIUM is still missing" >&2
    exit 1
fi
