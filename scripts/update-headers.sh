#!/usr/bin/env bash
# Regenerates include/cai.h and include/cai_cffi.h from the Rust sources (build.rs runs
# cbindgen into OUT_DIR) and copies them into include/. Commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(cargo build --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and "#cai@" in m["package_id"]:
        print(m["out_dir"])' | tail -n 1)
cp "$out/cai.h" "$out/cai_cffi.h" include/
echo "include/cai.h and include/cai_cffi.h regenerated"
