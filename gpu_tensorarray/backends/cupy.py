"""The GPU backend: CuPy arrays on one CUDA device, kernels/*.cu through NVRTC.

Thin on purpose: allocation, transfer and launch. Everything a kernel launch
needs besides the launch itself (argument checks, geometry, index grouping) is
shared with the emulated backend, which runs it on machines without a GPU.
"""

import functools
import math
import os
import re

import cupy
import numpy as np

from .. import dtypes
from . import kernel_sources
from .arrays import is_cuda_out_of_memory, torch_bits_resolved
from ..errors import AbortedError, ResourceExhaustedError, UnavailableError
from .base import Backend, cupy_values
from .device_guard import DeviceScope
from .kernel_rows import KernelRows
from .launch import CompiledKernels
from .numpy import torch_bfloat16_on_host

__all__ = ["CupyBackend", "NVRTC_OPTIONS", "INSTALL_COMPILER", "kernel_cache_folder", "untrusted_cache"]

NVRTC_OPTIONS = ("--std=c++17",)

# CuPy stores ml_dtypes' bfloat16 from v14 on (its upgrade guide: "Minimal support
# for bfloat16"), and only beside NumPy >= 2.1.2 (cupy/_core/_scalar.pyx registers the
# type there alone: older NumPys crash on its loops); otherwise it refuses the dtype.
BFLOAT16_MINIMUM_CUPY = (14, 0)
BFLOAT16_MINIMUM_NUMPY = "2.1.2"
_CUPY_VERSION = tuple(int(part) for part in re.match(r"(\d+)\.(\d+)", cupy.__version__).groups())
_NUMPY_HOLDS_BFLOAT16 = np.lib.NumpyVersion(np.__version__) >= BFLOAT16_MINIMUM_NUMPY


# Where NVRTC and the CUDA headers come from when no CUDA toolkit is installed: the nvrtc
# extra of cuda-toolkit has the compiler only; the cudart extra has the headers
# (nvidia/cuda_runtime/include: cuda_runtime.h, cuda_fp16.h, cuda_bf16.h).
INSTALL_COMPILER = 'pip install "cuda-toolkit[nvrtc]==12.*"'
INSTALL_HEADERS = 'pip install "cuda-toolkit[cudart]==12.*"'
_MISSING_HEADER = re.compile(r"""["'<]?([\w/.-]+\.h)["'>]?:? *(?:No such file|file not found)|"""
                             r"""cannot open source file ["'<]([\w/.-]+\.h)""")


def _compiler_advice(text):
    """What is missing, named, and the command that brings it (not the one that brings
    NVRTC when NVRTC loaded: then a header is missing)."""
    header = _MISSING_HEADER.search(text)
    if header:
        name = header.group(1) or header.group(2)
        return (f"NVRTC runs, but the CUDA header {name} is missing: install the CUDA headers with "
                f"{INSTALL_HEADERS} (or point CUDA_PATH at a CUDA toolkit)")
    if "nvrtc" in text.lower() or "headers" in text.lower():
        return (f"NVRTC and the CUDA headers (cuda_fp16.h) come with a CUDA toolkit; without one, install them "
                f"with: {INSTALL_COMPILER} and {INSTALL_HEADERS}")
    return f"Without a CUDA toolkit, NVRTC and the CUDA headers come with: {INSTALL_COMPILER} and {INSTALL_HEADERS}"


def kernel_cache_folder():
    """The folder CuPy's NVRTC compiles load kernel binaries from and save them to (None: it
    keeps them in memory, CUPY_CACHE_IN_MEMORY=1): its cache backend's, else the one its
    documentation names (CUPY_CACHE_DIR, else ~/.cupy/kernel_cache)."""
    try:
        in_memory = int(os.environ.get("CUPY_CACHE_IN_MEMORY") or 0) == 1      # as CuPy reads it
    except ValueError:
        in_memory = False
    if in_memory:
        return None
    compiler = getattr(cupy.cuda, "compiler", None)
    folder = getattr(getattr(compiler, "_kernel_cache_backend", None), "_cache_dir", None)
    return folder or os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")


def untrusted_cache(folder):
    """Why ``folder`` holds binaries another user may have put there (None: only this process's
    user can write it, or it does not exist yet and CuPy will make it, with this user's umask)."""
    if folder is None or not hasattr(os, "getuid"):
        return None
    try:
        status = os.stat(folder)            # through a link: the folder it leads to
    except OSError:
        return None
    if status.st_uid != os.getuid():
        return f"{folder} belongs to user {status.st_uid}, not to this process's user ({os.getuid()})"
    if status.st_mode & 0o002 or (status.st_mode & 0o020 and not _own_group(status.st_gid, status.st_uid)):
        return f"{folder} can be written by its group or by others (mode {status.st_mode & 0o777:o})"
    return None


def _own_group(gid, uid):
    """Whether group ``gid`` has one member, user ``uid`` (a user private group, the group a umask of
    002 leaves writable): OpenSSH's rule for a group-writable file of one's own."""
    import grp
    import pwd
    try:
        owner = pwd.getpwuid(uid).pw_name
        listed = grp.getgrgid(gid).gr_mem
    except KeyError:
        return False
    primary = {entry.pw_uid for entry in pwd.getpwall() if entry.pw_gid == gid}
    return primary <= {uid} and set(listed) <= {owner} and bool(primary or listed)


@functools.cache
def _raw_module():
    # One module over every instantiation; CuPy compiles it once per device (and,
    # from the version pyproject.toml requires, caches the binary on disk).
    return cupy.RawModule(code=kernel_sources.module_source(), options=NVRTC_OPTIONS,
                          name_expressions=kernel_sources.name_expressions())


# CUDA cannot be used in a child that fork made after the parent initialised it: every
# call fails there (cudaErrorInitializationError). Such a child learns it here, at once.
NO_CUDA_AFTER_FORK = ("CUDA, initialised in the parent, does not work in a child process made by fork (use "
                      "CUDA in the parent alone, or start processes with multiprocessing's 'spawn' method)")
_cuda_started = False           # a CupyBackend exists in this process: CUDA is initialised
_forked_after_cuda = False


def _after_fork_in_child():
    global _forked_after_cuda
    _forked_after_cuda = _cuda_started


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _check_not_forked(device):
    if _forked_after_cuda:
        raise AbortedError(f"{device} cannot be used in this process: {NO_CUDA_AFTER_FORK}")


class _CupyModule(CompiledKernels):
    """Launches on CuPy's current stream; the backend enters its device first."""

    def _load_function(self, kernel, dtype):
        return _raw_module().get_function(kernel_sources.name_expression(kernel, dtype))

    def run(self, kernel, dtype, blocks, threads, args):
        self.function(kernel, dtype)((blocks,), (threads,), args)


class _CopyingIndexer:
    """An allocation's stand-in for a read-only view: what indexing gives is a copy."""

    __slots__ = ("_array", "_backend")

    def __init__(self, array, backend):
        self._array, self._backend = array, backend

    def __getitem__(self, key):
        def copy():
            with self._backend._device:
                return _copy_of(self._array[key])
        # The copy's size is known only once indexed: the door still words running out.
        return self._backend.allocate(copy, 0, "a copy of a value")


def _copy_of(array):
    """A copy of a device array on its device: a C-contiguous one by one memcpy, not
    by copy(), an elementwise kernel that costs more to launch."""
    if array.size == 0 or not array.flags.c_contiguous:
        return array.copy()
    out = cupy.empty(array.shape, array.dtype)
    out.data.copy_from_device_async(array.data, array.nbytes)
    return out


class _CudaDevice:
    """What an array's device step (device_guard.DeviceScope) needs of one CUDA device."""

    __slots__ = ("_index",)

    def __init__(self, index):
        self._index = index

    def activate(self):
        if _forked_after_cuda:                  # a flag per op, a call only when it is set
            _check_not_forked(f"cuda:{self._index}")
        previous = cupy.cuda.runtime.getDevice()
        if previous == self._index:
            return None
        cupy.cuda.runtime.setDevice(self._index)
        return previous

    def restore(self, previous):
        if previous is not None:
            cupy.cuda.runtime.setDevice(previous)

    def current_stream(self):
        return cupy.cuda.get_current_stream()

    def per_thread(self, stream):
        # cudaStreamPerThread names the calling thread's own default stream (the legacy
        # one, 0, is one stream for every thread).
        return stream.ptr == cupy.cuda.runtime.streamPerThread

    def new_event(self):
        return cupy.cuda.Event(disable_timing=True)

    def synchronize(self):
        cupy.cuda.runtime.deviceSynchronize()


class CupyBackend(KernelRows, Backend):
    name = "cupy"
    out_of_memory_errors = (cupy.cuda.memory.OutOfMemoryError, MemoryError, ValueError)
    native_type = None          # a CuPy value may live on another device: asarray checks
    values_are_copies = True    # readonly(): CuPy has no read-only arrays
    unusable_after_fork = NO_CUDA_AFTER_FORK

    def __init__(self, device_index=None):
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as error:
            raise UnavailableError(f"No usable CUDA device: {error}") from None
        index = cupy.cuda.runtime.getDevice() if device_index is None else device_index
        if not 0 <= index < count:
            raise UnavailableError(f"No CUDA device cuda:{index}; this machine has {count}")
        super().__init__(device=f"cuda:{index}")
        global _cuda_started
        _cuda_started = True
        self.array_type = cupy.ndarray
        self._device = cupy.cuda.Device(index)
        self._cuda_device = _CudaDevice(index)
        self._module = _CupyModule()
        self._memory_total = None
        # Atomics older GPUs lack (float64 before sm_60, float16 before sm_70, bfloat16
        # before sm_80) add deterministically there.
        self.atomic_dtypes = kernel_sources.atomic_dtypes(self._device.compute_capability)
        self._compile()

    def holds(self, array):
        return array.device.id == self._device.id

    def out_of_memory(self, error):
        return isinstance(error, self.out_of_memory_errors) or is_cuda_out_of_memory(error)

    def _compile(self):
        """Compile (or load from CuPy's cache) the kernels now, so that a missing
        NVRTC or CUDA header shows here, where the automatic choice can fall back."""
        problem = untrusted_cache(kernel_cache_folder())
        if problem is not None:
            raise UnavailableError(f"CuPy's kernel cache folder {problem}: CuPy runs any kernel binary it finds "
                                   f"there under the name it computes, so another user could run theirs in this "
                                   f"process. Set CUPY_CACHE_DIR to a folder only you can write (the default, "
                                   f"~/.cupy/kernel_cache, is one), or CUPY_CACHE_IN_MEMORY=1")
        try:
            with self._device:
                _raw_module().compile()
        except Exception as error:      # CompileException, or NVRTC's library not found
            text = str(error).strip()
            raise UnavailableError(f"CuPy cannot compile the kernels for {self.device} ({type(error).__name__}: "
                                   f"{text[:2000]}). {_compiler_advice(text)}") from None

    # -- KernelRows hooks -----------------------------------------------------------------
    def _context(self):
        return self._device

    def _device_indices(self, host_indices):
        return self._allocated(lambda: cupy.asarray(np.ascontiguousarray(host_indices, dtype=np.int64)),
                               host_indices.shape, np.int64, "indices")

    # -- allocation and transfer ----------------------------------------------------------
    def empty(self, shape, dtype):
        return self._allocated(lambda: cupy.empty(shape, dtype), shape, dtype)

    def zeros(self, shape, dtype):
        return self._allocated(lambda: cupy.zeros(shape, dtype), shape, dtype)

    def contiguous(self, array, dtype):
        if isinstance(array, cupy.ndarray) and array.dtype == dtype and array.flags.c_contiguous:
            return array
        if not isinstance(array, cupy.ndarray) and np.ndim(array) == 0:
            return self.from_host(np.asarray(array, dtype))
        if array.ndim == 0:
            # CuPy's ascontiguousarray makes a 0-d array 1-d (core.pyx: shape (1,)).
            return self._allocated(lambda: cupy.ascontiguousarray(array, dtype=dtype).reshape(()), (), dtype,
                                   "a contiguous copy of a value")
        return self._allocated(lambda: cupy.ascontiguousarray(cupy.asarray(array), dtype=dtype), array.shape, dtype,
                               "a contiguous copy of a value")

    def _allocated(self, make, shape, dtype, what="tensor"):
        _check_dtype(dtype)

        def on_device():
            _check_not_forked(self.device)
            if 0 in shape:
                # CuPy accepts any empty shape, but its get() builds it with NumPy, which
                # refuses extents multiplying past its limit (ValueError): refused here,
                # as on the numpy backend, so that every value comes back to the host.
                np.empty(shape, dtype)
            with self._device:
                return make()
        return self.allocate(on_device, math.prod(shape) * np.dtype(dtype).itemsize,
                             lambda: f"{what} of shape {list(shape)}")

    def from_host(self, host_array):
        if host_array.ndim == 0:
            # CuPy fills a 0-d array instead of copying it, and fills zero with a memset:
            # -0.0 would arrive as +0.0. One element copied keeps every bit.
            return self._allocated(lambda: cupy.asarray(host_array.reshape(1)).reshape(()), (), host_array.dtype,
                                   "a copy of a value")
        return self._allocated(lambda: cupy.asarray(host_array), host_array.shape, host_array.dtype,
                               "a copy of a value")

    def asarray(self, value, dtype=None):
        if isinstance(value, cupy.ndarray) and value.device.id != self._device.id:
            return self.from_foreign(value)
        return super().asarray(value, dtype)

    def from_foreign(self, value):
        if not isinstance(value, cupy.ndarray):
            if not hasattr(value, "__dlpack__"):
                return None
            value = torch_bits_resolved(value)
            try:
                value = cupy.from_dlpack(value)   # zero-copy, on the producer's device
            except (TypeError, ValueError, RuntimeError, BufferError):
                # A host producer, which CuPy 14 refuses (TypeError): through NumPy, as CuPy
                # advises, except torch's bfloat16, which NumPy's DLPack cannot read.
                host = torch_bfloat16_on_host(value)
                if host is None:
                    host = _host_dlpack(value)
                return None if host is None else self.from_host(host)
        if value.device.id == self._device.id:
            return value
        with value.device:
            if value.size and not value.flags.c_contiguous:
                # CuPy's copy() across devices first makes a C-contiguous copy on the value's
                # device, by a kernel on that device's current stream (core.pyx, copy): made
                # here, so that the event below comes after it.
                value = self._staged(value)
            # The value is ready in the order of its device's current stream: the copy
            # (on this device's current stream) comes after what that stream has queued.
            ready = cupy.cuda.Event(disable_timing=True)
            ready.record()
        with self._device:
            cupy.cuda.get_current_stream().wait_event(ready)
            # CuPy copies across devices into the current one (through the door: a full device
            # is ResourceExhaustedError, with or without CuPy's pool)
            copied = self.allocate(value.copy, value.nbytes, lambda: f"a copy of a value from cuda:{value.device.id}")
            done = cupy.cuda.Event(disable_timing=True)
            done.record()
        with value.device:
            # The copy is queued, not done: the value's stream, where its owner changes it next and
            # where the pool hands a staged copy's memory out again once it is dropped (CuPy frees
            # to the allocating stream's arena, with no event), goes on only after it.
            cupy.cuda.get_current_stream().wait_event(done)
        return copied

    def _staged(self, value):
        """A C-contiguous copy of ``value`` made on its own device, which is current: the
        allocation door's error (allocate()'s), naming that device, when it has no room."""
        try:
            return cupy.ascontiguousarray(value)
        except Exception as error:
            if not self.out_of_memory(error):
                raise
            raise ResourceExhaustedError(f"OOM when allocating a contiguous copy of a value ({value.nbytes} bytes) "
                                         f"on cuda:{value.device.id}: {error}") from None

    def to_numpy(self, array):
        if not isinstance(array, cupy.ndarray):
            return np.asarray(array)
        return cupy_values(array)

    def copy(self, array):
        with self._device:
            return cupy.array(array, copy=True)

    def array_device(self):
        return DeviceScope(self._cuda_device)

    def array_hold(self, step):
        return step.hold

    def readonly(self, array):
        # CuPy has no read-only arrays, and any view could be written through (or
        # exported by DLPack as writable): values are copies.
        return _CopyingIndexer(array, self)

    def memory_limit(self):
        # The device's total memory, a constant: asked once (memGetInfo is a driver call,
        # and a layout asks before each growth).
        if self._memory_total is None:
            with self._device:
                self._memory_total = cupy.cuda.runtime.memGetInfo()[1]
        return self._memory_total

    def synchronize(self):
        self._device.synchronize()

    def prepare_concatenate(self, shapes, dtype):
        out = self.empty((sum(shape[0] for shape in shapes),) + tuple(shapes[0][1:]), dtype)

        def join(arrays):
            with self._device:
                try:
                    return cupy.concatenate(arrays, axis=0, out=out)
                except Exception as error:
                    # Of more than 8 small pieces CuPy uploads a table of their addresses
                    # (_concatenate_single_kernel): an allocation of its own.
                    if not self.out_of_memory(error):
                        raise
                    raise ResourceExhaustedError(f"OOM when joining {len(arrays)} pieces on {self.device}: "
                                                 f"{error}") from None
        return join


def _host_dlpack(value):
    """A host DLPack producer's tensor as NumPy, or None when it is not on the host."""
    try:
        if value.__dlpack_device__()[0] != _DLPACK_CPU:
            return None
        return np.from_dlpack(value)
    except (TypeError, ValueError, RuntimeError, BufferError, AttributeError):
        return None


_DLPACK_CPU = 1                 # DLDeviceType kDLCPU


def _check_dtype(dtype):
    if dtypes.name_of(dtype) != dtypes.BFLOAT16:
        return
    if _CUPY_VERSION < BFLOAT16_MINIMUM_CUPY:
        raise UnavailableError(
            f"bfloat16 arrays on the cupy backend need CuPy >= {'.'.join(map(str, BFLOAT16_MINIMUM_CUPY))} "
            f"(installed: {cupy.__version__}); use the numpy backend or upgrade CuPy")
    if not _NUMPY_HOLDS_BFLOAT16:
        raise UnavailableError(
            f"bfloat16 arrays on the cupy backend need NumPy >= {BFLOAT16_MINIMUM_NUMPY}, beside which alone CuPy "
            f"holds the dtype (installed: {np.__version__}); use the numpy backend or upgrade NumPy")
