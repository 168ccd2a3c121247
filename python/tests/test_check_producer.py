"""cai.testing.check_producer, the producer conformance kit: no finding on real producers
(cai.Array on the host and on the fake CUDA driver's memory, a test double; numpy, torch,
paddle and jax CPU tensors; cuda.core's StridedMemoryView; the C types offered by
cai_python_offer), and on a family of broken producers written in Python, each a good array
with one thing corrupted, exactly the finding of that fault, naming its protocols and field."""

import ctypes

import numpy as np
import pytest

import cai
import cai.testing
from cai.testing import CAI, DLPACK, DLPACK_DEVICE, DLPACK_VERSIONED, Finding, check_producer
from conftest import DEVICE_BUFFER



def device_array(shape=(2, 3), typestr="<f4", data=DEVICE_BUFFER):
    return cai.from_object({"shape": shape, "typestr": typestr, "data": (data, False), "version": 3,
                            "stream": None}, sync=False)


def test_a_finding_names_the_protocols_the_field_and_the_values():
    finding = Finding(("__cuda_array_interface__", "__dlpack__"), "shape", ((3, 4), (4, 3)))
    assert str(finding) == "__cuda_array_interface__ vs __dlpack__: shape (3, 4) vs (4, 3)"
    note = Finding((CAI,), "stream", ("missing",), "read as None", "note")
    assert str(note) == "note: __cuda_array_interface__: stream 'missing' (read as None)"
    with pytest.raises(AttributeError):
        finding.field = "strides"  # frozen


def test_cai_arrays_conform_on_the_host_and_fake_driver():
    assert check_producer(cai.from_object(np.arange(12, dtype=np.int16).reshape(3, 4), allow_host=True)) == []
    assert check_producer(device_array()) == []
    assert check_producer(device_array((0, 3), data=0)) == []


@pytest.mark.parametrize("values", [np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros((0, 5)),
                                    np.arange(24.0).reshape(4, 6)[::2, 1::2], np.array(7, dtype=np.uint8),
                                    np.arange(4, dtype=np.complex64)], ids=["2d", "empty", "strided", "0d", "c8"])
def test_numpy_arrays_conform(values):
    assert check_producer(values, notes=True) == []


def test_torch_and_jax_cpu_tensors_conform():
    torch = pytest.importorskip("torch")
    assert check_producer(torch.arange(12).reshape(3, 4)) == []
    assert check_producer(torch.arange(12.0).reshape(3, 4).t()) == []
    jnp = pytest.importorskip("jax.numpy")
    assert check_producer(jnp.arange(6, dtype=jnp.float32).reshape(2, 3)) == []


def test_paddle_cpu_tensors_agree_and_only_their_dlpack_device_id_is_none():
    """Paddle's CPU tensors say `__dlpack_device__() == (kDLCPU, None)`: DLPack's device id is an
    int. That is paddle's one deviation; everything else (both capsules, its exchange table if
    any) conforms and agrees."""
    paddle = pytest.importorskip("paddle")
    tensor = paddle.arange(6).reshape([2, 3])
    findings = check_producer(tensor)
    assert [(f.protocols, f.field) for f in findings] == [((DLPACK_DEVICE,), "value")], [str(f) for f in findings]
    assert "None" in str(findings[0])


def test_a_cuda_core_strided_memory_view_conforms():
    utils = pytest.importorskip("cuda.core.utils")
    view = utils.StridedMemoryView.from_dlpack(np.arange(6, dtype=np.int32), stream_ptr=-1)
    assert check_producer(view) == []


@pytest.fixture
def ext(offer_ext):
    return offer_ext


@pytest.mark.parametrize("name", ["Image", "StaticImage"])
def test_the_offered_c_types_conform_on_the_host_and_fake_driver(ext, name, fake):
    kind = getattr(ext, name)
    values = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert check_producer(kind(values.ctypes.data, 3, 4, host=True, base=values), notes=True) == []
    image = kind(DEVICE_BUFFER, 2, 8, typestr="<f4", stream=fake.stream(), readonly=True)
    assert check_producer(image, notes=True) == []


def test_the_kit_reads_the_c_level_table_and_the_exchange_table_fake_driver(ext):
    """A fault seen only by the tables shows they are read: the fill's shape changes on every
    call (FAULT_CHANGES), so the protocols disagree on the shape."""
    image = ext.Image(DEVICE_BUFFER, 2, 3, fault=ext.FAULT_CHANGES)
    findings = check_producer(image)
    assert [f.field for f in findings] == ["shape"], [str(f) for f in findings]
    named = " ".join(findings[0].protocols)
    assert "__cuda_array_interface_c_api__ (view)" in named and "__cuda_array_interface_c_api__ (acquire)" in named
    assert "__dlpack_c_exchange_api__" in named and CAI in named


class Broken:
    """A good array with one thing corrupted: `dict_fault` edits the CAI dict; the other faults
    change `__dlpack__` or `__dlpack_device__`."""

    def __init__(self, inner, dict_fault=None, device=None, leak=False, legacy_versioned=False):
        self.inner, self.dict_fault, self.device = inner, dict_fault, device
        self.leak, self.legacy_versioned = leak, legacy_versioned

    @property
    def __cuda_array_interface__(self):
        interface = dict(self.inner.__cuda_array_interface__)
        if self.dict_fault:
            self.dict_fault(interface)
        return interface

    def __dlpack__(self, **kwargs):
        if self.leak and "max_version" in kwargs:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self))  # a reference no deleter lets go of
        if self.legacy_versioned:
            kwargs["max_version"] = (1, 0)
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device or self.inner.__dlpack_device__()


def setter(key, value):
    return lambda interface: interface.__setitem__(key, value)


def without(key):
    return lambda interface: interface.pop(key)


FAULTS = {
    # name: (producer, protocols named, field, text in str)
    "stream 0": (lambda: Broken(device_array(), setter("stream", 0)), (CAI,), "stream", "stream 0"),
    "typestr f4": (lambda: Broken(device_array(), setter("typestr", "f4")), (CAI,), "typestr", "typestr 'f4'"),
    "typestr <u1": (lambda: Broken(device_array(typestr="|u1"), setter("typestr", "<u1")), (CAI,), "typestr",
                    "'|u1'"),
    "version 4": (lambda: Broken(device_array(), setter("version", 4)), (CAI,), "version", "version 4"),
    "data a list": (lambda: Broken(device_array(), setter("data", [DEVICE_BUFFER, False])), (CAI,), "data",
                    "a tuple"),
    "zero-size data": (lambda: Broken(device_array((0, 3), data=0), setter("data", (DEVICE_BUFFER, False))),
                       (CAI,), "data", "zero-size"),
    "shape list": (lambda: Broken(device_array(), setter("shape", [2, 3])), (CAI,), "shape", "[2, 3]"),
    "mask shape": (lambda: Broken(device_array(), setter("mask", device_array((3,), "|b1"))), (CAI,), "mask shape",
                   "(3,)"),
    "shape disagrees": (lambda: Broken(device_array(), setter("shape", (3, 2))),
                        (CAI, f"{DLPACK_VERSIONED} and {DLPACK}"), "shape", "shape (3, 2) vs (2, 3)"),
    "readonly disagrees": (lambda: Broken(device_array(), setter("data", (DEVICE_BUFFER, True))),
                           (CAI, DLPACK_VERSIONED), "readonly", "readonly True vs False"),
    "data pointer disagrees": (lambda: Broken(device_array(), setter("data", (DEVICE_BUFFER + 64, False))),
                               (CAI, f"{DLPACK_VERSIONED} and {DLPACK}"), "data", str(DEVICE_BUFFER + 64)),
    "dlpack_device lies": (lambda: Broken(device_array(), device=(1, 0)),
                           (DLPACK_DEVICE, f"{DLPACK_VERSIONED} and {DLPACK}"), "device", "device (1, 0) vs (2, 0)"),
    "deleter never releases": (lambda: Broken(device_array(), leak=True), (DLPACK_VERSIONED,), "deleter",
                               "never released"),
    "legacy call gives a versioned capsule": (lambda: Broken(device_array(), legacy_versioned=True), (DLPACK,),
                                              "capsule name", "'dltensor_versioned'"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_seeded_fault_is_the_one_finding_fake_driver(fault):
    make, protocols, field, text = FAULTS[fault]
    producer = make()
    findings = check_producer(producer, notes=True)
    assert len(findings) == 1, [str(f) for f in findings]
    (finding,) = findings
    assert (finding.protocols, finding.field, finding.severity) == (protocols, field, "error"), str(finding)
    assert text in str(finding) and field in str(finding), str(finding)
    # The good array it wraps has none.
    assert check_producer(Broken(producer.inner), notes=True) == []


class RefusesNoSync(Broken):
    """A CUDA producer whose `__dlpack__` fails when asked for no sync (stream=-1), as JAX
    0.11.2's did on an H200 (CUDA_ERROR_INVALID_HANDLE; docs/gpu-results.md)."""

    def __dlpack__(self, stream=None, **kwargs):
        if stream == -1:
            raise RuntimeError("INTERNAL: CUDA error: : CUDA_ERROR_INVALID_HANDLE: invalid resource handle")
        return self.inner.__dlpack__(stream=stream, **kwargs)


def test_a_producer_refusing_stream_minus_one_is_named_with_the_call_fake_driver():
    findings = check_producer(RefusesNoSync(device_array()))
    assert [(f.protocols, f.field, f.values) for f in findings] == [
        ((DLPACK_VERSIONED,), "call", ("RuntimeError",)), ((DLPACK,), "call", ("RuntimeError",))]
    assert all("CUDA_ERROR_INVALID_HANDLE" in str(f) and "called with stream=-1" in str(f) for f in findings)


def legacy_capsule_without_destructor(managed):
    """A "dltensor" capsule of `managed`, a legacy DLPack struct its producer object owns."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(managed), b"dltensor", None)


class UnsignedNegativeStrides:
    """A CUDA producer whose CAI dict is right and whose DLPack tensor divides a negative byte
    stride by the itemsize as an unsigned number, as CuPy 14.2.0's `__dlpack__` does (seen on
    an H200: byte strides (16, -8) of float32 exported as (4, 4611686018427387902))."""

    def __init__(self):
        from cai.ctypes_api import CaiDLManagedTensor

        self.data = DEVICE_BUFFER + 8
        self.shape, self.strides = (ctypes.c_int64 * 2)(3, 2), (ctypes.c_int64 * 2)(4, (1 << 64) - 8 >> 2)
        self.managed = CaiDLManagedTensor()
        tensor = self.managed.dl_tensor
        tensor.data, tensor.ndim, tensor.shape, tensor.strides = self.data, 2, self.shape, self.strides
        tensor.device.device_type, tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = 2, 2, 32, 1
        self.__cuda_array_interface__ = {"shape": (3, 2), "typestr": "<f4", "data": (self.data, False),
                                         "strides": (16, -8), "version": 3, "stream": None}

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return legacy_capsule_without_destructor(self.managed)

    def __dlpack_device__(self):
        return (2, 0)


class HostOnDeviceFive:
    """A host producer whose `__dlpack_device__` and tensors agree on (kDLCPU, 5), where DLPack's
    host memory is device 0 (an offered type's fill could say so until libcai refused it)."""

    def __init__(self):
        from cai.ctypes_api import CaiDLManagedTensor

        self.values = np.arange(6, dtype=np.float32)
        self.shape = (ctypes.c_int64 * 1)(6)
        self.managed = CaiDLManagedTensor()
        tensor = self.managed.dl_tensor
        tensor.data, tensor.ndim, tensor.shape = self.values.ctypes.data, 1, self.shape
        tensor.device.device_type, tensor.device.device_id = 1, 5
        tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = 2, 32, 1

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return legacy_capsule_without_destructor(self.managed)

    def __dlpack_device__(self):
        return (1, 5)


def test_host_memory_on_a_device_other_than_0_is_the_one_finding():
    findings = check_producer(HostOnDeviceFive(), notes=True)
    assert [(f.protocols, f.field, f.severity) for f in findings] == [((DLPACK_DEVICE,), "device id", "error")], \
        [str(f) for f in findings]
    assert "(1, 5)" in str(findings[0]) and "kDLCPU" in str(findings[0])


def test_negative_strides_written_unsigned_are_found_with_their_likely_cause_fake_driver():
    findings = check_producer(UnsignedNegativeStrides())
    assert [(f.protocols, f.field) for f in findings] == [((DLPACK_VERSIONED,), "libcai's read"),
                                                          ((DLPACK,), "libcai's read")], [str(f) for f in findings]
    for finding in findings:
        assert "strides[1] = 4611686018427387902 elements of 4 bytes overflow 64 bits" in str(finding)
        assert "modulo 2^64 it is -8 bytes" in str(finding)


@pytest.mark.parametrize("fault,field", [(without("stream"), "stream"),
                                         (setter("strides", (12, 4)), "strides")], ids=["no stream", "c strides"])
def test_what_the_spec_allows_but_is_not_canonical_is_a_note_fake_driver(fault, field):
    producer = Broken(device_array(), fault)
    assert check_producer(producer) == []
    (note,) = check_producer(producer, notes=True)
    assert (note.protocols, note.field, note.severity) == ((CAI,), field, "note")
    assert str(note).startswith(f"note: {CAI}: {field}")


def test_an_object_with_no_protocol_is_one_finding():
    (finding,) = check_producer(object())
    assert finding.field == "protocol" and "'object'" in str(finding)


def test_a_subclass_that_changes_the_dict_but_keeps_the_c_level_table_is_a_finding_fake_driver(ext):
    """docs/c-level-cai.md section 1: such a subclass hides the inherited table (None) or offers
    its own; libcai's consumers skip it, the kit names it. Hidden, it conforms."""

    class Changed(ext.Image):
        @property
        def __cuda_array_interface__(self):
            return {"shape": (2, 3), "typestr": "|u1", "data": (DEVICE_BUFFER, False), "version": 3, "stream": None}

    findings = check_producer(Changed(DEVICE_BUFFER, 2, 3))
    assert [(f.protocols, f.field) for f in findings] == [((cai.testing.C_API_VIEW,), "table")], [str(f) for f in findings]
    assert "__cuda_array_interface_c_api__ = None" in str(findings[0])
    # Hidden, it conforms: the DLPack exchange table it keeps finds the fill by the type.
    Changed.__cuda_array_interface_c_api__ = None
    assert check_producer(Changed(DEVICE_BUFFER, 2, 3)) == []
