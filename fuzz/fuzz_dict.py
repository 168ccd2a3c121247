"""atheris target: the Python extension's dict path. Dicts of arbitrary Python values (big and
negative ints, bools, floats, numpy ints, strs with surrogates, lists, tuples, None, nested
masks and descrs) go through cai.validate and cai.from_object (no driver in this process, so no
pointer check). Only CaiError, TypeError or AttributeError may come out; validate and from_object
reach the same verdict; and what is accepted re-exports as a dict that is accepted again, with
the same shape.

    target/venv/bin/python fuzz/fuzz_dict.py -max_total_time=60   (the venv of scripts/python-env.sh)
"""

import os
import sys

import atheris

os.environ.setdefault("CAI_CUDA_DRIVER", "/nonexistent/libcuda.so.1")  # no driver: pure checks

with atheris.instrument_imports():
    import numpy as np

    import cai

KEYS = ["version", "shape", "typestr", "data", "strides", "stream", "descr", "mask", "other"]


def value(fdp, depth=0):
    kind = fdp.ConsumeIntInRange(0, 12)
    if kind == 0:
        return fdp.ConsumeIntInRange(-4, 8)
    if kind == 1:
        return fdp.ConsumeInt(9) * (1 if fdp.ConsumeBool() else -1)
    if kind == 2:
        return fdp.ConsumeBool()
    if kind == 3:
        return None
    if kind == 4:
        return fdp.ConsumeFloat()
    if kind == 5:
        return fdp.ConsumeUnicode(12)
    if kind == 6:
        return fdp.PickValueInList(["<f4", "|b1", "<c16", ">i4", "<M8[ns]", "|V12", "|O8", "<f", "f4"])
    if kind == 7:
        return np.int64(fdp.ConsumeIntInRange(-2, 2**40))
    if kind == 8 and depth < 2:
        return tuple(value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 4)))
    if kind == 9 and depth < 2:
        return [value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    if kind == 10 and depth < 1:
        return descriptor(fdp, depth + 1)
    if kind == 11:
        return fdp.ConsumeIntInRange(0, 2**64 - 1)
    return (fdp.ConsumeIntInRange(0, 2**20), fdp.ConsumeBool())


def descriptor(fdp, depth=0):
    return {key: value(fdp, depth) for key in KEYS if fdp.ConsumeBool()}


def verdict(desc):
    try:
        cai.validate(desc)
        return "ok"
    except cai.CaiError as e:
        return e.status
    except (TypeError, AttributeError) as e:
        return type(e).__name__


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    desc = descriptor(fdp)
    checked = verdict(desc)
    try:
        array = cai.from_object(desc, sync=False)
        imported = "ok"
    except cai.CaiError as e:
        imported, array = e.status, None
    except (TypeError, AttributeError) as e:
        imported, array = type(e).__name__, None
    if imported != checked:
        raise AssertionError(f"validate says {checked}, from_object says {imported}: {desc!r}")
    if array is not None:
        again = cai.from_object(array.__cuda_array_interface__, sync=False)
        if again.shape != array.shape or again.readonly != array.readonly:
            raise AssertionError(f"re-export changed the array: {desc!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
