// Row gather: dst[k, :] = src[indices[k], :] for k < n_rows.
#include "common.cuh"

template <typename T>
__global__ void gather_rows(T* __restrict__ dst, const T* __restrict__ src,
                            const long long* __restrict__ indices,
                            long long n_rows, long long row_size) {
    const long long total = n_rows * row_size;
    for (long long i = thread_index(); i < total; i += thread_stride()) {
        const long long k = i / row_size;
        dst[i] = src[indices[k] * row_size + (i - k * row_size)];
    }
}
