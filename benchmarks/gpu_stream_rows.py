"""GPU benchmark for an A/B of two builds of the package (run by hand, not by gpu-check.sh):
`cai.from_object` of a torch CUDA tensor without sync and stream-ordered, the consumer stream
given as a torch.cuda.Stream and as its int handle, with and without the pointer check.
Best of 7 runs of 5,000 calls, in us. Install each build in its own folder and alternate:

    for i in 1 2 3; do for v in old new; do PYTHONPATH=/tmp/$v python3 benchmarks/gpu_stream_rows.py $v; done; done
"""

import sys
import timeit

import torch

import cai

t = torch.zeros((1024, 1024), dtype=torch.float32, device="cuda")
consumer = torch.cuda.Stream()
handle = consumer.cuda_stream
rows = {"no sync": lambda: cai.from_object(t, sync=False),
        "ordered, stream object": lambda: cai.from_object(t, stream=consumer),
        "ordered, stream int": lambda: cai.from_object(t, stream=handle),
        "ordered, int, no pointer check": lambda: cai.from_object(t, stream=handle,
                                                                  pointer_check=cai.POINTER_CHECK_NEVER)}
for call in rows.values():
    call()
print(sys.argv[1] if len(sys.argv) > 1 else "", "  ".join(
    f"{name}: {min(timeit.repeat(call, number=5000, repeat=7)) / 5000 * 1e6:.3f}" for name, call in rows.items()))
torch.cuda.synchronize()
