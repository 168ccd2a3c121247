"""Writes the seed corpora of fuzz/corpus/ from docs/conformance.md's rows: CaiArray byte images
for fuzz_validate (control byte last), typestrs for fuzz_typestr and DLPack tensors for
fuzz_dlpack (its `Head`, then the shape and strides). Run once; the output is committed.
target/venv/bin/python fuzz/make_seeds.py (the venv of scripts/python-env.sh)"""

import pathlib
import struct

from cai._ctypes import CaiArray, CaiField

HERE = pathlib.Path(__file__).resolve().parent


def image(shape, typestr, data=0x10000, strides=None, version=3, readonly=False, stream=0):
    a = CaiArray()
    a.version, a.ndim = version, len(shape)
    a.shape[: len(shape)] = shape
    if strides is not None:
        a.strides_given = 1
        a.strides[: len(strides)] = strides
    a.typestr, a.data, a.readonly, a.stream = typestr.encode(), data, readonly, stream
    return bytes(a)


# fuzz_dlpack.c's Head: control, code, bits, device choice, lanes, unused, device type and id,
# ndim, major, minor, (padding), flags, data, byte_offset.
HEAD = struct.Struct("<BBBBHHiiiII4xQQQ")
ALLOW_HOST, NULL_STRIDES = 1, 4
CPU, CUDA, CUDA_HOST = 0, 1, 2  # fuzz_dlpack.c's `devices` entries


def tensor(shape, code, bits, strides=(), control=0, device=CUDA, flags=0, data=0x10000, byte_offset=0):
    head = HEAD.pack(control, code, bits, device, 1, 0, 0, 0, len(shape), 1, 1, flags, data, byte_offset)
    return head + struct.pack(f"<{len(shape)}q", *shape) + struct.pack(f"<{len(strides)}q", *strides)


def main():
    validate = HERE / "corpus" / "validate"
    typestr = HERE / "corpus" / "typestr"
    dlpack = HERE / "corpus" / "dlpack"
    for folder in (validate, typestr, dlpack):
        folder.mkdir(parents=True, exist_ok=True)
    mask = image((2, 3), "|b1")
    fields = bytes((CaiField * 8)(CaiField(b"x", b"<f4", 0), CaiField(b"y", b"<i8", 4)))
    seeds = {
        "row01_minimal": image((4,), "<f4") + bytes(len(mask)) + bytes(len(fields)) + b"\0",
        "row09_zero_d": image((), "<f8") + b"\0",
        "row13_f_order": image((2, 3), "<f4", strides=(4, 8)) + b"\0",
        "row15_negative": image((3, 4), "<f4", strides=(-16, 4)) + b"\0",
        "row18_overflow": image((2**32, 2**32), "|u1") + b"\0",
        "row20_zero_size": image((0, 3), "<f4", data=0) + b"\0",
        "row29_big_endian": image((4,), ">i4") + b"\0",
        "row32_descr": image((4,), "|V12") + mask + fields + bytes([8 | (2 << 4)]),
        "row35_mask": image((2, 3), "<f4") + mask + fields + b"\1",
        "mask_cycle": image((2, 3), "<f4") + mask + fields + b"\7",
        "row38_readonly": image((4,), "<f4", readonly=True, stream=7) + b"\0",
    }
    for name, blob in seeds.items():
        (validate / name).write_bytes(blob)
    tensors = {
        "float32_matrix": tensor((2, 3), 2, 32, (3, 1)),
        "c_contiguous_no_strides": tensor((4, 5), 2, 64, control=NULL_STRIDES),
        "negative_strides": tensor((3, 4), 0, 16, (-4, 1), byte_offset=16),
        "zero_size": tensor((0, 3), 2, 32, (3, 1), data=0),
        "zero_d": tensor((), 1, 8),
        "read_only_host": tensor((8,), 6, 8, (1,), control=ALLOW_HOST, device=CPU, flags=1),
        "complex_pinned": tensor((2, 2), 5, 128, (1, 2), device=CUDA_HOST),
        "bfloat16_refused": tensor((16,), 4, 16, (1,)),
    }
    for name, blob in tensors.items():
        (dlpack / name).write_bytes(blob)
    for i, t in enumerate(["<f4", "|b1", "<c16", ">i4", "<M8[ns]", "<m8[25s]", "|S5", "<U3", "|V12", "|O8", "<f",
                           "M8[generic]", "f16", "i04"]):
        (typestr / f"seed{i:02d}").write_bytes(t.encode())


if __name__ == "__main__":
    main()
