"""The element types ML passes (bfloat16, the float8 types, float4 pairs) through libcai, both
ways, on real producers and consumers (torch, jax, paddle and ml_dtypes' numpy arrays, CPU
tensors taken with allow_host=True): the struct carries DLPack's type exactly (`dl_dtype`)
beside a typestr of opaque bytes of the item's size ("<V2", "|V1"), and hands it back to each
framework as the same dtype over the same bytes. Skipped where a framework is not installed
(the free-threaded leg)."""

import ctypes

import numpy
import pytest

import cai
from cai.ctypes_api import CaiDLManagedTensorVersioned
from conftest import DEVICE_BUFFER

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
paddle = pytest.importorskip("paddle")
ml_dtypes = pytest.importorskip("ml_dtypes")

TORCH_TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]
JAX_TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz",
             "float8_e3m4", "float8_e4m3", "float8_e8m0fnu"]
PADDLE_TYPES = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),
    "strided": lambda t: t[:, ::2],
    "offset": lambda t: t[1:],
}


def host(x):
    return cai.from_object(x, allow_host=True)


def typestr_of(name):
    return "<V2" if name == "bfloat16" else "|V1"


def torch_bytes(t):
    """The bytes of `t`'s elements in C order, read as bytes (no conversion of the values)."""
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def torch_tensor(name):
    if name == "float4_e2m1fn_x2":  # torch makes no values of it: its bytes, viewed as pairs
        return torch.arange(24, dtype=torch.uint8).reshape(4, 6).view(torch.float4_e2m1fn_x2)
    return (torch.arange(24.0).reshape(4, 6) / 8).to(getattr(torch, name))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", TORCH_TYPES + ["float4_e2m1fn_x2"])
def test_torch_ml_types_are_taken_exactly_and_handed_back_as_the_same_dtype_real_torch(name, layout):
    t = LAYOUTS[layout](torch_tensor(name))
    a = host(t)
    assert (a.typestr, a.element_type, a.itemsize) == (typestr_of(name), name, t.element_size())
    assert a.shape == tuple(t.shape) and a.strides == tuple(s * t.element_size() for s in t.stride())
    assert a.data_ptr == t.data_ptr()
    back = torch.from_dlpack(a)
    assert back.dtype == t.dtype and back.shape == t.shape and back.stride() == t.stride()
    assert back.data_ptr() == t.data_ptr() and torch_bytes(back) == torch_bytes(t)


@pytest.mark.parametrize("name", JAX_TYPES)
def test_jax_ml_types_are_taken_exactly_and_handed_back_as_the_same_dtype_real_jax(name):
    x = jnp.arange(12.0).reshape(3, 4).astype(getattr(jnp, name))
    a = host(x)
    assert (a.typestr, a.element_type, a.shape) == (typestr_of(name), name, (3, 4))
    back = jax.dlpack.from_dlpack(a)
    assert back.dtype == x.dtype and back.shape == x.shape
    assert numpy.asarray(back).tobytes() == numpy.asarray(x).tobytes()


def test_a_packed_float4_is_refused_naming_dlpacks_rule_and_the_ways_out_real_jax():
    x = jnp.zeros((4, 2), dtype=jnp.float4_e2m1fn)  # jax packs it, two elements a byte
    with pytest.raises(cai.CaiError, match="float4_e2m1fn .code 17, bits 4, lanes 1. is packed") as refused:
        host(x)
    assert refused.value.status == "CAI_ERROR_INVALID_TYPESTR"
    assert "float4_e2m1fn_x2" in str(refused.value) and "PADDED" in str(refused.value)


@pytest.mark.parametrize("name", PADDLE_TYPES)
def test_paddle_ml_types_are_taken_exactly_and_handed_back_as_the_same_dtype_real_paddle(name):
    x = paddle.arange(12, dtype="float32").reshape([3, 4]).astype(name)
    a = host(x)
    assert (a.typestr, a.element_type, a.shape, a.data_ptr) == (typestr_of(name), name, (3, 4), x.data_ptr())
    back = paddle.utils.dlpack.from_dlpack(a)
    assert back.dtype == x.dtype and back.shape == x.shape and back.data_ptr() == x.data_ptr()
    assert ctypes.string_at(back.data_ptr(), a.nbytes) == ctypes.string_at(x.data_ptr(), a.nbytes)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_a_numpy_array_of_an_ml_dtypes_type_keeps_its_name_and_reaches_torch_real_torch(name):
    x = (numpy.arange(12.0).reshape(3, 4) / 4).astype(getattr(ml_dtypes, name))[:, ::2]
    a = host(x)
    assert (a.typestr, a.element_type, a.strides) == (typestr_of(name), name, x.strides)
    back = torch.from_dlpack(a)
    assert str(back.dtype) == f"torch.{name}" and back.data_ptr() == x.ctypes.data
    assert torch_bytes(back) == numpy.ascontiguousarray(x).tobytes()


def dlpack_flags_and_dtype(capsule):
    """The versioned tensor's flags and (code, bits, lanes), read through the capsule."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = CaiDLManagedTensorVersioned.from_address(get(capsule, b"dltensor_versioned"))
    dtype = tensor.dl_tensor.dtype
    return tensor.flags, (dtype.code, dtype.bits, dtype.lanes)


def test_a_padded_float4_says_so_in_its_dlpack_flags_real_ml_dtypes():
    x = numpy.zeros(4, dtype=ml_dtypes.float4_e2m1fn)  # one element a byte
    a = host(x)
    assert (a.typestr, a.element_type, a.itemsize) == ("|V1", "float4_e2m1fn", 1)
    flags, dtype = dlpack_flags_and_dtype(a.__dlpack__(max_version=(1, 3)))
    assert dtype == (17, 4, 1) and flags & 4, "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED"
    with pytest.raises(cai.CaiError, match="padded, one a byte, and a legacy DLPack tensor cannot say so"):  # a legacy capsule cannot say it
        a.__dlpack__()


def test_a_cai_dict_of_opaque_bytes_stays_opaque_and_dlpack_refuses_it_fake_driver():
    a = cai.from_object({"shape": (4,), "typestr": "<V2", "data": (DEVICE_BUFFER, False), "version": 3})
    assert (a.typestr, a.element_type) == ("|V2", None)
    assert a.__cuda_array_interface__["typestr"] == "|V2"
    with pytest.raises(cai.CaiError, match="opaque bytes, and the array's dl_dtype does not say"):
        a.__dlpack__(max_version=(1, 3))
    for numeric, name in [("<f4", "float32"), ("|b1", "bool"), ("<c16", "complex128"), ("|u1", "uint8")]:
        d = {"shape": (4,), "typestr": numeric, "data": (DEVICE_BUFFER, False), "version": 3}
        assert cai.from_object(d).element_type == name


def described(typestr, dl_dtype, strides=None):
    """A cai.Array over (fake) device memory made from a C struct that carries `dl_dtype`."""
    struct = cai.CaiArray(version=3, ndim=2, typestr=typestr, data=DEVICE_BUFFER)
    struct.shape[0], struct.shape[1] = 3, 4
    if strides:
        struct.strides_given = 1
        struct.strides[0], struct.strides[1] = strides
    struct.dl_dtype.code, struct.dl_dtype.bits, struct.dl_dtype.lanes = dl_dtype
    return cai.Array.from_c(ctypes.addressof(struct))


def test_a_device_array_of_bfloat16_exports_its_travel_typestr_and_checks_agreement_fake_driver():
    a = described(b"|V2", (4, 16, 1))  # numpy's spelling taken; "<V2" exported, as torch writes it
    assert a.element_type == "bfloat16"
    assert a.__cuda_array_interface__["typestr"] == "<V2"
    with pytest.raises(cai.CaiError, match=r"dl_dtype bfloat16 \(code 4, bits 16, lanes 1\).*kind 'f'") as refused:
        described(b"<f2", (4, 16, 1))
    assert refused.value.status == "CAI_ERROR_INVALID_TYPESTR"
    with pytest.raises(cai.CaiError, match="has 8 bits where DLPack defines 16"):
        described(b"|V1", (4, 8, 1))
    # DLPack counts strides in items: a byte stride that splits a bfloat16 is refused there
    flags, dtype = dlpack_flags_and_dtype(a.__dlpack__(max_version=(1, 3)))
    assert (flags, dtype) == (0, (4, 16, 1))
    odd = described(b"<V2", (4, 16, 1), strides=(12, 3))
    with pytest.raises(cai.CaiError, match="not a whole number of 2-byte items"):
        odd.__dlpack__(max_version=(1, 3))


def test_tvm_ffi_takes_a_bfloat16_cai_array_through_cais_exchange_table_real_tvm_ffi(dlpack_calls):
    tvm_ffi = pytest.importorskip("tvm_ffi")
    t = torch.arange(8.0).to(torch.bfloat16)
    a = host(t)
    calls = dlpack_calls(cai.Array)
    x = tvm_ffi.from_dlpack(a)
    assert (str(x.dtype), tuple(x.shape), calls) == ("bfloat16", (8,), [])  # the table, no __dlpack__
    assert torch_bytes(torch.from_dlpack(x)) == torch_bytes(t)
