"""Scatter-add primitive: the backend's add_rows (deterministic) against np.add.at
(cupyx.scatter_add on the cupy backend), on the shared sizes (SIZES["scatter_add"] in
gpu_tensorarray/benchmarking/cases.py), through the same factory as the bench rows.

Each case first checks once that add_rows is bitwise np.add.at, then measures both in
the same run, interleaved, and records the speed ratio in
``extra_info["ratio_vs_add_at"]`` (and prints it, see ``-s``). For rows of 64 or more,
the op users see is also timed against torch's index_add_ the same way
(``extra_info["ratio_vs_index_add"]``), and add_rows into a destination on a page
against one where NumPy would put it (``extra_info["ratio_vs_numpy_placement"]``).
Nothing here asserts a time; the targets are in gpu_tensorarray/benchmarking/targets.py.
"""

from time import perf_counter

import numpy as np
import pytest

from gpu_tensorarray.benchmarking import providers
from gpu_tensorarray.benchmarking.cases import SIZES as ALL_SIZES
from gpu_tensorarray.benchmarking.cases import grad_scatter_add, scatter_add_inputs

SIZES = ALL_SIZES["scatter_add"]
CASES = [pytest.param({"rows": SIZES["rows"], "width": width, "multiple": multiple,
                       "distribution": distribution, "hot_fraction": SIZES["hot_fraction"]},
                      id=f"E{width}-n{multiple}S-{distribution}")
         for width in SIZES["widths"] for multiple in SIZES["multiples"] for distribution in SIZES["distributions"]]
MIN_ROUNDS, MAX_ROUNDS, BUDGET_S = 5, 200, 0.5
PAGE = 4096


@pytest.mark.parametrize("params", CASES)
def test_add_rows_vs_add_at(benchmark, backend, params):
    _check_bitwise(backend, params)
    ours = grad_scatter_add(mode="deterministic", **params)["ours.add_rows"](
        backend, providers.PROVIDERS["ours.add_rows"].load(backend))
    peer = grad_scatter_add(**params)["numpy"](backend, providers.PROVIDERS["numpy"].load(backend))
    ratio = _ratio(peer.run, ours.run)
    benchmark.extra_info["ratio_vs_add_at"] = round(ratio, 2)
    print(f"\n{backend.name} E={params['width']} n={params['multiple'] * params['rows']} {params['distribution']}: "
          f"add_rows is {ratio:.1f}x np.add.at")
    benchmark(ours.run)


@pytest.mark.parametrize("params", [case for case in CASES if case.values[0]["width"] >= 64])
def test_op_vs_torch_index_add_alternately(benchmark, backend, params):
    """The scatter-add op (the "ours" row, deterministic) against torch's index_add_ on one
    thread (the "torch" row): the same cases as the runner's target, but timed call by call
    in alternation, so that a shared machine's drift slows both alike. The runner times a
    peer's row minutes after ours (peers run last), and where the two are close its
    per-run verdict can flip with the machine. Records ``extra_info["ratio_vs_index_add"]``."""
    torch = pytest.importorskip("torch", reason="torch is not installed (see README: Performance)")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    made = grad_scatter_add(mode="deterministic", **params)
    ours = made["ours"](backend, providers.PROVIDERS["ours"].load(backend))
    peer = made["torch"](backend, providers.PROVIDERS["torch"].load(backend))
    try:
        ratio = _ratio(peer.run, ours.run)
        benchmark.extra_info["ratio_vs_index_add"] = round(ratio, 2)
        print(f"\n{backend.name} E={params['width']} n={params['multiple'] * params['rows']} "
              f"{params['distribution']}: the op is {ratio:.2f}x torch index_add_ (1 thread)")
        benchmark(ours.run)
    finally:
        ours.teardown()
        peer.teardown()
        torch.set_num_threads(threads)


@pytest.mark.parametrize("params", [case for case in CASES if case.values[0]["width"] >= 64])
def test_add_rows_on_a_page_vs_numpys_placement(benchmark, backend, params):
    """add_rows into a destination that starts on a page, as the numpy backend's large
    arrays do, against one that starts 16 bytes into a page, where NumPy puts its own
    (README "Storage on a page"), timed alternately. Records
    ``extra_info["ratio_vs_numpy_placement"]``."""
    if backend.name != "numpy":
        pytest.skip("the numpy backend's placement")
    indices, values, _ = scatter_add_inputs(params["rows"], params["width"], params["multiple"] * params["rows"],
                                            params["distribution"], params["hot_fraction"])
    on_page = backend.zeros((params["rows"], params["width"]), np.float32)
    buffer = np.zeros(on_page.nbytes + PAGE, np.uint8)
    start = -buffer.__array_interface__["data"][0] % PAGE + 16
    numpys = buffer[start:start + on_page.nbytes].view(np.float32).reshape(on_page.shape)
    assert on_page.__array_interface__["data"][0] % PAGE == 0

    def add(dst):
        return lambda: backend.add_rows(dst, indices, values, "deterministic")
    ratio = _ratio(add(numpys), add(on_page))
    benchmark.extra_info["ratio_vs_numpy_placement"] = round(ratio, 2)
    print(f"\n{backend.name} E={params['width']} n={params['multiple'] * params['rows']} "
          f"{params['distribution']}: add_rows on a page is {ratio:.2f}x add_rows 16 bytes into one")
    benchmark(add(on_page))


def _check_bitwise(backend, params):
    indices, values, _ = scatter_add_inputs(params["rows"], params["width"], params["multiple"] * params["rows"],
                                            params["distribution"], params["hot_fraction"])
    start = np.random.default_rng(0).standard_normal((params["rows"], params["width"]), dtype=np.float32)
    expected = start.copy()
    np.add.at(expected, indices, values)
    slab = backend.asarray(start.copy())
    backend.add_rows(slab, indices, backend.asarray(values), "deterministic")
    assert backend.to_numpy(slab).view(np.uint32).tobytes() == expected.view(np.uint32).tobytes()


def _ratio(slow, fast):
    """Best time of ``slow`` over best time of ``fast``, timed alternately so
    that a busy machine slows both alike; short cases get more rounds."""
    slow(), fast()  # warm-up: first-touch pages, compiled kernels
    best, spent, rounds = [float("inf"), float("inf")], 0.0, 0
    while rounds < MIN_ROUNDS or (spent < BUDGET_S and rounds < MAX_ROUNDS):
        for position, run in enumerate((slow, fast)):
            begin = perf_counter()
            run()
            elapsed = perf_counter() - begin
            best[position], spent = min(best[position], elapsed), spent + elapsed
        rounds += 1
    return best[0] / best[1]
