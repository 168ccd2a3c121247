#!/usr/bin/env bash
# The crates a user depends on, built as a user's build resolves them, not with the repository's
# lockfiles: the README's PyO3 route in a new crate after `cargo update` (editions 2021 and 2024,
# PyO3 0.28 and 0.30), examples/pyo3_extension and tests/dependent with a lockfile made afresh,
# and `cai` and `cai-python` packaged and built from their packages, as `cargo publish --dry-run`
# would. Needs network access (the fresh resolutions read crates.io's index). One target folder,
# target/dependents, is shared by every build here, so that a dependency built once is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR="$root/target/dependents"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# Runs one build step quietly; on failure, prints its log and counts it.
attempt() {
  local name=$1
  shift
  if "$@" >"$work/$name.log" 2>&1; then
    return 0
  fi
  echo "$name failed: $*" >&2
  tail -n 30 "$work/$name.log" >&2
  return 1
}

echo "== the README's PyO3 route in a new crate, after cargo update"
# The README's `cargo add` lines as written (the block's first three lines; the rest are pip and
# maturin, which python/tests/test_extensions.py runs on examples/pyo3_extension).
adds=$(python3 scripts/readme-block.py --tested "cargo add lines" | sed -n '1,3p' | sed "s#<libcai>#$root#g")
case "$adds" in
  "cargo add pyo3@0.28 "*) ;;
  *) echo "README.md's cargo add block does not begin with cargo add pyo3@0.28: $adds" >&2; exit 1 ;;
esac
route_passed=0
route_failed=0
for pyo3 in 0.28 0.30; do
  for edition in 2021 2024; do
    name=route-pyo3-$pyo3-edition-$edition
    crate=$work/$name
    ok=1
    attempt "$name-new" cargo new --lib --quiet --edition "$edition" --name gpu_head "$crate" || ok=0
    if [ $ok = 1 ]; then
      while read -r line; do
        # The README's line as a shell runs it, in the new crate, its PyO3 version the loop's.
        attempt "$name-add" bash -c "cd '$crate' && ${line/pyo3@0.28/pyo3@$pyo3} --quiet" || { ok=0; break; }
      done <<<"$adds"
    fi
    if [ $ok = 1 ]; then
      rm "$crate/src/lib.rs"
      cp examples/pyo3_extension/src/*.rs "$crate/src/"
      attempt "$name-update" cargo update --quiet --manifest-path "$crate/Cargo.toml" &&
        attempt "$name-build" cargo build --quiet --manifest-path "$crate/Cargo.toml" || ok=0
    fi
    if [ $ok = 1 ]; then
      route_passed=$((route_passed + 1))
    else
      route_failed=$((route_failed + 1))
    fi
  done
done
echo "pyo3 route after cargo update (PyO3 0.28 and 0.30, editions 2021 and 2024): $route_passed passed, $route_failed failed"
[ $route_failed = 0 ] || failed=1

echo "== examples/pyo3_extension and tests/dependent with a lockfile made afresh"
# Copied without their Cargo.lock, their paths to the repository made absolute: resolved as a
# user's copy of them would be today, not as the committed lockfiles pinned them.
fresh_passed=0
fresh_failed=0
for crate in examples/pyo3_extension tests/dependent; do
  name=fresh-$(basename "$crate")
  copy=$work/$name
  mkdir "$copy"
  cp -r "$crate"/. "$copy"/
  rm -f "$copy/Cargo.lock"
  sed -i "s#\"\.\./\.\.#\"$root#g" "$copy/Cargo.toml"
  if attempt "$name-lock" cargo generate-lockfile --quiet --manifest-path "$copy/Cargo.toml" &&
    attempt "$name-build" cargo build --quiet --manifest-path "$copy/Cargo.toml"; then
    fresh_passed=$((fresh_passed + 1))
  else
    fresh_failed=$((fresh_failed + 1))
  fi
done
echo "examples/pyo3_extension and tests/dependent after a fresh resolution: $fresh_passed passed, $fresh_failed failed"
[ $fresh_failed = 0 ] || failed=1

echo "== cai and cai-python packaged, and built from their packages"
# In the default target folder: verifying cai's package runs its build script, whose cbindgen
# asks `cargo metadata` about the unpacked crate, which cargo takes for a stray member of
# libcai's workspace anywhere in target/ but target/package. --allow-dirty: a working tree with
# edits.
unset CARGO_TARGET_DIR
package_passed=0
package_failed=0
if attempt package-cai cargo package --quiet -p cai --allow-dirty; then
  package_passed=$((package_passed + 1))
else
  package_failed=$((package_failed + 1))
fi
# cai-python cannot be verified as cargo package verifies: its dependency on cai becomes one on
# crates.io's `cai` 0.2.0, which is another project's crate of that name (libcai is not
# published, publish = false), and cargo's verify builds against that. What can be checked is
# checked: the package is made (every file it needs is in it, its manifest normalizes), then
# built from the archive with cai patched to this clone, as it would build beside a published
# cai.
if attempt package-cai-python cargo package --quiet -p cai-python --allow-dirty --no-verify &&
  mkdir "$work/packaged" && tar -xzf target/package/cai-python-0.2.0.crate -C "$work/packaged" &&
  printf '\n[workspace]\n\n[patch.crates-io]\ncai = { path = "%s" }\n' "$root" \
    >>"$work/packaged/cai-python-0.2.0/Cargo.toml" &&
  attempt packaged-cai-python-build cargo build --quiet --manifest-path "$work/packaged/cai-python-0.2.0/Cargo.toml" \
    --target-dir "$root/target/dependents"; then
  package_passed=$((package_passed + 1))
else
  package_failed=$((package_failed + 1))
fi
echo "cargo package and a build of the package (cai, cai-python): $package_passed passed, $package_failed failed"
[ $package_failed = 0 ] || failed=1

exit $failed
