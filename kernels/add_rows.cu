// Scatter-add: dst[indices[k], :] += rows[k, :] for k < n_rows, duplicates allowed.
#include "common.cuh"

// Atomic mode: one thread per source element, duplicates meet in atomicAdd, so
// the order in which a destination receives its values is unspecified.
template <typename T>
__global__ void add_rows_atomic(T* __restrict__ dst, const T* __restrict__ rows,
                                const long long* __restrict__ indices,
                                long long n_rows, long long row_size) {
    const long long total = n_rows * row_size;
    for (long long i = thread_index(); i < total; i += thread_stride()) {
        const long long k = i / row_size;
        atomic_add(&dst[indices[k] * row_size + (i - k * row_size)], rows[i]);
    }
}

// Deterministic mode: the host groups the source rows by destination with a
// stable sort; group g adds rows order[starts[g]] .. order[starts[g + 1] - 1]
// into row destinations[g]. One thread per (group, column) adds them in that
// (arrival) order, so each element is a sequential sum: bitwise TensorFlow's.
template <typename T>
__global__ void add_rows_deterministic(T* __restrict__ dst, const T* __restrict__ rows,
                                       const long long* __restrict__ order,
                                       const long long* __restrict__ starts,
                                       const long long* __restrict__ destinations,
                                       long long n_groups, long long row_size) {
    const long long total = n_groups * row_size;
    for (long long i = thread_index(); i < total; i += thread_stride()) {
        const long long g = i / row_size;
        const long long column = i - g * row_size;
        T* target = &dst[destinations[g] * row_size + column];
        T sum = *target;
        long long p = starts[g];
        const long long end = starts[g + 1];
        // Four loads in flight at a time: they are independent, only the adds
        // must stay in order (a long group is otherwise one load latency per row).
        for (; p + 4 <= end; p += 4) {
            const T a = rows[order[p] * row_size + column];
            const T b = rows[order[p + 1] * row_size + column];
            const T c = rows[order[p + 2] * row_size + column];
            const T d = rows[order[p + 3] * row_size + column];
            sum = add_values(add_values(add_values(add_values(sum, a), b), c), d);
        }
        for (; p < end; ++p) {
            sum = add_values(sum, rows[order[p] * row_size + column]);
        }
        *target = sum;
    }
}
