"""Choosing a backend: the automatic choice only picks a backend that works, an
explicit choice that cannot work says what to install, and ``info`` says which
backends load here and why the default is what it is.

CuPy is replaced by a fake module (no GPU needed): it has a device or not, and
its RawModule compiles or fails the way a missing NVRTC or CUDA header fails.
"""

import importlib.machinery
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

from gpu_tensorarray import backends
from gpu_tensorarray.__main__ import main
from gpu_tensorarray.errors import UnavailableError

ROOT = Path(__file__).resolve().parents[2]


# A module that looks like CuPy to the cupy backend, as source text so that a
# subprocess can import it too. FAKE_CUPY_DEVICES: how many devices; FAKE_CUPY_NVRTC:
# "missing" makes compiling fail as CuPy does without libnvrtc. ``compiled`` counts compiles.
FAKE_CUPY = """
import os
import types

__version__ = "14.2.0"              # the floor pyproject.toml's cuda extra requires
compiled = []
_devices = int(os.environ.get("FAKE_CUPY_DEVICES", "1"))
_nvrtc_missing = os.environ.get("FAKE_CUPY_NVRTC") == "missing"


class CUDARuntimeError(RuntimeError):
    pass


def _device_count():
    if _devices == 0:
        raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    return _devices


class Device:
    compute_capability = "90"       # what CuPy reports for an H100

    def __init__(self, index):
        self.id = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class RawModule:
    def __init__(self, code, options, name_expressions):
        self.name_expressions = name_expressions

    def compile(self):
        if _nvrtc_missing:
            raise RuntimeError("CuPy failed to load libnvrtc.so.12: OSError: libnvrtc.so.12: "
                               "cannot open shared object file: No such file or directory")
        compiled.append(len(self.name_expressions))


ndarray = type("ndarray", (), {})
cuda = types.SimpleNamespace(
    Device=Device,
    runtime=types.SimpleNamespace(getDeviceCount=_device_count, getDevice=lambda: 0,
                                  CUDARuntimeError=CUDARuntimeError),
    memory=types.SimpleNamespace(OutOfMemoryError=MemoryError))
"""


def fake_cupy(monkeypatch, devices=1, nvrtc="present"):
    monkeypatch.setenv("FAKE_CUPY_DEVICES", str(devices))
    monkeypatch.setenv("FAKE_CUPY_NVRTC", nvrtc)
    cupy = types.ModuleType("cupy")
    cupy.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
    exec(FAKE_CUPY, cupy.__dict__)
    return cupy


@pytest.fixture
def with_cupy(monkeypatch):
    """install(module_or_None): CuPy is that module (None: not installed) for this test,
    with the backend choice starting afresh and restored afterwards."""
    monkeypatch.delenv(backends.BACKEND_ENV, raising=False)
    monkeypatch.setattr(backends, "_instances", {})
    monkeypatch.setattr(backends, "_auto", None)
    saved = sys.modules.pop("gpu_tensorarray.backends.cupy", None)
    had_attribute = hasattr(backends, "cupy")
    saved_attribute = getattr(backends, "cupy", None)

    def install(module):
        monkeypatch.setitem(sys.modules, "cupy", module)
        return module

    yield install
    sys.modules.pop("gpu_tensorarray.backends.cupy", None)
    if saved is not None:
        sys.modules["gpu_tensorarray.backends.cupy"] = saved
    if had_attribute:
        backends.cupy = saved_attribute
    elif hasattr(backends, "cupy"):
        del backends.cupy


def test_kernels_compile_when_the_backend_is_created(with_cupy, monkeypatch):
    cupy = with_cupy(fake_cupy(monkeypatch))
    backend = backends.get_backend("cuda")
    assert backend.name == "cupy" and backend.device == "cuda:0"
    assert len(cupy.compiled) == 1 and cupy.compiled[0] > 0     # before any gather or scatter
    assert backends.default_backend()[0] == "cupy"


def test_a_kernel_cache_folder_others_can_write_is_refused_before_anything_loads_from_it(with_cupy, monkeypatch,
                                                                                        tmp_path):
    """CuPy runs whatever binary its cache folder holds under the name it computes (a SHA-1 of
    the source and options anyone can compute): a folder another user can write, or owns, would
    run their kernels here. The backend refuses it, saying what to do; CUPY_CACHE_IN_MEMORY=1
    (no folder) and a folder of one's own are used."""
    cupy = with_cupy(fake_cupy(monkeypatch))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(shared))
    with pytest.raises(UnavailableError, match=r"kernel cache folder .*shared can be written by its group or by "
                                               r"others \(mode 777\).*CUPY_CACHE_DIR"):
        backends.get_backend("cuda")
    assert cupy.compiled == []                      # refused before compiling, or loading, anything
    with pytest.warns(RuntimeWarning, match="can be written by its group or by others"):
        assert backends.get_backend().name == "numpy"
    from gpu_tensorarray.backends import cupy as cupy_backend
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    assert cupy_backend.untrusted_cache(str(own)) is None
    with monkeypatch.context() as patched:
        patched.setattr(cupy_backend.os, "getuid", lambda: os.stat(own).st_uid + 1)
        assert "belongs to user" in cupy_backend.untrusted_cache(str(own))
    own.chmod(0o770)            # group-writable: fine for a group of one's own (a umask of 002 makes it)
    for alone in (True, False):
        with monkeypatch.context() as patched:
            patched.setattr(cupy_backend, "_own_group", lambda gid, uid: alone)
            problem = cupy_backend.untrusted_cache(str(own))
        assert problem is None if alone else "can be written by its group" in problem
    monkeypatch.setenv("CUPY_CACHE_IN_MEMORY", "1")
    monkeypatch.setattr(backends, "_instances", {})
    assert backends.get_backend("cuda").name == "cupy" and len(cupy.compiled) == 1


@pytest.mark.parametrize("users, gid, members, alone", [
    ([("me", 1000, 1000)], 1000, [], True),                          # a user private group
    ([("me", 1000, 1000)], 1000, ["me"], True),
    ([("me", 1000, 100), ("you", 1001, 100)], 100, [], False),       # a shared primary group
    ([("me", 1000, 100)], 100, ["you"], False),                      # another member listed
    ([("me", 1000, 1000)], 5, [], False),                            # nobody's group (setgid programs')
])
def test_a_group_of_one_s_own_is_told_from_a_shared_one(monkeypatch, users, gid, members, alone):
    """OpenSSH's rule for a group-writable file: the group's only member is its owner."""
    from gpu_tensorarray.backends import cupy as cupy_backend
    entry = types.SimpleNamespace
    fake_pwd = types.SimpleNamespace(
        getpwuid=lambda uid: next(entry(pw_name=n) for n, u, g in users if u == uid),
        getpwall=lambda: [entry(pw_name=n, pw_uid=u, pw_gid=g) for n, u, g in users])
    fake_grp = types.SimpleNamespace(getgrgid=lambda g: entry(gr_mem=members))
    monkeypatch.setitem(sys.modules, "pwd", fake_pwd)
    monkeypatch.setitem(sys.modules, "grp", fake_grp)
    assert cupy_backend._own_group(gid, 1000) is alone


def test_automatic_choice_falls_back_to_numpy_and_says_why_once(with_cupy, monkeypatch):
    with_cupy(fake_cupy(monkeypatch, nvrtc="missing"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = backends.get_backend()
        second = backends.get_backend()
        name, reason = backends.default_backend()
    assert first is second and first.name == "numpy" and name == "numpy"
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    for text in (messages[0], reason):
        assert "libnvrtc.so.12" in text
        assert 'pip install "cuda-toolkit[nvrtc]==12.*"' in text
    assert "numpy" in messages[0]


@pytest.mark.parametrize("first_use", ["array", "raw op", "default_backend"])
def test_the_fallback_warning_names_the_callers_line_and_how_to_choose_the_cpu(with_cupy, monkeypatch, first_use):
    import gpu_tensorarray as gta
    from gpu_tensorarray import raw_ops
    with_cupy(fake_cupy(monkeypatch, devices=0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        {"array": lambda: gta.TensorArray("float32", size=1), "raw op": lambda: raw_ops.TensorArrayV3(1, "float32"),
         "default_backend": backends.default_backend}[first_use]()
    warned = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(warned) == 1 and warned[0].filename == __file__, [(w.filename, w.lineno) for w in warned]
    assert "GPU_TENSORARRAY_BACKEND=numpy" in str(warned[0].message)


def test_no_device_falls_back_to_numpy(with_cupy, monkeypatch):
    with_cupy(fake_cupy(monkeypatch, devices=0))
    with pytest.warns(RuntimeWarning, match="No usable CUDA device"):
        assert backends.get_backend().name == "numpy"
    with pytest.raises(UnavailableError, match="No usable CUDA device"):
        backends.get_backend("cuda")


def test_explicit_request_names_the_install_command(with_cupy, monkeypatch):
    with_cupy(fake_cupy(monkeypatch, nvrtc="missing"))
    with pytest.raises(UnavailableError, match=r'pip install "cuda-toolkit\[nvrtc\]==12\.\*"'):
        backends.get_backend("cuda")
    with pytest.raises(UnavailableError, match="cuda:1"):
        backends.get_backend("cuda:1")


def test_cupy_not_installed(with_cupy):
    with_cupy(None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # not having CuPy is normal: no warning
        assert backends.default_backend() == ("numpy", "cupy is not installed")
        assert backends.get_backend().name == "numpy"
    with pytest.raises(UnavailableError, match=r'pip install "gpu_tensorarray\[cuda\]"'):
        backends.get_backend("cupy")


def test_info_reports_why_the_default_was_chosen(with_cupy, monkeypatch, capsys):
    with_cupy(fake_cupy(monkeypatch, nvrtc="missing"))
    with pytest.warns(RuntimeWarning):
        assert main(["info"]) == 0
    out = capsys.readouterr().out
    cupy_line = next(line for line in out.splitlines() if line.strip().startswith("cupy"))
    assert "unavailable" in cupy_line and "cuda-toolkit[nvrtc]" in cupy_line
    assert "  numpy     available" in out
    default = next(line for line in out.splitlines() if line.startswith("default backend:"))
    assert default.startswith("default backend: numpy (cupy is installed but unusable")


def test_info_says_when_the_environment_names_an_unusable_backend(with_cupy, monkeypatch, capsys):
    with_cupy(fake_cupy(monkeypatch, nvrtc="missing"))
    monkeypatch.setenv(backends.BACKEND_ENV, "cuda")
    assert main(["info"]) == 1
    default = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("default backend:"))
    assert "GPU_TENSORARRAY_BACKEND=cuda, which cannot load here" in default
    with pytest.raises(UnavailableError):
        backends.get_backend()


def _cli_env():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(backends.BACKEND_ENV, None)
    return env


def test_demo_and_info_run_on_the_fallback(tmp_path):
    # In a new process, with the fake CuPy installed where Python finds it.
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text(FAKE_CUPY)
    env = dict(_cli_env(), PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", FAKE_CUPY_NVRTC="missing")
    for command, expected in (("demo", ["backend: numpy on cpu", "nothing double counted: True"]),
                              ("info", ["default backend: numpy (cupy is installed but unusable"])):
        result = subprocess.run([sys.executable, "-m", "gpu_tensorarray", command], capture_output=True, text=True,
                                cwd=ROOT, env=env, timeout=300)
        assert result.returncode == 0, result.stderr
        assert all(line in result.stdout for line in expected), result.stdout
        assert result.stderr.count("RuntimeWarning: gpu_tensorarray: CuPy is installed, but the cupy backend "
                                   "cannot be used") == 1, result.stderr
        assert "libnvrtc.so.12" in result.stderr and "Traceback" not in result.stderr
        assert "gpu_tensorarray/__main__.py:" in result.stderr and "<frozen" not in result.stderr    # its line


def test_info_into_a_closed_pipe_exits_quietly():
    reader, writer = os.pipe()
    os.close(reader)                 # nobody reads: the first write fails with EPIPE
    try:
        result = subprocess.run([sys.executable, "-m", "gpu_tensorarray", "info"], stdout=writer,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_cli_env(), timeout=300)
    finally:
        os.close(writer)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert result.returncode == 1


def test_info_piped_into_head():
    result = subprocess.run(f"{sys.executable} -m gpu_tensorarray info | head -1", shell=True,
                            capture_output=True, text=True, cwd=ROOT, env=_cli_env(), timeout=300)
    assert result.stdout.startswith("gpu_tensorarray ") and result.stdout.count("\n") == 1
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert np.__version__ in result.stdout
