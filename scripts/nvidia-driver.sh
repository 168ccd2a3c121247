#!/usr/bin/env bash
# Prints a directory holding NVIDIA's real CUDA driver library and its headers, fetching them
# first when need be:
#   <dir>/libcuda.so.1            Debian bookworm's non-free libcuda1 (driver 535, CUDA 12.2)
#   <dir>/include/cuda.h          from Debian trixie's non-free nvidia-cuda-dev (CUDA 12.4,
#   <dir>/include/cudaTypedefs.h  new enough to declare cuCtxGetId); only these two are kept
# The library loads on a machine without a GPU and answers cuInit with CUDA_ERROR_NO_DEVICE,
# which the real-driver tests check (tests/driver_real_nvidia.rs, c_tests/, python/tests/
# test_real_driver.py); they read the directory from CAI_REAL_NVIDIA_DRIVER.
#
# The packages come from the first Debian archive this machine's own apt sources name (no
# archive address is written here), through an apt configuration of its own: its own sources
# list, lists and cache, so the machine's apt configuration is left as it is. Nothing is
# installed: `dpkg-deb` unpacks what is kept. The result is kept in
# ${XDG_CACHE_HOME:-~/.cache}/libcai/ for later runs (the header package is about 900 MB to
# download once; the kept files are a few MB).
# CAI_REAL_NVIDIA_DRIVER, when set, is printed as it is.
set -euo pipefail

if [ -n "${CAI_REAL_NVIDIA_DRIVER:-}" ]; then
  echo "$CAI_REAL_NVIDIA_DRIVER"
  exit 0
fi

driver_suite=bookworm
header_suite=trixie
cache="${XDG_CACHE_HOME:-$HOME/.cache}/libcai/nvidia-driver-$driver_suite-cuda-h-$header_suite"
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
mkdir -p "$work/apt/lists/partial" "$work/apt/parts" "$work/apt/cache/archives/partial" "$work/debs"
printf 'deb %s %s non-free\n' "$uri" "$driver_suite" "$uri" "$header_suite" >"$work/apt/sources.list"
apt_options=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/parts"
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "APT::Sandbox::User=root")
log "fetching Debian's non-free libcuda1 ($driver_suite) and nvidia-cuda-dev ($header_suite, for cuda.h)"
apt-get "${apt_options[@]}" update -qq >&2
(cd "$work/debs" && apt-get "${apt_options[@]}" download -qq "libcuda1/$driver_suite" "nvidia-cuda-dev/$header_suite" >&2)

rm -rf "$cache"
mkdir -p "$cache/include" "$work/driver" "$work/headers"
dpkg-deb -x "$work"/debs/libcuda1_*.deb "$work/driver"
library=$(find "$work/driver" -name 'libcuda.so.1' -print -quit)
[ -n "$library" ] || { log "libcuda1 holds no libcuda.so.1"; exit 1; }
cp -L "$library" "$cache/libcuda.so.1"
log "extracting cuda.h and cudaTypedefs.h (about a minute)"
dpkg-deb --fsys-tarfile "$work"/debs/nvidia-cuda-dev_*.deb |
  tar -x -C "$work/headers" ./usr/include/cuda.h ./usr/include/cudaTypedefs.h
cp "$work/headers/usr/include/cuda.h" "$work/headers/usr/include/cudaTypedefs.h" "$cache/include/"
(cd "$work/debs" && ls *.deb) >"$cache/packages"
touch "$cache/.complete"
echo "$cache"
