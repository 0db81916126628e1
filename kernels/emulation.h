// The CUDA runtime as the kernels see it, for running them on the CPU (g++).
//
// The emulated backend compiles the very same kernels with this header in place
// of the CUDA toolchain: qualifiers become no-ops, the launch is a loop over
// blocks and threads (one CPU thread runs the whole grid in order; the kernels
// use no shared memory and no __syncthreads, so that is a valid schedule),
// atomics are plain read-modify-writes (float's flushing subnormals, as the GPU's),
// and __half (and __nv_bfloat16) is a 16-bit value whose conversions round exactly
// as the GPU's (and numpy's) do. EMULATED_EXPORT gives each kernel instantiation a
// C entry point that Python calls through ctypes.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))

struct dim3 { unsigned int x, y, z; };

// Thread-local: ctypes releases the GIL, so two Python threads may run kernels at once.
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

template <typename Body>
inline void emulate_grid(unsigned int grid, unsigned int block, Body body) {
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    threadIdx = blockIdx = dim3{0, 0, 0};
    for (unsigned int b = 0; b < grid; ++b) {
        blockIdx.x = b;
        for (unsigned int t = 0; t < block; ++t) {
            threadIdx.x = t;
            body();
        }
    }
}

// ---- __half: IEEE binary16 bits, converted through float ---------------------------
struct __half { unsigned short bits; };

inline float __half2float(__half h) {
    const unsigned int sign = (unsigned int)(h.bits & 0x8000u) << 16;
    const unsigned int exponent = (h.bits >> 10) & 0x1fu;
    const unsigned int mantissa = h.bits & 0x3ffu;
    unsigned int bits;
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24 is exact in float
        float magnitude = (float)mantissa * 5.9604644775390625e-8f;
        std::memcpy(&bits, &magnitude, sizeof bits);
        bits |= sign;
    } else if (exponent == 0x1fu) {  // inf, nan
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

// Round to nearest, ties to even, like cvt.rn.f16.f32 and numpy's float->half.
inline __half __float2half_rn(float value) {
    unsigned int bits;
    std::memcpy(&bits, &value, sizeof bits);
    const unsigned short sign = (unsigned short)((bits >> 16) & 0x8000u);
    const unsigned int magnitude = bits & 0x7fffffffu;
    unsigned int half;
    if (magnitude >= 0x7f800000u) {  // inf, or nan keeping its top payload bits (as numpy)
        half = 0x7c00u;
        if (magnitude > 0x7f800000u) half |= ((magnitude >> 13) & 0x3ffu) ? ((magnitude >> 13) & 0x3ffu) : 1u;
    } else if (magnitude >= 0x477ff000u) {  // 65520 and up round to inf
        half = 0x7c00u;
    } else if (magnitude >= 0x38800000u) {  // normal half: rebias the exponent, round 13 bits away
        half = (magnitude - 0x38000000u) >> 13;
        const unsigned int rest = magnitude & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    } else if (magnitude >= 0x33000000u) {  // subnormal half: units of 2^-24
        const unsigned int shift = 126u - (magnitude >> 23);
        const unsigned int significand = (magnitude & 0x7fffffu) | 0x800000u;
        half = significand >> shift;
        const unsigned int rest = significand & ((1u << shift) - 1u);
        const unsigned int midpoint = 1u << (shift - 1u);
        if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    } else {  // below 2^-25: rounds to zero
        half = 0;
    }
    return __half{(unsigned short)(sign | half)};
}

// ---- __nv_bfloat16: the top 16 bits of an IEEE binary32 -----------------------------
// Only what common.cuh uses: the bit casts and the (exact) widening to float.
struct __nv_bfloat16 { unsigned short bits; };

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return __nv_bfloat16{bits}; }

// The CUDA bit casts common.cuh uses: the same bits as another type.
template <typename To, typename From>
inline To same_bits(From value) {
    static_assert(sizeof(To) == sizeof(From), "a bit cast keeps the size");
    To result;
    std::memcpy(&result, &value, sizeof result);
    return result;
}

inline unsigned int __float_as_uint(float value) { return same_bits<unsigned int>(value); }
inline float __uint_as_float(unsigned int bits) { return same_bits<float>(bits); }
inline long long __double_as_longlong(double value) { return same_bits<long long>(value); }
inline double __longlong_as_double(long long bits) { return same_bits<double>(bits); }

inline float __bfloat162float(__nv_bfloat16 h) {
    return __uint_as_float((unsigned int)h.bits << 16);
}

// ---- atomics: the grid runs on one thread, so a read-modify-write is atomic ---------
// One template for every overload common.cuh's atomic_add calls (that list is the
// only one), adding exactly as the deterministic kernel does: add_values, declared
// here and defined in common.cuh, wraps integers and rounds halves like the GPU
// (bfloat16's NaN keeps its sign, as the deterministic kernel's and ml_dtypes').
template <typename T>
T add_values(T a, T b);

template <typename T>
inline T atomicAdd(T* address, T value) {
    const T old = *address;
    *address = add_values(old, value);
    return old;
}

// Except float's: the GPU's 32-bit floating-point atomicAdd on global memory always
// runs in flush-to-zero mode (CUDA C++ Programming Guide, floating-point standard):
// subnormal operands and results become zeros of their sign.
inline float flush_subnormal(float value) {
    return std::fpclassify(value) == FP_SUBNORMAL ? std::copysign(0.0f, value) : value;
}

inline float atomicAdd(float* address, float value) {
    const float old = *address;
    *address = flush_subnormal(flush_subnormal(old) + flush_subnormal(value));
    return old;
}

// And double's and bfloat16's, which keep subnormals (PTX's atom.add.f64, atom.add.noftz.bf16),
// where the deterministic kernel's add_values flushes them, as TensorFlow's CPU kernels do.
inline double atomicAdd(double* address, double value) {
    const double old = *address;
    *address = old + value;
    return old;
}

inline __nv_bfloat16 float_to_bfloat16_rn(float value);     // common.cuh's rounding

inline __nv_bfloat16 atomicAdd(__nv_bfloat16* address, __nv_bfloat16 value) {
    const __nv_bfloat16 old = *address;
    *address = float_to_bfloat16_rn(__bfloat162float(old) + __bfloat162float(value));
    return old;
}

// ---- launching from Python (ctypes) ------------------------------------------------
// The kernel's parameters, read from a cuLaunchKernel-style argument array: args[i]
// points at the i-th argument's value (an array's data pointer, a scalar's bytes).
template <typename... Params, std::size_t... I>
inline void emulate_call(void (*kernel)(Params...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<Params*>(args[I])...);
}

template <typename... Params>
inline void emulate_launch(void (*kernel)(Params...), unsigned int blocks, unsigned int threads, void** args) {
    emulate_grid(blocks, threads, [&] { emulate_call(kernel, args, std::index_sequence_for<Params...>{}); });
}

// One C entry point per instantiation, <kernel>_<dtype name>, for example
// EMULATED_EXPORT(put_rows, float32, float) defines put_rows_float32(blocks, threads, args).
#define EMULATED_EXPORT(kernel, dtype_name, T)                                                  \
    extern "C" void kernel##_##dtype_name(unsigned int blocks, unsigned int threads, void** args) { \
        emulate_launch(&kernel<T>, blocks, threads, args);                                     \
    }
