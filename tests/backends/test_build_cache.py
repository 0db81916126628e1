"""The emulated backend's build cache loads only a library this user built, intact.

Each case prepares $XDG_CACHE_HOME (a fresh folder) and runs a new Python process,
which loads the emulated backend and gathers and scatters rows with the kernels;
its output is compared with NumPy's. Planted, truncated, foreign, garbage and
tampered files must never be loaded (a planted library's constructor would write
a marker file) and are replaced by a good build; an unsafe or unusable cache
folder is not used at all, and no temporary folder outlives the process.
"""

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu_tensorarray.backends import build_cache, emulated

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600

# Gathers and scatters rows through the kernels; prints the results' bytes.
PROGRAM = """
import sys
import numpy as np
from gpu_tensorarray.backends import get_backend
backend = get_backend("emulated")
src = (np.arange(40, dtype=np.float32) * 0.37).reshape(8, 5)
gathered = backend.take_rows(src, np.array([7, 0, 3, 3]))
dst = np.zeros((6, 5), np.float32)
backend.put_rows(dst, np.array([5, 1, 2]), src[:3])
sys.stdout.write(gathered.tobytes().hex() + " " + dst.tobytes().hex())
"""


def expected_output():
    src = (np.arange(40, dtype=np.float32) * 0.37).reshape(8, 5)
    dst = np.zeros((6, 5), np.float32)
    dst[[5, 1, 2]] = src[:3]
    return src[[7, 0, 3, 3]].tobytes().hex() + " " + dst.tobytes().hex()


def environment(cache, tmp):
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    env.pop("GPU_TENSORARRAY_BACKEND", None)
    return env


def run(cache, tmp):
    """Run PROGRAM in a new process; it must succeed with NumPy's results and leave no
    temporary folder behind. Returns its stderr."""
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=ROOT,
                            env=environment(cache, tmp), timeout=TIMEOUT)
    assert result.returncode == 0, f"exit status {result.returncode}:\n{result.stderr[-3000:]}"
    assert result.stdout == expected_output()
    assert os.listdir(tmp) == [], "a temporary folder outlived the process"
    return result.stderr


@pytest.fixture(scope="module")
def name():
    return emulated.library_name()


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """A cache folder holding a good build (built once for the module)."""
    cache = tmp_path_factory.mktemp("golden")
    run(cache, tmp_path_factory.mktemp("golden-tmp"))
    return cache / "gpu_tensorarray"


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


@pytest.fixture
def tmp(tmp_path):
    return tmp_path / "tmp"


def copy_golden(golden, cache):
    shutil.copytree(golden, cache / "gpu_tensorarray")
    return cache / "gpu_tensorarray"


def compile_library(path, code):
    subprocess.run(["g++", "-shared", "-fPIC", "-x", "c++", "-o", str(path), "-"], input=code, text=True,
                   check=True, timeout=TIMEOUT)


def plant_constructor(path, marker):
    """A library whose constructor, run by dlopen, writes ``marker``."""
    compile_library(path, '#include <cstdio>\n__attribute__((constructor)) static void planted() {\n'
                          f'    if (FILE* f = std::fopen("{marker}", "w")) {{ std::fputs("ran", f); std::fclose(f); }}\n}}\n')


def forge_record(folder, name, data):
    """The record a build would have written for ``data``."""
    record = f"{build_cache._RECORD_FORMAT} {len(data)} {hashlib.sha256(data).hexdigest()}\n"
    (folder / (name + build_cache._RECORD_SUFFIX)).write_text(record)


def assert_good_build(folder, name, golden):
    """The folder holds a library and its record that match each other and the golden build's size."""
    data = (folder / name).read_bytes()
    words = (folder / (name + build_cache._RECORD_SUFFIX)).read_text().split()
    assert words[1:] == [str(len(data)), hashlib.sha256(data).hexdigest()]
    assert len(data) == (golden / name).stat().st_size
    # The numpy backend's compiled host code (raw_ops builds its own at import) lives here too.
    leftovers = [entry for entry in os.listdir(folder) if entry not in (name, name + build_cache._RECORD_SUFFIX)
                 and not entry.startswith(("cpu-raw-ops-", "cpu-add-rows-"))]
    assert leftovers == []


def identity(path):
    status = path.stat()
    return status.st_ino, status.st_mtime_ns


def test_a_good_cache_is_loaded_without_building(golden, name, cache, tmp):
    folder = copy_golden(golden, cache)
    before = identity(folder / name)
    run(cache, tmp)
    assert identity(folder / name) == before
    assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0


@pytest.mark.parametrize("record", ["none", "wrong digest"])
def test_planted_library_never_runs(golden, name, cache, tmp, tmp_path, record):
    folder = cache / "gpu_tensorarray"
    folder.mkdir(parents=True, mode=0o700)
    marker = tmp_path / "marker"
    plant_constructor(folder / name, marker)
    if record == "wrong digest":
        planted = (folder / name).read_bytes()
        forge_record(folder, name, planted[:-1] + bytes([planted[-1] ^ 1]))
        assert (folder / (name + build_cache._RECORD_SUFFIX)).read_text().split()[1] == str(len(planted))
    run(cache, tmp)
    assert not marker.exists(), "the planted library's constructor ran"
    assert_good_build(folder, name, golden)


def test_truncated_library_is_rebuilt(golden, name, cache, tmp):
    folder = copy_golden(golden, cache)
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[:len(data) // 2])        # loading this could SIGBUS
    run(cache, tmp)
    assert_good_build(folder, name, golden)


def test_foreign_library_with_a_matching_record_is_rebuilt(golden, name, cache, tmp):
    # Intact and recorded, so it is loaded; it lacks the kernels, so it is replaced.
    folder = copy_golden(golden, cache)
    compile_library(folder / name, 'extern "C" int foreign() { return 1; }\n')
    forge_record(folder, name, (folder / name).read_bytes())
    stderr = run(cache, tmp)
    assert "AttributeError" not in stderr
    assert_good_build(folder, name, golden)


def test_garbage_is_rebuilt_and_the_next_process_loads_the_build(golden, name, cache, tmp):
    folder = cache / "gpu_tensorarray"
    folder.mkdir(parents=True, mode=0o700)
    (folder / name).write_bytes(os.urandom(5000))
    run(cache, tmp)
    assert_good_build(folder, name, golden)
    rebuilt = identity(folder / name)
    run(cache, tmp)
    assert identity(folder / name) == rebuilt                 # loaded, not built again


def test_tampered_record_means_a_rebuild(golden, name, cache, tmp):
    folder = copy_golden(golden, cache)
    record = folder / (name + build_cache._RECORD_SUFFIX)
    words = record.read_text().split()
    words[2] = ("0" if words[2][0] != "0" else "1") + words[2][1:]
    record.write_text(" ".join(words) + "\n")
    before = identity(folder / name)
    run(cache, tmp)
    assert identity(folder / name) != before
    assert_good_build(folder, name, golden)


def test_library_writable_by_others_is_not_loaded(golden, name, cache, tmp, tmp_path):
    folder = copy_golden(golden, cache)
    marker = tmp_path / "marker"
    plant_constructor(folder / name, marker)
    forge_record(folder, name, (folder / name).read_bytes())
    os.chmod(folder / name, 0o666)
    run(cache, tmp)
    assert not marker.exists(), "a library writable by other users was loaded"
    assert_good_build(folder, name, golden)


def test_group_writable_cache_folder_is_not_used(golden, name, cache, tmp, tmp_path):
    folder = copy_golden(golden, cache)
    marker = tmp_path / "marker"
    plant_constructor(folder / name, marker)
    forge_record(folder, name, (folder / name).read_bytes())   # even a "valid" entry
    os.chmod(folder, 0o770)
    before = sorted(os.listdir(folder)), identity(folder / name)
    stderr = run(cache, tmp)                                   # also: the private build folder is gone
    assert not marker.exists(), "a library in a group-writable folder was loaded"
    assert "writable by other users" in stderr and "XDG_CACHE_HOME" in stderr
    assert (sorted(os.listdir(folder)), identity(folder / name)) == before


def test_unusable_cache_folder_builds_privately(cache, tmp):
    cache.parent.mkdir(exist_ok=True)
    cache.write_text("a file where the cache folder would go")
    stderr = run(cache, tmp)
    assert "XDG_CACHE_HOME" in stderr


def test_read_only_cache_folder_builds_privately(golden, name, cache, tmp):
    folder = cache / "gpu_tensorarray"
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(folder, 0o500)
    try:
        run(cache, tmp)
        if os.geteuid() != 0:          # root writes through the mode bits
            assert os.listdir(folder) == []
    finally:
        os.chmod(folder, 0o700)


def test_concurrent_first_builds(golden, name, cache, tmp):
    env = environment(cache, tmp)
    processes = [subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=ROOT, env=env) for _ in range(4)]
    results = [process.communicate(timeout=TIMEOUT) + (process.returncode,) for process in processes]
    for out, err, status in results:
        assert status == 0, err[-3000:]
        assert out == expected_output()
    assert os.listdir(tmp) == []
    folder = cache / "gpu_tensorarray"
    assert_good_build(folder, name, golden)
    built = identity(folder / name)
    run(cache, tmp)
    assert identity(folder / name) == built
