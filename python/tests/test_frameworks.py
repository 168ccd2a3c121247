"""Real frameworks as DLPack producers and consumers, on the CPU (kDLCPU, taken with
allow_host=True): paddlepaddle (whose tensors offer DLPack 1.3's C exchange table), JAX,
apache-tvm-ffi and numpy. Both ways: values and addresses equal, the read-only flag kept, the
export ended once the consumer lets go (release() refused until then), a producer's table used
instead of its __dlpack__, and a cai.Array consumed through cai's own table.

The frameworks come from python/test-requirements.txt; where one is not installed (the
free-threaded leg installs none of them) its tests are skipped, and counted as skipped."""

import gc
import subprocess
import sys
import textwrap
import warnings

import numpy
import pytest

import cai

warnings.filterwarnings("ignore", category=DeprecationWarning)
paddle = pytest.importorskip("paddle")
tvm_ffi = pytest.importorskip("tvm_ffi")
jnp = pytest.importorskip("jax.numpy")


def host(x):
    return cai.from_object(x, allow_host=True)


def test_a_paddle_tensor_is_taken_through_its_exchange_table_real_paddle(dlpack_calls):
    calls = dlpack_calls(paddle.Tensor)
    assert "dlpack_exchange_api" in repr(type(paddle.to_tensor([1.0])).__dlpack_c_exchange_api__)
    t = paddle.to_tensor(numpy.arange(12.0, dtype=numpy.float32).reshape(3, 4))
    a = host(t)
    assert calls == [], "the table was used: no __dlpack__ call"
    assert (a.shape, a.typestr, a.data_ptr) == ((3, 4), "<f4", t.data_ptr())
    assert a.__dlpack_device__() == (1, 0)
    assert numpy.array_equal(numpy.from_dlpack(a), t.numpy())
    numpy.from_dlpack(t)  # the control: numpy, which reads no table, calls __dlpack__
    assert len(calls) == 1


def test_a_paddle_tensor_is_refused_without_allow_host_naming_the_fix_real_paddle():
    with pytest.raises(cai.CaiError, match="allow_host"):
        cai.from_object(paddle.to_tensor([1.0, 2.0]))


def test_paddle_consumes_a_cai_array_and_release_waits_for_it_real_paddle():
    x = numpy.arange(8.0)
    a = host(x)
    p = paddle.from_dlpack(a)
    assert p.data_ptr() == x.ctypes.data and numpy.array_equal(p.numpy(), x)
    with pytest.raises(BufferError, match="export"):
        a.release()
    del p
    gc.collect()
    a.release()


def test_jax_both_ways_real_jax():
    j = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    a = host(j)
    assert a.shape == (2, 3) and a.typestr == "<f4"
    assert numpy.array_equal(numpy.from_dlpack(a), numpy.asarray(j))
    back = jnp.from_dlpack(host(numpy.arange(4.0)))
    assert numpy.array_equal(numpy.asarray(back), numpy.arange(4.0))


def test_a_jax_host_array_is_taken_by_dlpack_without_its_interface_real_jax():
    """jax's arrays are known by their type (`jax.Array` in its MRO) and asked their device
    first: a host one is taken by DLPack and its `__cuda_array_interface__`, which raises for
    it at a cost per call, is never asked, on any read and with any option, the first read of
    the type in a process included (a process of its own here). The property is replaced by one
    that counts its calls; the arrays read are the arrays' own."""
    program = textwrap.dedent("""
        import numpy, jax.numpy as jnp, cai
        array_type = type(jnp.zeros(1))
        interface = array_type.__dict__["__cuda_array_interface__"]
        asked = []
        def counted(self):
            asked.append(self)
            return interface.__get__(self)
        array_type.__cuda_array_interface__ = property(counted)
        arrays = [jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4) + i for i in range(3)]
        for obj in arrays:
            for options in [{"sync": False}, {}, {"stream": 7}]:
                made = cai.from_object(obj, allow_host=True, **options)
                assert made.owner is obj and made.shape == (3, 4), options
                assert numpy.from_dlpack(made).tolist() == numpy.asarray(obj).tolist(), options
        print(len(asked))
    """)
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["0"], "the interface of a jax host array was asked"


def test_tvm_ffi_both_ways_real_tvm_ffi():
    x = numpy.arange(10, dtype=numpy.int32)
    t = tvm_ffi.from_dlpack(x)
    a = host(t)
    assert a.data_ptr == x.ctypes.data and a.typestr == "<i4"
    assert numpy.array_equal(numpy.from_dlpack(a), x)


def test_tvm_ffi_takes_a_cai_array_through_cais_exchange_table_real_tvm_ffi():
    assert "dlpack_exchange_api" in repr(cai.Array.__dlpack_c_exchange_api__)
    x = numpy.arange(6.0)
    a = host(x)
    t = tvm_ffi.from_dlpack(a)
    assert numpy.from_dlpack(t).ctypes.data == x.ctypes.data
    with pytest.raises(BufferError, match="1 DLPack export"):
        a.release()
    del t
    gc.collect()
    a.release()  # tvm-ffi's deleter ran: the export ended
    # A read-only array: __dlpack__'s legacy struct cannot carry the flag and is refused, so a
    # consumer that gets it took the versioned tensor the table makes.
    x.flags.writeable = False
    ro = host(x)
    with pytest.raises(cai.CaiError, match="legacy DLPack tensor cannot say so"):
        ro.__dlpack__()
    assert numpy.array_equal(numpy.from_dlpack(tvm_ffi.from_dlpack(ro)), x)


def test_cai_takes_a_cai_array_directly_keeping_it_exported_real_numpy():
    x = numpy.arange(5.0)
    a = host(x)
    b = cai.from_object(a, allow_host=True)
    assert (b.data_ptr, b.shape, b.__dlpack_device__()) == (a.data_ptr, a.shape, (1, 0))
    with pytest.raises(cai.CaiError, match="allow_host"):
        cai.from_object(a)
    with pytest.raises(BufferError, match="export"):
        a.release()
    b.release()
    a.release()
