// Row scatter: dst[indices[k], :] = rows[k, :] for k < n_rows. The indices are
// distinct, so no two threads write the same element.
#include "common.cuh"

template <typename T>
__global__ void put_rows(T* __restrict__ dst, const T* __restrict__ rows,
                         const long long* __restrict__ indices,
                         long long n_rows, long long row_size) {
    const long long total = n_rows * row_size;
    for (long long i = thread_index(); i < total; i += thread_stride()) {
        const long long k = i / row_size;
        dst[indices[k] * row_size + (i - k * row_size)] = rows[i];
    }
}
