"""A loop of N calls for benchmarks/python_instructions.sh: `python_loop.py MODE NAME N`, MODE
one of numpy, from_object, validate, empty, on the producers of framework_dicts.py."""

import sys

import numpy as np

import cai
from framework_dicts import PRODUCERS

mode, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
cuda, host = PRODUCERS[name]
desc = cuda.__cuda_array_interface__
call = {
    "numpy": lambda: np.asarray(host),
    "from_object": lambda: cai.from_object(cuda, sync=False),
    "validate": lambda: cai.validate(desc),
    "empty": lambda: None,
}[mode]
for _ in range(n):
    call()
