"""A. A 1000-step write loop of (64,) float32 elements through raw_ops and the
class, then stack. Targets (numpy backend): raw write and read under 2 us per
call, the class under 3 us, stack under 5 us."""

from gpu_tensorarray import benchmarks

SIZES = benchmarks.SIZES["write_loop"]


def test_write_loop_raw_ops(benchmark, backend):
    run, calls = benchmarks.write_loop_raw(backend, **SIZES)
    benchmark.extra_info["calls"] = calls
    benchmark(run)


def test_read_loop_raw_ops(benchmark, backend):
    run, calls = benchmarks.read_loop_raw(backend, **SIZES)
    benchmark.extra_info["calls"] = calls
    benchmark(run)


def test_write_loop_class_then_stack(benchmark, backend):
    run, calls = benchmarks.write_loop_class(backend, **SIZES)
    benchmark.extra_info["calls"] = calls
    benchmark(run)


def test_stack_fully_written(benchmark, backend):
    sizes = benchmarks.SIZES["stack"]
    setup, run = benchmarks.stack_written(backend, sizes["counts"][0], SIZES["width"])
    benchmark.pedantic(run, setup=setup, rounds=50)
