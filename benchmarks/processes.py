"""One timing run in several fresh processes (--processes K), for ratios a single process
cannot settle.

Address-space layout randomization gives each process its own placement of stacks, heap
objects and libraries, and on the 2-vCPU AMD EPYC these numbers come from that placement moves
a ratio by more than the difference being measured: the same build's cai_python_from_object
of the CuPy dict read 1.02x to 1.31x PyArray_FromAny in five processes, and 1.10x to 1.13x in
three with randomization off (`setarch -R`). So with K > 1 the script runs its timing in K
child processes (each one interleaved run, every ratio taken within it, as before) and reports
the median of each row across them, with the lowest and highest ratio. Instruction counts do
not move with placement and are counted once.
"""

import json
import statistics
import subprocess
import sys

CHILD_FLAG = "--timing-child"
MARK = "timings: "


def requested(argv=None):
    """The K of --processes K (1 when not given)."""
    argv = sys.argv if argv is None else argv
    if "--processes" not in argv:
        return 1
    count = int(argv[argv.index("--processes") + 1])
    if count < 1:
        raise SystemExit("--processes takes a count of at least 1")
    return count


def is_child():
    return CHILD_FLAG in sys.argv


def emit(timings):
    """A child's timings, for the parent: one line of JSON."""
    print(MARK + json.dumps(timings), flush=True)


def collect(script, count):
    """The timings of `count` children, each a fresh process running `script` with CHILD_FLAG
    (they reuse what the parent built: the environment is inherited)."""
    runs = []
    for _ in range(count):
        done = subprocess.run([sys.executable, str(script), CHILD_FLAG], capture_output=True, text=True, check=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
        if not lines:
            raise SystemExit(f"a timing child printed no timings:\n{done.stdout}\n{done.stderr}")
        runs.append(json.loads(lines[-1][len(MARK):]))
    return runs


def runs(time_once, script):
    """What `time_once()` gives, run here, or in each of --processes K fresh processes running
    `script`: one result per run."""
    count = requested()
    return [time_once()] if count == 1 else collect(script, count)


def median_and_range(values):
    """(median, lowest, highest) of a row's values across the processes."""
    return statistics.median(values), min(values), max(values)


def ratio_text(ratios):
    """A ratio as the reports print it: the one value, or the median and the range."""
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}x"
    middle, low, high = median_and_range(ratios)
    return f"{middle:.2f}x ({low:.2f}-{high:.2f}x)"
