#!/usr/bin/env bash
# Prints the first Debian archive this machine's own apt sources name (deb822 .sources or
# one-line .list entries), so that the scripts fetching Debian packages write no archive
# address of their own. Exits 1, saying so, when there is none.
set -euo pipefail
uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
  sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
    -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\/debian\)[[:space:]].*/\2/p' | head -n 1 || true)
if [ -z "$uri" ]; then
  echo "no Debian archive in this machine's apt sources" >&2
  exit 1
fi
echo "$uri"
