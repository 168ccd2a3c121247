# Sourced by the scripts that run two jobs at once, one a core on a 2-vCPU machine:
# `two_lanes DIR FIRST SECOND` runs the two command strings in subshells of the caller (its
# functions and arrays visible to them), keeps each one's output apart in DIR, prints lane 1's
# then lane 2's, and fails if either failed.
two_lanes() {
  local out=$1 lane_1 lane_2 failed=0
  (eval "$2") >"$out/lane-1.out" 2>&1 &
  lane_1=$!
  (eval "$3") >"$out/lane-2.out" 2>&1 &
  lane_2=$!
  wait "$lane_1" || failed=1
  wait "$lane_2" || failed=1
  cat "$out/lane-1.out" "$out/lane-2.out"
  return "$failed"
}
