"""A loop of N calls for benchmarks/python_instructions.sh: `python_loop.py MODE N`, on the
objects of python_bench.py."""

import sys

import numpy as np

import cai
from python_bench import CudaProducer, HostProducer

cuda_producer, host_producer = CudaProducer(), HostProducer()
call = {
    "numpy": lambda: np.asarray(host_producer),
    "cai": lambda: cai.from_object(cuda_producer),
    "empty": lambda: None,
}[sys.argv[1]]
for _ in range(int(sys.argv[2])):
    call()
