"""Nothing a user does to a returned value changes the array, and every value exports by DLPack.

Each scenario makes an array, takes one value from it by one value-returning path (read,
gather, stack, concat, a ragged layout's rows and concat view, a gradient array's read,
scalar reads, the class's methods), then each attack tries to write 7 through that value.
Afterwards every slot is read back by a fresh read and compared with the host copy taken
before the attack. Not defended, and so not attacked here (docs/guide.md says so): a raw
pointer (ctypes.from_address(v.ctypes.data), a forged __array_interface__), and torch's
routes that ignore NumPy's read-only flag (torch.from_numpy, torch.as_tensor,
torch.from_dlpack(np.asarray(v))).
"""

import ctypes
import importlib
import os

import numpy as np
import pytest

from gpu_tensorarray import TensorArray
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry
from ta_conformance_util import concat, gather, grad, host, new, read, split, write

# Where an attack is refused, it raises one of these; what it does not refuse, it writes.
REFUSED = (ValueError, TypeError, AttributeError, BufferError, RuntimeError)


def optional(module, required_in_ci=False):
    """The module, or a skip naming why; under CI a required one that is missing fails."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if required_in_ci and os.environ.get("CI"):
            pytest.fail(f"{module} must be importable in CI: {error}")
        pytest.skip(f"{module} is not installed here: {error}")


def element(index, shape=(4,)):
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 10 * index + 1)


# -- scenarios: (value, handle, slot count) ---------------------------------------------------------------------
def uniform(size=3, shape=(4,)):
    handle, _ = new(size, clear_after_read=False)
    for index in range(size):
        write(handle, index, element(index, shape))
    return handle


def ragged():
    """Three slots of differing shapes: the ragged layout; a split's pieces lie in order."""
    handle, _ = new(3, clear_after_read=False)
    split(handle, np.arange(12, dtype=np.float32).reshape(6, 2) + 1, [1, 3, 2])
    return handle


def s_read():
    handle = uniform()
    return read(handle, 1), handle, 3


def s_read_zeros():
    """An unwritten slot of a fully defined element shape: zeros, materialised on read."""
    handle, _ = new(3, clear_after_read=False, element_shape=[4])
    write(handle, 0, element(0))
    return read(handle, 2), handle, 3


def s_scalar_read():
    handle = uniform(shape=())
    return read(handle, 2), handle, 3


def s_stack():
    handle = uniform()
    return gather(handle, range(3)), handle, 3


def s_gather():
    handle = uniform()
    return gather(handle, [2, 0]), handle, 3


def s_concat():
    handle = uniform()
    return concat(handle).value, handle, 3


def s_scalar_stack():
    handle = uniform(shape=())
    return gather(handle, range(3)), handle, 3


def s_ragged_read():
    handle = ragged()
    return read(handle, 1), handle, 3


def s_ragged_concat():
    handle = ragged()
    return concat(handle).value, handle, 3


def s_ragged_gather():
    handle, _ = new(3, clear_after_read=False)
    split(handle, np.arange(10, dtype=np.float32).reshape(5, 2) + 1, [1, 2, 2])
    return gather(handle, [2, 1]), handle, 3


def s_grad_read():
    forward = uniform()
    handle = grad(forward)
    write(handle, 0, element(0))
    write(handle, 0, element(5))           # aggregates: the slot holds the sum
    write(handle, 1, element(1))
    registry.lookup(handle).clear_after_read = False    # so the check below can read it again
    return read(handle, 0), handle, 2


def s_class_stack():
    ta = TensorArray(np.float32, size=3, clear_after_read=False)
    for index in range(3):
        ta = ta.write(index, element(index))
    return ta.stack(), ta.handle, 3


def s_class_read():
    ta = TensorArray(np.float32, size=3, clear_after_read=False)
    for index in range(3):
        ta = ta.write(index, element(index))
    return ta.read(0), ta.handle, 3


def s_class_concat():
    ta = TensorArray(np.float32, size=3, clear_after_read=False)
    for index in range(3):
        ta = ta.write(index, element(index))
    return ta.concat(), ta.handle, 3


def s_raw_concat_op():
    handle = uniform()
    return ro.TensorArrayConcatV3(handle, 0.0, np.float32).value, handle, 3


SCENARIOS = {name[2:]: scenario for name, scenario in globals().items() if name.startswith("s_")}


def contents(handle, count):
    return [host(read(handle, index)).copy() for index in range(count)]


# -- attacks: each tries to write 7 into the value's memory ----------------------------------------------------
def fill(array):
    array[...] = 7


def a_write_directly(v, backend):
    fill(v)


def a_writeable_flag(v, backend):
    v.flags.writeable = True
    fill(v)


def a_setflags(v, backend):
    v.setflags(write=True)
    fill(v)


def a_asarray(v, backend):
    w = np.asarray(v)
    try:
        w.flags.writeable = True
    finally:
        fill(w)


def a_view(v, backend):
    w = v.view()
    w.flags.writeable = True
    fill(w)


def a_plain_view(v, backend):
    w = v.view(type(np.empty(0)))
    w.setflags(write=True)
    fill(w)


def a_base_chain(v, backend):
    base = v
    while base is not None:
        for step in (lambda: setattr(base.flags, "writeable", True), lambda: fill(base)):
            try:
                step()
            except REFUSED:
                pass
        if isinstance(base, memoryview):
            if base.obj is not None:
                fill(np.asarray(base.obj))
            try:
                base.cast("B")[0] = 7
            except REFUSED:
                pass
            writable = np.frombuffer(base, np.uint8)
            writable.flags.writeable = True
            fill(writable)
        base = getattr(base, "base", None)


def a_as_strided(v, backend):
    fill(np.lib.stride_tricks.as_strided(v, writeable=True))


def a_ndarray_over_buffer(v, backend):
    w = np.ndarray(v.shape, v.dtype, buffer=v)
    w.flags.writeable = True
    fill(w)


def a_ndarray_over_memoryview(v, backend):
    w = np.ndarray(v.shape, v.dtype, buffer=memoryview(v))
    w.flags.writeable = True
    fill(w)


def a_ctypes_from_buffer(v, backend):
    (ctypes.c_char * v.nbytes).from_buffer(v)[:] = b"\x07" * v.nbytes


def a_numpy_dlpack(v, backend):
    w = np.from_dlpack(v)
    w.flags.writeable = True
    fill(w)


def a_torch_dlpack(v, backend):
    torch = optional("torch", required_in_ci=True)
    if v.__dlpack_device__()[0] != 1 and not torch.cuda.is_available():
        pytest.skip("torch here is a CPU build: it cannot import a device value")
    torch.from_dlpack(v).mul_(7)


def a_jax_then_torch_dlpack(v, backend):
    jax = optional("jax")
    torch = optional("torch", required_in_ci=True)
    torch.from_dlpack(jax.dlpack.from_dlpack(v)).mul_(7)


ATTACKS = {name[2:]: attack for name, attack in globals().items() if name.startswith("a_")}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_no_attack_on_a_returned_value_changes_the_array(backend, scenario, attack):
    value, handle, count = SCENARIOS[scenario]()
    before = contents(handle, count)
    try:
        ATTACKS[attack](value, backend)
    except REFUSED:
        pass
    after = contents(handle, count)
    for index, (old, new_) in enumerate(zip(before, after)):
        np.testing.assert_array_equal(new_, old, err_msg=f"slot {index} changed by {attack} on a {scenario} value")


def test_numpy_values_cannot_be_made_writable(backend):
    """The NumPy backends return views, not copies: what makes them safe is that the
    WRITEABLE flag cannot be set back, on the value and on everything it leads to."""
    if backend.name == "cupy":
        pytest.skip("CuPy values are copies: CuPy has no read-only arrays")
    value, handle, _ = s_stack()
    assert not value.flags.writeable and not value.flags.owndata
    with pytest.raises(ValueError, match="WRITEABLE"):
        value.flags.writeable = True
    base = value
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, memoryview) and base.readonly and base.obj is None


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_values_export_by_dlpack(backend, scenario):
    value, _, _ = SCENARIOS[scenario]()
    expected = host(value).copy()
    if backend.name == "cupy":
        cupy = optional("cupy")
        np.testing.assert_array_equal(cupy.from_dlpack(value).get(), expected)
        return
    np.testing.assert_array_equal(np.from_dlpack(value), expected)
    torch = optional("torch", required_in_ci=True)
    np.testing.assert_array_equal(torch.from_dlpack(value).numpy(), expected)


@pytest.mark.parametrize("scenario", ["read", "stack", "ragged_concat", "scalar_read"])
def test_values_export_to_jax(backend, scenario):
    if backend.name == "cupy":
        pytest.skip("jax here is a CPU build")
    jax = optional("jax")
    value, _, _ = SCENARIOS[scenario]()
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(value)), host(value))


def test_a_zero_copy_export_is_refused(backend):
    """DLPack's copy=False asks for the storage itself: refused, as the storage is not the caller's."""
    if backend.name == "cupy":
        pytest.skip("CuPy values are copies: they export without one")
    value, _, _ = s_read()
    with pytest.raises(BufferError, match="read-only view"):
        value.__dlpack__(max_version=(1, 0), copy=False)


def test_arithmetic_on_values_gives_plain_arrays(backend):
    """Results are the caller's own: plain writable arrays that export without a copy."""
    value, _, _ = s_read()
    result = value * 2
    # CuPy's flags have no WRITEABLE: its arrays are always writable.
    assert type(result) is backend.array_type and getattr(result.flags, "writeable", True)
    np.testing.assert_array_equal(host(result), host(value) * 2)


def test_storage_outlives_its_values(backend):
    """A value keeps its memory alive after the array is closed and collected."""
    import gc

    value, handle, _ = s_stack()
    expected = np.stack([element(index) for index in range(3)])
    ro.TensorArrayCloseV3(handle)
    del handle
    gc.collect()
    junk = [np.full(1 << 16, 7.0) for _ in range(8)]     # would reuse freed memory
    np.testing.assert_array_equal(host(value), expected)
    del junk


def test_storage_is_freed_with_its_last_value(backend):
    """The roots keep storage alive only while values of it live: no leak per array."""
    if backend.name == "cupy":
        pytest.skip("CuPy values are copies: nothing is kept")
    import gc

    from gpu_tensorarray.backends import numpy as numpy_backend

    gc.collect()
    before = len(numpy_backend._kept)
    values = []
    for _ in range(5):
        value, handle, _ = s_ragged_concat()
        values.append(value)
        ro.TensorArrayCloseV3(handle)
    del value, handle
    gc.collect()
    assert len(numpy_backend._kept) > before
    del values
    gc.collect()
    assert len(numpy_backend._kept) == before
