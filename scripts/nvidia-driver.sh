#!/usr/bin/env bash
# Prints a directory holding NVIDIA's real CUDA driver library and its headers, fetching them
# first when need be:
#   <dir>/libcuda.so.1            Debian bookworm's non-free libcuda1 (driver 535, CUDA 12.2)
#   <dir>/include/cuda.h          from NVIDIA's nvidia-cuda-runtime-cu12 wheel, 12.4.127
#   <dir>/include/cudaTypedefs.h  (CUDA 12.4 Update 1); only these two are kept
# The library loads on a machine without a GPU and answers cuInit with CUDA_ERROR_NO_DEVICE,
# which the real-driver tests check (tests/driver_real_nvidia.rs, c_tests/, python/tests/
# test_real_driver.py); they read the directory from CAI_REAL_NVIDIA_DRIVER.
#
# Why that wheel and that version: the signature check (tests/driver_real_nvidia.rs) compiles
# libcai's declarations against cuda.h and cudaTypedefs.h, which must be new enough to declare
# cuCtxGetId (CUDA 12.0) and every PFN_<name>_v<N> the table asks for. The headers came from
# Debian trixie's nvidia-cuda-dev 12.4.127 (a ~900 MB package); the wheel of the same version,
# under 1 MB, holds the two headers of that release, CUDA 12.4 Update 1 (cudaTypedefs.h byte for
# byte, cuda.h but for two comment typos Debian fixed), so the check sees what it always saw.
# The wheel is pinned by its sha256, which pip checks; the x86_64 wheel is asked for on every
# machine, its headers being those of every platform's.
#
# libcuda1 comes from the first Debian archive this machine's own apt sources name (no archive
# address is written here), through an apt configuration of its own: its own sources list, lists
# and cache, so the machine's apt configuration is left as it is. The wheel comes through pip
# from its configured index. Nothing is installed: `dpkg-deb` unpacks the library and Python's
# zipfile the two headers. The result is kept in ${XDG_CACHE_HOME:-~/.cache}/libcai/ for later
# runs (a few MB downloaded once, a few MB kept).
# CAI_REAL_NVIDIA_DRIVER, when set, is printed as it is.
set -euo pipefail

if [ -n "${CAI_REAL_NVIDIA_DRIVER:-}" ]; then
  echo "$CAI_REAL_NVIDIA_DRIVER"
  exit 0
fi

driver_suite=bookworm
headers_wheel=nvidia-cuda-runtime-cu12
headers_version=12.4.127
headers_sha256=64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5
cache="${XDG_CACHE_HOME:-$HOME/.cache}/libcai/nvidia-driver-$driver_suite-cuda-h-$headers_version"
if [ -f "$cache/.complete" ]; then
  echo "$cache"
  exit 0
fi

log() { echo "NVIDIA driver: $*" >&2; }

if ! uri=$(bash "$(dirname "$0")/debian-archive.sh"); then
  log "set CAI_REAL_NVIDIA_DRIVER to a directory laid out as this script's comment says"
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/lists/partial" "$work/apt/parts" "$work/apt/cache/archives/partial" "$work/debs" \
  "$work/wheel"
printf 'deb %s %s non-free\n' "$uri" "$driver_suite" >"$work/apt/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/parts"
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "APT::Sandbox::User=root")
log "fetching Debian's non-free libcuda1 ($driver_suite)"
apt-get "${apt_options[@]}" update -qq >&2
(cd "$work/debs" && apt-get "${apt_options[@]}" download -qq "libcuda1/$driver_suite" >&2)

log "fetching cuda.h and cudaTypedefs.h ($headers_wheel $headers_version)"
# pip comes with python3, or else with a venv of its own (ensurepip; scripts/test.sh checks both).
pip=(python3 -m pip)
if ! python3 -m pip --version >/dev/null 2>&1; then
  python3 -m venv "$work/venv" >&2
  pip=("$work/venv/bin/python" -m pip)
fi
printf '%s==%s --hash=sha256:%s\n' "$headers_wheel" "$headers_version" "$headers_sha256" >"$work/requirements.txt"
"${pip[@]}" download --quiet --disable-pip-version-check --no-deps --require-hashes \
  --platform manylinux2014_x86_64 --only-binary=:all: -d "$work/wheel" -r "$work/requirements.txt" >&2

rm -rf "$cache"
mkdir -p "$cache/include" "$work/driver"
dpkg-deb -x "$work"/debs/libcuda1_*.deb "$work/driver"
library=$(find "$work/driver" -name 'libcuda.so.1' -print -quit)
[ -n "$library" ] || { log "libcuda1 holds no libcuda.so.1"; exit 1; }
cp -L "$library" "$cache/libcuda.so.1"
python3 - "$work"/wheel/*.whl "$cache/include" <<'PY'
import sys, zipfile
wheel, include = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    for name in ("cuda.h", "cudaTypedefs.h"):
        with open(f"{include}/{name}", "wb") as out:
            out.write(archive.read(f"nvidia/cuda_runtime/include/{name}"))
PY
(cd "$work/debs" && ls *.deb && cd "$work/wheel" && ls *.whl) >"$cache/packages"
touch "$cache/.complete"
echo "$cache"
