// Scatter-add on the CPU for the numpy backend: dst[indices[k], :] += rows[k, :]
// for k = 0, 1, ..., n_rows - 1, duplicates allowed.
//
// Every element of dst receives its rows in arrival order, one add_values
// (kernels/common.cuh) at a time, which is exactly TensorFlow's order and
// arithmetic (np.add.at's, but for the subnormals TensorFlow flushes), so the result is
// bitwise TensorFlow's. The inner loop vectorises
// without changing any sum (each column is its own sequence).
//
// A CPython extension module rather than a plain library: a call takes its arrays
// through the buffer protocol, where ctypes needs each array's address from Python,
// which costs more than a small add. Built when the package is installed
// (setup.py: the optional extension gpu_tensorarray._cpu_add_rows), never by NVRTC;
// backends/cpu_kernels.py imports it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

// On x86-64 the loop runs with the CPU's flush-to-zero and denormals-are-zero flags set, as
// TensorFlow runs its CPU kernels: that is common.cuh's flush, done by the adds themselves (an
// explicit one per operand and sum adds several instructions to each vectorised add).
// Elsewhere the explicit flush stays.
#if defined(__x86_64__) && defined(__SSE2__)
#define GPU_TENSORARRAY_CPU_FLUSHES 1
#include <xmmintrin.h>
#endif
#include "common.cuh"

// The flags for one call, then as they were: other code on this thread sees no change.
struct FlushScope {
#ifdef GPU_TENSORARRAY_CPU_FLUSHES
    const unsigned int saved = _mm_getcsr();
    FlushScope() { _mm_setcsr(saved | 0x8040u); }      // FTZ (bit 15) and DAZ (bit 6)
    ~FlushScope() { _mm_setcsr(saved); }
#endif
};

// What a call answers: the rows were added; or nothing was written, because an index
// or a flag refused it, or because the rows overlap dst (np.add.at reads rows as they
// were, which a loop over shared memory would not: the caller must copy them first).
enum AddStatus { ADDED = 0, REFUSED = 1, OVERLAP = 2 };

// Refused (nothing written) when an index is outside [0, n_dst), or, with ``flags``,
// when the flag byte of a destination is not ``required``: storage's "every target
// slot holds a value" check, made in the same pass as the bounds check.
// Compiled twice, the AVX2 clone chosen at load time where the CPU has it: wider
// vectors, the same adds in the same order (no contraction: -ffp-contract=off), so
// the same bits, and a library built on one x86-64 still runs on any other.
// I: the index type, int64 or int32 (TensorFlow's TensorArray indices), read as they are.
template <typename T, typename I>
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
static AddStatus add_rows_in_order(T* __restrict__ dst, long long n_dst, const T* __restrict__ rows,
                                   const I* __restrict__ indices, long long n_rows, long long row_size,
                                   const unsigned char* flags, long long n_flags, unsigned char required) {
    for (long long k = 0; k < n_rows; ++k) {
        const long long index = indices[k];
        if (index < 0 || index >= n_dst) return REFUSED;
        if (flags != nullptr && (index >= n_flags || flags[index] != required)) return REFUSED;
    }
    if (row_size == 1) {
        // A column. A run of one index sums in a register: the same adds in the same
        // order, without a store and a reload between each (the latency of repeated
        // indices, which a hot index makes the whole cost).
        I current = indices[0];
        T sum = dst[current];
        for (long long k = 0; k < n_rows; ++k) {
            if (indices[k] != current) {
                dst[current] = sum;
                current = indices[k];
                sum = dst[current];
            }
            sum = add_values(sum, rows[k]);
        }
        dst[current] = sum;
        return ADDED;
    }
    for (long long k = 0; k < n_rows; ++k) {
        T* __restrict__ target = dst + indices[k] * row_size;
        const T* __restrict__ row = rows + k * row_size;
        for (long long j = 0; j < row_size; ++j) {
            target[j] = add_values(target[j], row[j]);
        }
    }
    return ADDED;
}

typedef AddStatus (*AddRows)(void*, long long, const void*, const void*, long long, long long,
                             const unsigned char*, long long, unsigned char);

template <typename T, typename I>
static AddStatus add_rows_erased(void* dst, long long n_dst, const void* rows, const void* indices,
                                 long long n_rows, long long row_size, const unsigned char* flags, long long n_flags,
                                 unsigned char required) {
    const FlushScope flush;
    return add_rows_in_order<T, I>(static_cast<T*>(dst), n_dst, static_cast<const T*>(rows),
                                   static_cast<const I*>(indices), n_rows, row_size, flags, n_flags, required);
}

struct DtypeEntry {
    const char* name;
    Py_ssize_t itemsize;
    AddRows add64;      // int64 indices
    AddRows add32;      // int32 indices
};

// One entry per aggregatable dtype, in the order of cpu_add_rows_dtypes.h: a call names
// its dtype by position (backends/cpu_kernels.py maps names to positions at import).
#define CPU_ADD_ROWS_ENTRY(NAME, T) \
    {#NAME, (Py_ssize_t)sizeof(T), &add_rows_erased<T, long long>, &add_rows_erased<T, int>},
static const DtypeEntry DTYPES[] = {
#include "cpu_add_rows_dtypes.h"
};
static const int N_DTYPES = sizeof(DTYPES) / sizeof(DTYPES[0]);

// The work (elements) above which a call lets other Python threads run meanwhile.
static const long long RELEASE_GIL_ELEMENTS = 1 << 16;

// A buffer's bytes; fails (a Python error set) unless C-contiguous.
static bool get_buffer(PyObject* object, Py_buffer* view, bool writable) {
    return PyObject_GetBuffer(object, view, writable ? PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE : PyBUF_C_CONTIGUOUS) == 0;
}

static bool overlap(const Py_buffer& a, const Py_buffer& b) {
    const char* a0 = static_cast<const char*>(a.buf);
    const char* b0 = static_cast<const char*>(b.buf);
    return a0 < b0 + b.len && b0 < a0 + a.len;
}

// add_rows(dtype_position, dst, indices, rows[, flags, required]) -> an AddStatus.
// ``dst`` and ``rows`` are C-contiguous buffers of the dtype (``rows``: len(indices)
// rows of dst's row size), ``indices`` C-contiguous int64 or int32 (signed: the caller
// vouches, the buffer gives only the width), ``flags`` bytes. A call that breaks these
// rules raises ValueError or BufferError: a caller's bug.
static PyObject* add_rows(PyObject*, PyObject* const* args, Py_ssize_t n_args) {
    if (n_args != 4 && n_args != 6) {
        PyErr_SetString(PyExc_TypeError, "add_rows(dtype_position, dst, indices, rows[, flags, required])");
        return nullptr;
    }
    const long position = PyLong_AsLong(args[0]);
    if (position < 0 || position >= N_DTYPES) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "add_rows: no such dtype position");
        return nullptr;
    }
    const DtypeEntry& dtype = DTYPES[position];
    const long required = n_args == 6 ? PyLong_AsLong(args[5]) : 0;
    if (required < 0 || required > 255) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "add_rows: required is a byte");
        return nullptr;
    }
    Py_buffer dst, indices, rows, flags;
    if (!get_buffer(args[1], &dst, true)) return nullptr;
    if (!get_buffer(args[2], &indices, false)) { PyBuffer_Release(&dst); return nullptr; }
    if (!get_buffer(args[3], &rows, false)) { PyBuffer_Release(&indices); PyBuffer_Release(&dst); return nullptr; }
    const bool guarded = n_args == 6;
    if (guarded && !get_buffer(args[4], &flags, false)) {
        PyBuffer_Release(&rows); PyBuffer_Release(&indices); PyBuffer_Release(&dst);
        return nullptr;
    }
    PyObject* result = nullptr;
    const AddRows add = indices.itemsize == 8 ? dtype.add64 : indices.itemsize == 4 ? dtype.add32 : nullptr;
    const long long n_rows = indices.len / (indices.itemsize ? indices.itemsize : 1);
    const long long row_elements = n_rows ? rows.len / dtype.itemsize / n_rows : 0;
    if (add == nullptr || dst.itemsize != dtype.itemsize || rows.itemsize != dtype.itemsize ||
            (n_rows && (row_elements == 0 || rows.len != n_rows * row_elements * dtype.itemsize ||
                        dst.len % (row_elements * dtype.itemsize) != 0))) {
        PyErr_SetString(PyExc_ValueError, "add_rows: the buffers do not match (dtype, row size or index width)");
    } else if (n_rows && overlap(dst, rows)) {
        result = PyLong_FromLong(OVERLAP);
    } else {
        AddStatus status = ADDED;
        if (n_rows) {
            const long long n_dst = dst.len / (row_elements * dtype.itemsize);
            const unsigned char* flag_bytes = guarded ? static_cast<const unsigned char*>(flags.buf) : nullptr;
            const long long n_flags = guarded ? flags.len : 0;
            if (n_rows * row_elements > RELEASE_GIL_ELEMENTS) {
                Py_BEGIN_ALLOW_THREADS
                status = add(dst.buf, n_dst, rows.buf, indices.buf, n_rows, row_elements, flag_bytes, n_flags,
                             (unsigned char)required);
                Py_END_ALLOW_THREADS
            } else {
                status = add(dst.buf, n_dst, rows.buf, indices.buf, n_rows, row_elements, flag_bytes, n_flags,
                             (unsigned char)required);
            }
        }
        result = PyLong_FromLong(status);
    }
    if (guarded) PyBuffer_Release(&flags);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&indices);
    PyBuffer_Release(&dst);
    return result;
}

// The dtypes this build holds, by position: cpu_kernels.py checks them against its own list.
static PyObject* dtype_names(PyObject*, PyObject*) {
    PyObject* names = PyTuple_New(N_DTYPES);
    if (names == nullptr) return nullptr;
    for (int i = 0; i < N_DTYPES; ++i) {
        PyObject* name = PyUnicode_FromString(DTYPES[i].name);
        if (name == nullptr) { Py_DECREF(names); return nullptr; }
        PyTuple_SET_ITEM(names, i, name);
    }
    return names;
}

static PyMethodDef METHODS[] = {
    {"add_rows", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(add_rows)), METH_FASTCALL,
     "add_rows(dtype_position, dst, indices, rows[, flags, required]) -> 0 added, 1 refused, 2 overlap"},
    {"dtype_names", dtype_names, METH_NOARGS, "the dtypes of the add_rows positions"},
    {nullptr, nullptr, 0, nullptr},
};

static PyModuleDef_Slot SLOTS[] = {{0, nullptr}};

static PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "gpu_tensorarray._cpu_add_rows", "The numpy backend's compiled scatter-add.", 0, METHODS,
    SLOTS, nullptr, nullptr, nullptr,
};

PyMODINIT_FUNC PyInit__cpu_add_rows(void) { return PyModuleDef_Init(&MODULE); }
