"""Values from other array libraries: anything speaking DLPack, torch tensors, CuPy
arrays. They land on the array's backend with their dtype and values intact."""

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops


class DLPackOnly:
    """A producer that offers nothing but the DLPack protocol."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def _write_then_scatter(value, batch, dtype, shape):
    """Slot 0 written with ``value``, slot 1 scattered from ``batch`` (one row); both read back."""
    handle, flow = raw_ops.TensorArrayV3(2, dtype, element_shape=shape)
    raw_ops.TensorArrayWriteV3(handle, 0, value, flow)
    raw_ops.TensorArrayScatterV3(handle, [1], batch, flow)
    return gta.to_numpy(raw_ops.TensorArrayGatherV3(handle, [0, 1], flow, dtype))


def test_any_dlpack_producer(backend):
    host = np.arange(6, dtype=np.float64).reshape(2, 3)
    stacked = _write_then_scatter(DLPackOnly(host), DLPackOnly(host[None]), "float64", (2, 3))
    np.testing.assert_array_equal(stacked, np.stack([host, host]))


def test_torch_tensors(backend):
    torch = pytest.importorskip("torch")
    tensor = torch.arange(4, dtype=torch.float32)
    stacked = _write_then_scatter(tensor, tensor[None], "float32", (4,))
    np.testing.assert_array_equal(stacked, np.stack([np.arange(4, dtype=np.float32)] * 2))


def test_torch_tensors_that_require_grad_are_stored_as_their_values(backend):
    """torch exports no tensor that requires grad (DLPack's BufferError, and numpy() refuses it);
    the library, which keeps no gradient of a raw op's value, stores its values."""
    torch = pytest.importorskip("torch")
    tensor = torch.arange(4, dtype=torch.float32).requires_grad_()
    stacked = _write_then_scatter(tensor, tensor[None] * 2, "float32", (4,))
    np.testing.assert_array_equal(stacked, np.stack([np.arange(4, dtype=np.float32), 2 * np.arange(4, dtype=np.float32)]))


def test_torch_tensors_with_the_negative_or_conjugate_bit_set_keep_their_values(backend):
    # torch's lazy negation (z.conj().imag) is a bit DLPack does not carry: torch exports the
    # memory un-negated. The value is the tensor's, as tolist() gives it.
    torch = pytest.importorskip("torch")
    complex_values = torch.tensor([[1 + 1j, 2j, -3 + 0.5j]], dtype=torch.complex64)
    negated = complex_values.conj().imag
    assert negated.is_neg()
    expected = np.array(negated.tolist(), np.float32)
    stacked = _write_then_scatter(negated[0], negated, "float32", (3,))
    np.testing.assert_array_equal(stacked, np.stack([expected[0], expected[0]]))
    ta = gta.TensorArray("float32", size=1).write(0, negated[0])
    np.testing.assert_array_equal(gta.to_numpy(ta.read(0)), expected[0])
    conjugated = complex_values.conj()           # the conjugate bit, which torch refuses to export
    assert conjugated.is_conj()
    ta = gta.TensorArray("complex64", size=1).write(0, conjugated[0])
    np.testing.assert_array_equal(gta.to_numpy(ta.read(0)), np.array(conjugated.tolist(), np.complex64)[0])


def test_cupy_arrays(backend):
    cupy = pytest.importorskip("cupy")
    try:
        value = cupy.arange(3, dtype=cupy.int32)
    except Exception as error:  # CuPy installed without a usable GPU
        pytest.skip(f"CuPy has no usable GPU: {error}")
    stacked = _write_then_scatter(value, value[None], "int32", (3,))
    np.testing.assert_array_equal(stacked, np.stack([np.arange(3, dtype=np.int32)] * 2))


def test_a_foreign_value_of_the_wrong_dtype_is_the_ops_dtype_error(backend):
    handle, flow = raw_ops.TensorArrayV3(1, "float32")
    with pytest.raises(gta.errors.InvalidArgumentError, match="but Op is trying to write dtype double"):
        raw_ops.TensorArrayWriteV3(handle, 0, DLPackOnly(np.zeros(2)), flow)
