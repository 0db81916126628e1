"""Values across the torch boundary, without copies where sharing is safe.

In: a torch tensor becomes a backend array that shares its memory (``Tensor.numpy()``
on the CPU, DLPack on a GPU, on the tensor's device); the array's write/scatter/split
then copy it into the array's storage, so the caller's tensor is never aliased.

Out: what read/gather/stack/concat return is, on the CPU, either a fresh array (torch
takes it without a copy) or a read-only view of the array's storage (copied: torch
has no read-only tensors, and an in-place op on the result must never change the
array). CuPy has no read-only arrays, so every value leaving a cupy array is copied.

torch.bfloat16 crosses as its 16 bits (an int16 view on either side), since neither NumPy
nor DLPack's consumers all know the type; the library holds it as ml_dtypes' bfloat16.

On a GPU, every CuPy call runs inside ``cuda_scope``: CuPy's current stream is torch's
current stream on the array's device, so work and DLPack hand-overs are ordered on
one stream and nothing synchronises.
"""

import contextlib
import functools
import sys

import numpy as np
import torch

from .. import dtypes
from ..backends.arrays import torch_bits_resolved
from ..errors import (InternalError, InvalidArgumentError, OpError, ResourceExhaustedError, UnimplementedError, about,
                      described)
from ..host import element_count

__all__ = ["as_dtype", "torch_dtype", "to_backend", "to_torch", "from_host", "zeros", "cuda_scope", "host_value",
           "unsupported_transform", "refuse_tangent", "refuse_tracing", "refused"]

# torch dtype -> the library's dtype: the one table both directions use. torch.bfloat16 joins
# it when first asked for (_bfloat16): ml_dtypes, which holds it for NumPy, is optional.
_TO_LIBRARY = {
    torch.bool: np.dtype("bool"),
    torch.int8: np.dtype("int8"), torch.int16: np.dtype("int16"),
    torch.int32: np.dtype("int32"), torch.int64: np.dtype("int64"),
    torch.uint8: np.dtype("uint8"), torch.uint16: np.dtype("uint16"),
    torch.uint32: np.dtype("uint32"), torch.uint64: np.dtype("uint64"),
    torch.float16: np.dtype("float16"), torch.float32: np.dtype("float32"), torch.float64: np.dtype("float64"),
    torch.complex64: np.dtype("complex64"), torch.complex128: np.dtype("complex128"),
}
_TO_TORCH = {library: torch_type for torch_type, library in _TO_LIBRARY.items()}
_NUMPY_KNOWS = frozenset(_TO_LIBRARY)          # torch dtypes Tensor.numpy() converts


def _supported_torch_names():
    return ", ".join([str(t) for t in _TO_LIBRARY if t is not torch.bfloat16] + ["torch.bfloat16 (with ml_dtypes)"])


def _bfloat16(owner=None):
    """ml_dtypes' bfloat16, now in both tables (UnimplementedError without ml_dtypes)."""
    dtype = dtypes.bfloat16(owner)
    _TO_TORCH[dtype] = torch.bfloat16
    _TO_LIBRARY[torch.bfloat16] = dtype
    return dtype


def as_dtype(spec, owner=None):
    """The library (NumPy) dtype for a torch dtype, or for any other spelling gpu_tensorarray
    accepts of a dtype torch has too (not strings)."""
    if isinstance(spec, torch.dtype):
        dtype = _TO_LIBRARY.get(spec)
        if dtype is None and spec is torch.bfloat16:
            dtype = _bfloat16(owner)
    else:
        dtype = dtypes.as_dtype(spec, owner)
        if dtype not in _TO_TORCH and dtypes.name_of(dtype) == dtypes.BFLOAT16:
            dtype = _bfloat16(owner)
    if dtype not in _TO_TORCH:
        raise InvalidArgumentError(f"Unsupported dtype {spec}; supported torch dtypes: "
                                   f"{_supported_torch_names()}{about(owner)}")
    return dtype


def torch_dtype(dtype):
    """The torch dtype for a library dtype (or any spelling ``as_dtype`` accepts)."""
    return _TO_TORCH[as_dtype(dtype)]


def host_value(value):
    """Indices, lengths and sizes given as torch tensors, as NumPy (the library checks them)."""
    if isinstance(value, torch.Tensor):
        try:
            return value.detach().cpu().numpy()
        except Exception:
            if refused(value, None) is None and value.dtype in _NUMPY_KNOWS:
                raise
            # A sparse, meta or nested tensor, or a dtype NumPy lacks (bfloat16): the library's
            # checks refuse it by name.
            return value
    return value


# What torch raises when its allocator finds no memory (torch.cuda's name before torch 2.5).
_TORCH_OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def zeros(shape, dtype, device, backend):
    """``torch.zeros(shape)`` on ``device`` through ``backend``'s allocation door: a request past
    the memory there is ResourceExhaustedError before torch allocates, as the library's own zeros
    are, and so is torch's failure to allocate (a plain RuntimeError on the CPU); anything else
    torch raises (a CUDA error of the device's) is InternalError."""
    nbytes = element_count(shape) * dtype.itemsize
    what = f"tensor of shape {list(shape)}"
    try:
        return backend.allocate(lambda: torch.zeros(shape, dtype=dtype, device=device), nbytes, what)
    except OpError:
        raise
    except RuntimeError as error:
        if out_of_memory(error):
            raise ResourceExhaustedError(f"OOM when allocating {what} ({nbytes} bytes) on {device}: {error}") from None
        raise InternalError(f"torch could not make the zeros of an unwritten slot ({what} on {device}): "
                            f"{error}") from None


def out_of_memory(error):
    """Whether torch's error is its allocator's: an OutOfMemoryError on a GPU, a plain RuntimeError
    on the CPU."""
    return isinstance(error, _TORCH_OUT_OF_MEMORY) or "can't allocate memory" in str(error)


def joined(join, tensors, what):
    """``join(tensors)`` (torch.stack or torch.cat of values read): torch failing to allocate the
    result is ResourceExhaustedError, as the library's own joins fail."""
    try:
        return join(tensors)
    except RuntimeError as error:
        if not out_of_memory(error):
            raise
        raise ResourceExhaustedError(f"OOM when joining {len(tensors)} values into {what}: {error}") from None


def host_copy(array, what):
    """A copy of a NumPy array of the library's (a view of storage) for torch to own; running out
    of host memory is ResourceExhaustedError."""
    try:
        return np.array(array)
    except MemoryError as error:
        raise ResourceExhaustedError(f"OOM when copying {what} of shape {list(array.shape)} out of the array on "
                                     f"the host: {described(error)}") from None


def to_backend(value, backend, owner=None):
    """A caller's value for a write/scatter/split on ``backend``: a torch tensor as an
    array sharing its memory (a host<->device copy only when the tensor lives on the
    other side); anything else as it is, for the library to convert."""
    if type(value) is torch.Tensor and backend.name != "cupy" and value.dtype is not torch.bfloat16:
        try:
            # The common case in one call: a CPU tensor's own memory; a tensor on another
            # device, or with a conj or neg bit, as a copy (the op copies it anyway). A dtype
            # NumPy lacks is refused, and the general path below reports it.
            return value.numpy(force=True)
        except (RuntimeError, TypeError):
            pass
    if not isinstance(value, torch.Tensor):
        return value
    if torch._C._are_functorch_transforms_active():     # a wrapped tensor: it has no memory to share
        raise unsupported_transform(owner)
    dtype = _TO_LIBRARY.get(value.dtype)
    if dtype is None:
        if value.dtype is not torch.bfloat16:
            raise InvalidArgumentError(f"A torch tensor of dtype {value.dtype} cannot be stored; supported torch "
                                       f"dtypes: {_supported_torch_names()}{about(owner)}")
        dtype = _bfloat16(owner)
    try:
        value = torch_bits_resolved(value)            # (detached, if it requires grad)
        bits = value.dtype is torch.bfloat16
        if bits:
            value = value.view(torch.int16)
        if backend.name == "cupy" and value.is_cuda:
            cupy = sys.modules["cupy"]
            # Inside cuda_scope: the tensor's producer and CuPy share the stream, so the
            # DLPack hand-over waits for nothing. A tensor on another device is copied onto the
            # array's here, while CuPy's current stream on its own device is still torch's: the
            # copy then comes after the tensor's producer, and torch's stream waits for the copy
            # before it can reuse the tensor's memory.
            with cuda_scope_for_index(value.device.index):
                array = cupy.from_dlpack(value.contiguous())
                if bits:
                    array = array.view(dtype)
                if value.device.index != _device_index(backend):
                    array = backend.asarray(array)
            return array
        array = value.cpu().numpy()
        return array.view(dtype) if bits else array
    except (RuntimeError, TypeError, BufferError) as error:
        if out_of_memory(error):      # contiguous() or cpu() allocate through torch
            raise ResourceExhaustedError(f"OOM when copying a value of shape {list(value.shape)} on {value.device} "
                                         f"to store it: {error}{about(owner)}") from None
        # Which tensors cannot cross is asked only here, once one failed: the common path pays nothing.
        refusal = refused(value, owner)
        if refusal is None:
            raise
        raise refusal from None


# Legacy vmap's batched tensors (older torch has no such query: its batched gradients fail as torch reports).
_is_legacy_batched = getattr(torch._C._functorch, "is_legacy_batchedtensor", lambda value: False)


def refused(value, owner):
    """The error for a tensor that cannot cross (None: it is not one of those)."""
    if _is_legacy_batched(value):        # a gradient of torch.autograd.grad(is_grads_batched=True)
        return unsupported_transform(owner)
    if value.is_nested or value.layout != torch.strided:
        what = "A nested tensor" if value.is_nested else f"A tensor of layout {value.layout}"
    elif value.is_meta:
        what = "A meta tensor (it has no data)"
    elif torch._C._dispatch_keys(value).has(torch._C.DispatchKey.Python):
        # A __torch_dispatch__ subclass (FakeTensor, torch.export's FunctionalTensor, a wrapper) has no
        # memory of its own to copy; a plain subclass (nn.Parameter, one of the caller's) has.
        what = f"A tensor subclass ({type(value).__name__}; torch.export and FakeTensor tracing included)"
    else:
        return None
    return InvalidArgumentError(f"{what} cannot be stored: a TensorArray holds dense tensors (layout torch.strided, "
                                f"with data: write a sparse tensor's value.to_dense()){about(owner)}")


def refuse_tracing():
    """UnimplementedError inside torch.jit.trace, whose graph would hold none of the array's ops: a
    traced module would return the example input's values for any input."""
    if torch._C._get_tracing_state() is not None:
        raise UnimplementedError(
            "gpu_tensorarray.torch: TensorArrays cannot be traced by torch.jit.trace (TorchScript): the trace "
            "would record none of their ops. Run the module eagerly, or under torch.compile (docs/torch.md)")


def unsupported_transform(owner=None):
    return UnimplementedError(
        f"gpu_tensorarray.torch: TensorArray ops under torch.func transforms (grad, vmap, jacrev, ...) or with "
        f"batched gradients (torch.autograd.grad(is_grads_batched=True), torch.autograd.functional's "
        f"vectorize=True) are not supported: differentiate with torch.autograd, one gradient at a time (backward, "
        f"torch.autograd.grad; create_graph=True for higher orders){about(owner)}")


def refuse_tangent(value, owner):
    """Inside a forward-AD dual level: UnimplementedError for a value that carries a tangent, which
    the array would drop (its ops are recorded for reverse mode only)."""
    if torch._C._are_functorch_transforms_active():      # torch.func.jvp, jacfwd: their own refusal
        raise unsupported_transform(owner)
    if isinstance(value, torch.Tensor) and torch.autograd.forward_ad.unpack_dual(value).tangent is not None:
        raise UnimplementedError(
            f"TensorArray {getattr(owner, 'name', owner)}: forward-mode AD (torch.autograd.forward_ad, a dual "
            f"tensor) is not supported: the array would drop the value's tangent. Differentiate in reverse mode "
            f"with torch.autograd (backward, torch.autograd.grad; torch.autograd.functional.jvp gives a "
            f"Jacobian-vector product by reverse mode)")


@functools.cache
def torch_has_cuda():
    """``torch.cuda.is_available()``, asked once: every GPU op crosses here, and the answer
    is fixed once torch has looked (a child made by fork cannot use CUDA either way)."""
    return torch.cuda.is_available()


# The raw handle of torch's current stream on a device: what torch.cuda.current_stream(i)
# .cuda_stream gives, without building a Stream object (torch's compiled code calls it so).
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def to_torch(array, backend):
    """An array the library returned, as a torch tensor on the array's device that no
    in-place torch op can use to change the array."""
    if backend.name == "cupy":
        cupy = sys.modules["cupy"]
        try:
            if not torch_has_cuda():                # a CPU-only torch next to a CuPy array
                return from_host(cupy.asnumpy(array))
            copy = array.copy()                     # inside cuda_scope: no synchronisation
        except MemoryError as error:                # (CuPy's OutOfMemoryError is one)
            raise ResourceExhaustedError(f"OOM when copying a value read of shape {list(array.shape)} for torch: "
                                         f"{described(error)}") from None
        if _TO_TORCH.get(copy.dtype) is torch.bfloat16:     # as its bits, which every DLPack consumer reads
            return torch.from_dlpack(copy.view(np.int16)).view(torch.bfloat16)
        return torch.from_dlpack(copy)
    if type(array) is not np.ndarray:
        array = np.asarray(array)
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = host_copy(array, "a value read")    # a view of storage (or a layout torch refuses)
    return from_host(array)


def from_host(array):
    """A NumPy array of the caller's own (fresh, writable) as a torch tensor over its memory;
    bfloat16 (ml_dtypes', a kind "V" dtype to NumPy), which torch's NumPy import lacks, by its bits."""
    if array.dtype.kind == "V" and _TO_TORCH.get(array.dtype) is torch.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


# -- streams ---------------------------------------------------------------------------------

_external_streams = {}       # (device index, torch stream pointer) -> cupy.cuda.Stream over it


class _TorchStream:
    """torch's current stream by its raw handle, under the CUDA stream protocol, which CuPy's
    Stream.from_external takes (CuPy 14 deprecates ExternalStream)."""

    __slots__ = ("_pointer",)

    def __init__(self, pointer):
        self._pointer = pointer

    def __cuda_stream__(self):
        return (0, self._pointer)


class _Scope:
    """CuPy's current device and stream set to one device and torch's current stream there."""

    __slots__ = ("_device", "_stream")

    def __init__(self, device, stream):
        self._device, self._stream = device, stream

    def __enter__(self):
        self._device.__enter__()
        if self._stream is not None:
            try:
                self._stream.__enter__()
            except BaseException:           # the scope is not entered: nor is its device
                self._device.__exit__(None, None, None)
                raise

    def __exit__(self, *exc_info):
        if self._stream is not None:
            self._stream.__exit__(*exc_info)
        self._device.__exit__(*exc_info)
        return False


def cuda_scope_for_index(index):
    cupy = sys.modules["cupy"]
    if index is None:
        index = cupy.cuda.runtime.getDevice()
    stream = None
    if torch_has_cuda():
        pointer = _current_raw_stream(index) if _current_raw_stream else torch.cuda.current_stream(index).cuda_stream
        stream = _external_streams.get((index, pointer))
        if stream is None:
            # torch's default stream (0) by its explicit name, the legacy stream: CuPy takes a
            # current stream of 0 for the per-thread one under CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1,
            # and would launch there, unordered with torch's work. Its device is unknown to CuPy
            # (-1): _Scope always enters the stream's device first.
            with cupy.cuda.Device(index):       # (CuPy 14.2 labels it device -1; earlier ones, the current)
                stream = _external_streams[index, pointer] = cupy.cuda.Stream.from_external(
                    _TorchStream(pointer or cupy.cuda.runtime.streamLegacy))
    return _Scope(cupy.cuda.Device(index), stream)


_NO_SCOPE = contextlib.nullcontext()


def _device_index(backend):
    return int(backend.device.rpartition(":")[2])


def cuda_scope(backend):
    """Where the array's CuPy work runs: torch's current stream on its device (nothing on the CPU)."""
    if backend.name != "cupy":
        return _NO_SCOPE
    return cuda_scope_for_index(_device_index(backend))
