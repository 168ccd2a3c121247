#!/usr/bin/env bash
# Prints the path of a free-threaded CPython (built with --disable-gil), building one first
# when need be. CAI_FREE_THREADED_PYTHON, when set, is used as it is. Otherwise CPython 3.13,
# the newest CPython whose source Debian's archive serves to this project's machines (trixie),
# is fetched with `apt-get source` through a deb-src entry derived from the machine's own apt
# sources (no archive address is written here), built once (about 5 minutes on 2 cores) and
# kept in ${XDG_CACHE_HOME:-~/.cache}/libcai/ for later runs.
#   --missing: prints the Debian packages the build lacks (nothing when no build is needed) and
#   exits 0, for scripts/test.sh's check of prerequisites.
set -euo pipefail

check_only=false
[ "${1:-}" = --missing ] && check_only=true

if [ -n "${CAI_FREE_THREADED_PYTHON:-}" ]; then
  $check_only || echo "$CAI_FREE_THREADED_PYTHON"
  exit 0
fi

suite=trixie
cache="${XDG_CACHE_HOME:-$HOME/.cache}/libcai/cpython-ft-$suite"
if [ -f "$cache/.complete" ]; then
  $check_only || echo "$cache/bin/python3"
  exit 0
fi

log() { echo "free-threaded CPython: $*" >&2; }

# What the build needs (scripts/test.sh asks first; .ci/run installs it): a compiler,
# dpkg-dev for apt-get source, and the headers of the modules pip and the tests use (ssl and
# zlib for pip, libffi for ctypes).
missing=()
for pair in cc:gcc make:make xz:xz-utils dpkg-source:dpkg-dev; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
for pair in openssl/ssl.h:libssl-dev zlib.h:zlib1g-dev ffi.h:libffi-dev; do
  [ -n "$(find /usr/include -path "*${pair%%:*}" -print -quit 2>/dev/null)" ] || missing+=("${pair#*:}")
done
if $check_only; then
  echo "${missing[*]}"
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "missing: ${missing[*]} (Debian packages); or set CAI_FREE_THREADED_PYTHON to a free-threaded python3"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A deb-src entry for $suite on the first Debian archive this machine's own sources name,
# in an apt configuration of its own (the machine's lists are left as they are).
if ! uri=$(bash "$(dirname "$0")/debian-archive.sh"); then
  log "set CAI_FREE_THREADED_PYTHON to a free-threaded python3"
  exit 1
fi
mkdir -p "$work/apt/lists/partial" "$work/apt/parts" "$work/src"
echo "deb-src $uri $suite main" >"$work/apt/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/parts"
  -o "Dir::State::Lists=$work/apt/lists" -o "APT::Sandbox::User=root")
log "fetching the python3.13 source of Debian $suite"
apt-get "${apt_options[@]}" update -qq >&2
(cd "$work/src" && apt-get "${apt_options[@]}" source --download-only -qq python3.13 >&2)
orig=$(ls "$work"/src/python3.13_*.orig.tar.* | grep -v "\.asc$" | head -n 1)
mkdir "$work/cpython"
tar -xf "$orig" -C "$work/cpython" --strip-components=1

log "building $(basename "$orig") with --disable-gil into $cache (about 5 minutes on 2 cores)"
rm -rf "$cache"
(
  cd "$work/cpython"
  ./configure --quiet --disable-gil --prefix="$cache" --with-ensurepip=install >&2
  make --quiet -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -n 40 "$work/make.log" >&2; exit 1; }
  make --quiet install >"$work/install.log" 2>&1 || { tail -n 40 "$work/install.log" >&2; exit 1; }
)
touch "$cache/.complete"
echo "$cache/bin/python3"
