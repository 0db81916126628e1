"""Recognising a CuPy array, and CuPy's out-of-memory errors, without importing CuPy; a torch
tensor's lazy bits resolved, without importing torch.

A value can only be a CuPy array (a torch tensor) when CuPy (torch) has been imported already,
so the checks look in sys.modules: ``import gpu_tensorarray`` imports neither.
"""

import sys

__all__ = ["is_cupy_array", "is_cuda_out_of_memory", "cupy_to_host", "torch_bits_resolved"]


def is_cupy_array(value):
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(value, cupy.ndarray)


# CUDA's cudaErrorMemoryAllocation (cudaError_t). CuPy's runtime module names it in C only
# (runtime.pxd's cdef int): Python sees no cupy.cuda.runtime.errorMemoryAllocation.
_CUDA_ERROR_MEMORY_ALLOCATION = 2


def is_cuda_out_of_memory(error):
    """Whether ``error`` is CUDA's own out-of-memory error as CuPy raises it where no pool
    stands between (``cupy.cuda.set_allocator(None)``: cudaMalloc's cudaErrorMemoryAllocation),
    which only CuPy's pools turn into OutOfMemoryError."""
    cupy = sys.modules.get("cupy")
    return (cupy is not None and isinstance(error, cupy.cuda.runtime.CUDARuntimeError)
            and getattr(error, "status", None) == _CUDA_ERROR_MEMORY_ALLOCATION)


def cupy_to_host(array):
    """A CuPy array's values as a NumPy array. CuPy's ``get()`` copies on the current
    device's current stream, so the array's own device is made current first: the copy
    then comes after the work queued there (and a strided array, made contiguous first
    inside ``with stream:``, does not meet another device's stream, which CuPy refuses).
    Memory running out for the copy (the device's, with CuPy's pool or without, or the
    host's) raises MemoryError saying so, for the caller to name what it copied."""
    try:
        with array.device:
            return array.get()
    except Exception as error:
        if isinstance(error, MemoryError) or is_cuda_out_of_memory(error):
            raise MemoryError(f"OOM when copying a value of {array.nbytes} bytes from cuda:{array.device.id} to the "
                              f"host: {error}") from None
        raise


def torch_bits_resolved(value):
    """A torch tensor with its lazy conjugate or negative bit set (``z.conj()``, ``z.conj().imag``),
    as its values: DLPack carries neither bit; torch refuses to export the one and exports the
    other's memory as it is (the values' negatives). And one that requires grad, detached: torch
    exports none (BufferError), and a CUDA one has no host copy to fall back on."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.requires_grad:
            value = value.detach()
        if value.is_conj():
            value = value.resolve_conj()
        if value.is_neg():
            value = value.resolve_neg()
    return value
