"""What the benchmark scripts share: the timing of a table of calls (interleaved rounds, in
--processes K fresh processes where asked), the callgrind count of each call inside a C loop,
the C loop module (benchmarks/extension/loops.c), the offered test type, and the report of a
table. A helper, not a script: it imports no script of this folder, and every script imports
what it needs from here (besides framework_dicts.py's dicts and processes.py's runs).

A table is {(argument, column): call}, `call` a function of no arguments. `timed` gives each
cell its best of ROUNDS interleaved rounds of NUMBER calls, in ns per call; `counted` gives its
instructions per call, counted by callgrind in a child process (the script again, with
--count-child DIR) inside loops.c's counted_calls: a C loop of COUNTED calls less the same loop
calling an empty lambda, the frameworks imported uninstrumented.
"""

import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import timeit
import warnings

import processes

HERE = pathlib.Path(__file__).resolve().parent
# python/tests/extensions/build.py, the test suite's builder of extension modules, is importable
# as `build` by every script that imports this module; it imports cai, so it is imported where
# used, after a script's quiet().
sys.path.insert(0, str(HERE.parent / "python" / "tests" / "extensions"))

NUMBER, ROUNDS, COUNTED = 20000, 9, 2000
SHAPE = (512, 256)


def quiet():
    """The frameworks' warnings and paddle's log lines off (set before paddle is imported)."""
    warnings.filterwarnings("ignore")
    os.environ.setdefault("GLOG_minloglevel", "3")


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    except OSError:
        pass
    return platform.processor()


def build_loops(out):
    """benchmarks/extension/loops.c as the module cai_bench_loops in the folder `out`."""
    import build
    import numpy

    build.compile_module([HERE / "extension" / "loops.c"], out / f"cai_bench_loops{build.SUFFIX}", cpp=False,
                         extra_includes=[numpy.get_include()])


def callgrind_dumps(out_dir):
    """{label: instructions} of the dumps loops.c's counted_calls made in `out_dir`."""
    totals = {}
    for dump in out_dir.glob("callgrind.out.*"):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if trigger and total:
            totals[trigger.group(1)] = int(total.group(1))
    return totals


def offer_ext():
    """The test producer (python/tests/extensions/offer_ext.c, whose `Image` is offered by
    cai_python_offer), built once into a cache folder of the temporary directory."""
    import importlib

    import build

    out = pathlib.Path(tempfile.gettempdir()) / "cai-offer-bench"
    out.mkdir(exist_ok=True)
    target = out / f"cai_offer_ext{build.SUFFIX}"
    if not target.exists():
        build.compile_module([build.HERE / "offer_ext.c"], target, cpp=False)
    sys.path.insert(0, str(out))
    return importlib.import_module("cai_offer_ext")


def timed(table):
    best = {key: float("inf") for key in table}
    for key, call in table.items():
        call()  # warm: type caches, first loads
    for _ in range(ROUNDS):
        for key, call in table.items():
            best[key] = min(best[key], timeit.timeit(call, number=NUMBER) / NUMBER * 1e9)
    return best


def counted(table, script, child_args=()):
    """Instructions per call of each cell: one child process (SCRIPT --count-child DIR
    CHILD_ARGS...) under callgrind, instrumentation on only from the first counted loop (the
    frameworks' imports run uninstrumented)."""
    out_dir = pathlib.Path(tempfile.mkdtemp(prefix="cai-dlpack-bench-"))
    build_loops(out_dir)
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
         f"--callgrind-out-file={out_dir}/callgrind.out", sys.executable, script, "--count-child", str(out_dir), *child_args],
        check=True, env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    totals = callgrind_dumps(out_dir)
    empty = totals.pop("empty")
    return {key: (totals[label(key)] - empty) / COUNTED for key in table if label(key) in totals}


def label(key):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "|".join(key))


def count_child(loops_dir, table):
    """Counts each call of TABLE in its own labelled C loop (run in the child under callgrind)."""
    sys.path.insert(0, loops_dir)
    import cai_bench_loops as loops

    for key, call in [(("empty",), lambda: None), *table.items()]:
        for _ in range(200):  # warm: the interpreter's specializations, type caches
            call()
        loops.counted_calls(call, COUNTED, "empty" if key == ("empty",) else label(key))


def timed_runs(table, script):
    """The table timed once here, or in --processes K fresh processes: one {key: ns} per run."""
    by_label = {label(key): key for key in table}
    runs = processes.runs(lambda: {label(key): ns for key, ns in timed(table).items()}, script)
    return [{by_label[name]: ns for name, ns in run.items()} for run in runs]


def cell_text(times, instructions, key):
    """A table cell: ns per call, then instructions per call where counted; empty if no cell."""
    if key not in times:
        return ""
    if key in instructions:
        return f"{times[key]:.0f} / {instructions[key]:,.0f}"
    return f"{times[key]:.0f}"


def run_table(cells, script, width, goals=()):
    """The main of a benchmark whose rows are `cells()` ((argument, column, call) triples):
    times every row (in --processes K fresh processes if asked), counts its instructions with
    --instructions (in a child running `script` with --count-child), and prints one line per
    row, the column `width` wide, then each of `goals` ((row, peer row) pairs) as the ratio of
    the two, taken within each run."""
    import numpy

    import cai

    table = {(argument, column): call for argument, column, call in cells()}
    if sys.argv[1:2] == ["--count-child"]:
        count_child(sys.argv[2], table)
        return
    if processes.is_child():
        processes.emit({label(key): ns for key, ns in timed(table).items()})
        return
    print(f"machine: {platform.machine()}, {cpu_name()}; Python {platform.python_version()}, "
          f"numpy {numpy.__version__}, cai {cai.__version__}")
    runs = timed_runs(table, script)
    if len(runs) > 1:
        print(f"(ns: the median of {len(runs)} processes' runs; a ratio: its median, lowest and highest)")
    instructions = counted(table, script) if "--instructions" in sys.argv else {}
    for key in table:
        cell = f"{processes.median_and_range([run[key] for run in runs])[0]:7.0f} ns"
        if key in instructions:
            cell += f" / {instructions[key]:7,.0f} instructions"
        print(f"{key[0]:18} {key[1]:{width}} {cell}")
    for key, peer in goals:
        if key in table and peer in table:
            ratio = processes.ratio_text([run[key] / run[peer] for run in runs])
            counts = f" / {instructions[key] / instructions[peer]:.2f}x" if key in instructions else ""
            print(f"{' '.join(key)} vs {' '.join(peer)}: {ratio}{counts}")
