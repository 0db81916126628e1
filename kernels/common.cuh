// Shared by every kernel: element types, thread indexing, exact adds, atomics.
//
// Compiled two ways: by NVRTC for the GPU (CuPy's RawModule), and by g++ for the
// CPU when emulation.h stands in for the CUDA runtime (the emulated backend).
// The loader (gpu_tensorarray/backends/kernel_sources.py) inlines quoted includes once
// each; the guard is for kernels/emulated_kernels.cpp, which includes every .cu file.
#ifndef GPU_TENSORARRAY_COMMON_CUH
#define GPU_TENSORARRAY_COMMON_CUH
#ifdef __CUDACC__
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#else
// __half, __nv_bfloat16 and the CUDA runtime, for the CPU.
#include "emulation.h"
#endif

// numpy's complex64/complex128 layout: real part, then imaginary part.
struct complex64 { float re, im; };
struct complex128 { double re, im; };

// Grid-stride loops, in 64-bit arithmetic: row * row_size overflows 32 bits
// long before device memory runs out.
__device__ __forceinline__ long long thread_index() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ long long thread_stride() {
    return (long long)gridDim.x * blockDim.x;
}

// ---- exact, order-preserving adds --------------------------------------------------
// add_values(a, b) is TensorFlow's sum on the CPU: IEEE round-to-nearest, with subnormals
// flushed as TensorFlow runs its CPU kernels (port::ScopedFlushDenormal sets the FTZ and DAZ
// flags): a subnormal operand counts as a zero of its sign, a subnormal sum becomes one. So
// float32, float64, their complex parts and bfloat16 (added in float32) flush; float16, added
// in float32, never meets a subnormal there. A sequence of them is TensorFlow's sequential sum.

#ifdef GPU_TENSORARRAY_CPU_FLUSHES
// The including file runs the adds with the CPU's FTZ and DAZ flags set (cpu_add_rows.cpp on
// x86-64): the hardware flushes operands and sums alike. (A sum of two normal floats that is
// subnormal is exact, so no rounding tells the two ways apart.)
__device__ __forceinline__ float flush_float(float x) { return x; }
__device__ __forceinline__ double flush_double(double x) { return x; }
#else
// x, or a zero of its sign when x is subnormal: on the bits, so no compiler flag changes it.
__device__ __forceinline__ float flush_float(float x) {
    const unsigned int bits = __float_as_uint(x);
    return (bits & 0x7f800000u) ? x : __uint_as_float(bits & 0x80000000u);
}

__device__ __forceinline__ double flush_double(double x) {
    const long long bits = __double_as_longlong(x);
    return (bits & 0x7ff0000000000000LL) ? x : __longlong_as_double(bits & (long long)0x8000000000000000ULL);
}
#endif

__device__ __forceinline__ float add_float(float a, float b) {
    a = flush_float(a);
    b = flush_float(b);
#ifdef __CUDA_ARCH__
    // An explicit add.rn.f32: whatever -ftz CuPy compiles with, the flush above is the only one.
    float sum;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(sum) : "f"(a), "f"(b));
    return flush_float(sum);
#else
    return flush_float(a + b);
#endif
}

__device__ __forceinline__ double add_double(double a, double b) {
    return flush_double(flush_double(a) + flush_double(b));
}

// Narrow integers promote to int and wrap on the way back; unsigned ones wrap by definition.
template <typename T>
__device__ __forceinline__ T add_values(T a, T b) { return (T)(a + b); }

// Signed overflow is undefined in C++: add as unsigned, which wraps like numpy.
template <>
__device__ __forceinline__ int add_values<int>(int a, int b) {
    return (int)((unsigned int)a + (unsigned int)b);
}

template <>
__device__ __forceinline__ long long add_values<long long>(long long a, long long b) {
    return (long long)((unsigned long long)a + (unsigned long long)b);
}

template <>
__device__ __forceinline__ float add_values<float>(float a, float b) { return add_float(a, b); }

template <>
__device__ __forceinline__ double add_values<double>(double a, double b) { return add_double(a, b); }

// Half: add in float, round once to half. Float carries more than twice half's
// precision, so this double rounding equals a correctly rounded half add (and numpy's and
// TensorFlow's); a half (or a sum of two) is never subnormal in float, so nothing flushes.
template <>
__device__ __forceinline__ __half add_values<__half>(__half a, __half b) {
    return __float2half_rn(add_float(__half2float(a), __half2float(b)));
}

// bfloat16: add in float (flushed, as above), round once to bfloat16, to nearest even. That
// is TensorFlow's bfloat16 add, and ml_dtypes' (NumPy's) but for the flush; as for half, the
// rounding equals a correctly rounded bfloat16 add. The rounding is written out rather than __float2bfloat16_rn
// so that a NaN becomes ml_dtypes' quiet NaN with the float's sign (0x7fc0 / 0xffc0),
// where CUDA's gives 0x7fff; infinities, overflow and subnormals round alike. (A GPU's float
// add has already made any NaN sum its canonical, positive NaN: the sign kept is the CPU's.)
__device__ __forceinline__ __nv_bfloat16 float_to_bfloat16_rn(float value) {
    unsigned int bits = __float_as_uint(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return __ushort_as_bfloat16((bits & 0x80000000u) ? 0xffc0 : 0x7fc0);
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);  // carries into the exponent, up to inf
    return __ushort_as_bfloat16((unsigned short)(bits >> 16));
}

template <>
__device__ __forceinline__ __nv_bfloat16 add_values<__nv_bfloat16>(__nv_bfloat16 a, __nv_bfloat16 b) {
    return float_to_bfloat16_rn(add_float(__bfloat162float(a), __bfloat162float(b)));
}

template <>
__device__ __forceinline__ complex64 add_values<complex64>(complex64 a, complex64 b) {
    complex64 sum = {add_float(a.re, b.re), add_float(a.im, b.im)};
    return sum;
}

template <>
__device__ __forceinline__ complex128 add_values<complex128>(complex128 a, complex128 b) {
    complex128 sum = {add_double(a.re, b.re), add_double(a.im, b.im)};
    return sum;
}

// ---- atomics -----------------------------------------------------------------------
// One overload per dtype the atomic mode supports (kernel_sources.ATOMIC_DTYPES);
// the other dtypes have no hardware atomic and use the deterministic kernel.
//
// double atomicAdd needs sm_60, __half's sm_70, __nv_bfloat16's sm_80. Below that
// the overload traps, so that the module (one translation unit: gather and put too)
// still compiles; it is never launched there, because kernel_sources.atomic_dtypes(arch)
// leaves those dtypes out and their atomic mode runs the deterministic kernel instead.
// Keep the two in step. (The host compile, without __CUDA_ARCH__, has them all.)
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 600
#define HAS_DOUBLE_ATOMIC_ADD 1
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
#define HAS_HALF_ATOMIC_ADD 1
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define HAS_BFLOAT16_ATOMIC_ADD 1
#endif

__device__ __forceinline__ void atomic_add(float* target, float value) { atomicAdd(target, value); }

#ifdef HAS_DOUBLE_ATOMIC_ADD
__device__ __forceinline__ void atomic_add(double* target, double value) { atomicAdd(target, value); }
#else
__device__ __forceinline__ void atomic_add(double*, double) { __trap(); }
#endif

#ifdef HAS_HALF_ATOMIC_ADD
__device__ __forceinline__ void atomic_add(__half* target, __half value) { atomicAdd(target, value); }
#else
__device__ __forceinline__ void atomic_add(__half*, __half) { __trap(); }
#endif

#ifdef HAS_BFLOAT16_ATOMIC_ADD
__device__ __forceinline__ void atomic_add(__nv_bfloat16* target, __nv_bfloat16 value) { atomicAdd(target, value); }
#else
__device__ __forceinline__ void atomic_add(__nv_bfloat16*, __nv_bfloat16) { __trap(); }
#endif

__device__ __forceinline__ void atomic_add(int* target, int value) { atomicAdd(target, value); }
__device__ __forceinline__ void atomic_add(unsigned int* target, unsigned int value) { atomicAdd(target, value); }
__device__ __forceinline__ void atomic_add(unsigned long long* target, unsigned long long value) {
    atomicAdd(target, value);
}

// Two's complement: an unsigned add has the same bits as the signed one.
__device__ __forceinline__ void atomic_add(long long* target, long long value) {
    atomicAdd((unsigned long long*)target, (unsigned long long)value);
}

// Each component on its own: a reader may see one part updated before the other,
// which is fine once the kernel has finished.
__device__ __forceinline__ void atomic_add(complex64* target, complex64 value) {
    atomicAdd(&target->re, value.re);
    atomicAdd(&target->im, value.im);
}

__device__ __forceinline__ void atomic_add(complex128* target, complex128 value) {
    atomic_add(&target->re, value.re);
    atomic_add(&target->im, value.im);
}

#endif  // GPU_TENSORARRAY_COMMON_CUH
