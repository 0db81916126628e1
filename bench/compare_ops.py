"""Per-op wall time of three ops as users call them (keyword raw ops, np.int32 indices), for
comparing two checkouts of the library: write of a (64,) float32 device value, read of one,
and a grad array's scatter-add of 1024 rows of 64 (random indices, deterministic mode).
The best of five rounds; one line of output.

    PYTHONPATH=OLD_CHECKOUT python bench/compare_ops.py cupy old
    PYTHONPATH=. python bench/compare_ops.py cupy new         (alternate the two, three times)
"""

import sys
import time

import numpy as np

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops as R

STEPS = 2000


def main(backend, label=""):
    with gta.device(backend):
        active = gta.get_backend(backend)
        value = active.asarray(np.ones(64, np.float32))
        indices = [np.int32(i) for i in range(STEPS)]
        h, f = R.TensorArrayV3(size=STEPS, dtype=np.float32, element_shape=[64], clear_after_read=False)
        for i in range(STEPS):
            f = R.TensorArrayWriteV3(handle=h, index=i, value=value, flow_in=f)
        rows = active.asarray(np.ones((1024, 64), np.float32))
        scatter_indices = np.random.default_rng(0).integers(0, 1024, 1024).astype(np.int32)

        def writes():
            wh, wf = R.TensorArrayV3(size=STEPS, dtype=np.float32, element_shape=[64])
            for i in indices:
                wf = R.TensorArrayWriteV3(handle=wh, index=i, value=value, flow_in=wf)
            active.synchronize()
            R.TensorArrayCloseV3(handle=wh)

        def reads():
            for i in indices:
                R.TensorArrayReadV3(handle=h, index=i, flow_in=f, dtype=np.float32)
            active.synchronize()

        def scatters():
            fh, ff = R.TensorArrayV3(size=1024, dtype=np.float32, element_shape=[64])
            ff = R.TensorArrayScatterV3(handle=fh, indices=np.arange(1024, dtype=np.int32), value=rows, flow_in=ff)
            g, gf = R.TensorArrayGradV3(handle=fh, flow_in=ff, source="gradients")
            for _ in range(200):
                gf = R.TensorArrayScatterV3(handle=g, indices=scatter_indices, value=rows, flow_in=gf)
            active.synchronize()
            R.TensorArrayCloseV3(handle=g); R.TensorArrayCloseV3(handle=fh)

        out = []
        for name, fn, count in (("write", writes, STEPS), ("read", reads, STEPS), ("scatter_add", scatters, 200)):
            fn()
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter(); fn(); best = min(best, time.perf_counter() - t0)
            out.append(f"{name} {best / count * 1e6:.2f}")
        print(label, backend, " ".join(out), "us/op")


if __name__ == "__main__":
    main(*sys.argv[1:3])
