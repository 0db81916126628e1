"""What users type at the front door: dtype spellings (docs/guide.md, "Dtypes";
docs/semantics.md, "Dtype names") and the values of the environment variables."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors

PACKAGE_PARENT = Path(gta.__file__).resolve().parents[1]
# The number dtypes NumPy has and arrays here hold (bfloat16 aside: NumPy has none).
NUMBERS = {np.dtype(name) for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                       "uint64", "float16", "float32", "float64", "complex64", "complex128")}


def _dtype_of(spec):
    with gta.device("cpu"):
        return gta.TensorArray(spec, size=1).dtype


class _Mine:
    pass


class _AsNumpyDict:
    as_numpy_dtype = dict          # a DType-like object whose NumPy type is no dtype


class _TFString:
    as_numpy_dtype = object        # tf.string's


@pytest.mark.parametrize("spec", [dict, list, set, type, _Mine, _AsNumpyDict()],
                         ids=["dict", "list", "set", "type", "a-class", "as_numpy_dtype-dict"])
def test_python_types_numpy_holds_as_objects_are_refused(spec):
    assert np.dtype(getattr(spec, "as_numpy_dtype", spec)) == np.dtype(object)     # what NumPy makes of it
    with pytest.raises(errors.InvalidArgumentError) as raised:
        _dtype_of(spec)
    assert repr(spec)[:40] in str(raised.value)


@pytest.mark.parametrize("spec", ["string", "String", np.object_, np.bytes_, np.str_, np.dtype("O"), np.dtype("U3"),
                                  object, _TFString()])
def test_the_documented_string_spellings_still_name_strings(spec):
    assert _dtype_of(spec) == np.dtype(object)


@pytest.mark.parametrize("code", sorted(set(np.typecodes["All"]) | {"u1", "U1", "i8", "c16", "<f4", ">f4", "S2"}))
def test_numpy_codes_keep_numpy_meaning_and_case(code):
    # 'B' is uint8 and 'b' int8, 'F' complex64 and 'f' float32: a code is never lower-cased.
    expected = np.dtype(code)
    if expected in NUMBERS and expected.isnative:
        assert _dtype_of(code) == expected
        return
    with pytest.raises(errors.InvalidArgumentError) as raised:
        _dtype_of(code)
    assert repr(code) in str(raised.value)
    if code.lower() != code:
        assert repr(code.lower()) not in str(raised.value)


@pytest.mark.parametrize("name", ["Float32", "FLOAT64", "Double", "HALF", "Int8", "UINT16", "Complex64", "Bool"])
def test_names_take_any_case(name):
    assert _dtype_of(name) == _dtype_of(name.lower())


# -- environment variables: stripped, any case --------------------------------------------------------
def _in_a_new_process(env_values, code):
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT), PYTHONWARNINGS="ignore")
    for name in ("GPU_TENSORARRAY_BACKEND", "GPU_TENSORARRAY_MODE", "GPU_TENSORARRAY_ACCUMULATION"):
        env.pop(name, None)
    env.update(env_values)
    return subprocess.run([sys.executable, "-c", "import gpu_tensorarray as gta\n" + code], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.mark.parametrize("value", [" ATOMIC ", "Deterministic", "atomic\n", "deterministic"])
def test_the_accumulation_variable_reads_as_the_mode_and_backend_ones(value):
    done = _in_a_new_process({"GPU_TENSORARRAY_ACCUMULATION": value, "GPU_TENSORARRAY_MODE": " TF2 ",
                              "GPU_TENSORARRAY_BACKEND": " NUMPY "},
                             "print(gta.get_accumulation(), gta.get_tensor_array_mode(), gta.get_backend().name)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [value.strip().lower(), "tf2", "numpy"]


def test_an_unknown_accumulation_in_the_environment_names_the_variable():
    done = _in_a_new_process({"GPU_TENSORARRAY_ACCUMULATION": "Sequential"}, "gta.get_accumulation()")
    assert done.returncode == 1
    assert "InvalidArgumentError" in done.stderr and "GPU_TENSORARRAY_ACCUMULATION" in done.stderr, done.stderr
    assert "'Sequential'" in done.stderr, done.stderr          # what was set, not its lower-cased form
