"""The public API reads as documented: real signatures, docstrings on every public
method, and type hints on every public parameter and return (mypy checks their use:
the mypy step of .ci/run, configured in pyproject.toml)."""

import ast
import inspect
from pathlib import Path

import pytest

import gpu_tensorarray as gta
import gpu_tensorarray.tf2 as tf2
from gpu_tensorarray import errors, raw_ops
from gpu_tensorarray.tf2_array import TF2TensorArray

METHODS = ["write", "read", "gather", "scatter", "unstack", "split", "concat", "stack", "close", "size", "grad",
           "identity"]
PROPERTIES = ["handle", "flow", "dtype", "dynamic_size", "element_shape"]
FUNCTIONS = [gta.to_numpy, gta.stats, gta.device, gta.get_backend, gta.available_backends, gta.default_backend,
             gta.accumulation, gta.get_accumulation, gta.tensor_array_mode, gta.set_tensor_array_mode,
             gta.get_tensor_array_mode, gta.check_gradients, tf2.constant, tf2.range, tf2.function]


def _annotated(function):
    """Parameters (but self/cls) without a hint, and whether the return has one."""
    signature = inspect.signature(function)
    bare = [name for name, parameter in signature.parameters.items()
            if name not in ("self", "cls") and parameter.annotation is inspect.Parameter.empty]
    return bare, signature.return_annotation is not inspect.Signature.empty


def test_the_class_signature_shows_the_parameters():
    parameters = list(inspect.signature(gta.TensorArray).parameters)
    assert parameters == ["dtype", "size", "dynamic_size", "clear_after_read", "tensor_array_name", "handle", "flow",
                          "infer_shape", "element_shape", "colocate_with_first_write_call", "name", "mode"]
    assert list(inspect.signature(tf2.TensorArray).parameters) == parameters
    torch_bridge = pytest.importorskip("gpu_tensorarray.torch")     # its __new__ passes the arguments on
    assert list(inspect.signature(torch_bridge.TensorArray).parameters) == parameters[:-1] + ["device", "mode"]


@pytest.mark.parametrize("cls", [gta.TensorArray, TF2TensorArray], ids=["tf1", "tf2"])
@pytest.mark.parametrize("method", METHODS)
def test_every_public_method_has_a_docstring_and_hints(cls, method):
    function = getattr(cls, method)
    assert len((inspect.getdoc(function) or "").split()) >= 5, f"{cls.__name__}.{method} has no docstring"
    bare, returns = _annotated(function)
    assert not bare and returns, f"{cls.__name__}.{method}: no hint for {bare or 'the return'}"


@pytest.mark.parametrize("name", PROPERTIES)
def test_every_property_has_a_docstring_and_a_type(name):
    for cls in (gta.TensorArray, TF2TensorArray):
        prop = inspect.getattr_static(cls, name)
        assert isinstance(prop, property) and (prop.__doc__ or inspect.getdoc(getattr(gta.TensorArray, name)))
        assert "return" in prop.fget.__annotations__, f"{cls.__name__}.{name}"


def test_the_class_docstring_lists_its_arguments():
    doc = inspect.getdoc(gta.TensorArray)
    for name in ("dtype", "size", "dynamic_size", "clear_after_read", "element_shape", "mode"):
        assert f"{name}:" in doc or f"{name}," in doc, name


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__qualname__)
def test_the_public_functions_have_docstrings_and_hints(function):
    assert inspect.getdoc(function)
    bare, returns = _annotated(function)
    assert not bare and returns, f"{function.__qualname__}: no hint for {bare or 'the return'}"


def test_tf2_has_exactly_the_names_its_docstring_lists():
    public = {name for name in vars(tf2) if not name.startswith("_")}      # no np, no typing names
    assert public == set(tf2.__all__)
    for name in tf2.__all__:
        assert f"``{name}``" in tf2.__doc__, name


def test_the_errors_are_real_classes_with_tensorflows_codes():
    codes = {name: getattr(errors, name).error_code for name in errors.__all__ if name.endswith("Error")}
    assert codes == {"OpError": 2, "CancelledError": 1, "UnknownError": 2, "InvalidArgumentError": 3,
                     "DeadlineExceededError": 4, "NotFoundError": 5, "AlreadyExistsError": 6,
                     "PermissionDeniedError": 7, "ResourceExhaustedError": 8, "FailedPreconditionError": 9,
                     "AbortedError": 10, "OutOfRangeError": 11, "UnimplementedError": 12, "InternalError": 13,
                     "UnavailableError": 14, "DataLossError": 15, "UnauthenticatedError": 16}
    assert issubclass(errors.InvalidArgumentError, ValueError) and issubclass(errors.OutOfRangeError, IndexError)
    for name in codes:
        cls = getattr(errors, name)
        assert cls.__module__ == "gpu_tensorarray.errors" and inspect.getdoc(cls)


# -- raw_ops: its hints are in raw_ops.pyi (the module itself stays bare) ------------------------------

def _stub_signatures():
    """name -> [(parameter, default as source text or None)], and the names with hints everywhere."""
    tree = ast.parse((Path(raw_ops.__file__).with_suffix(".pyi")).read_text())
    found, typed = {}, set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            arguments = node.args.args
            defaults = [None] * (len(arguments) - len(node.args.defaults)) + [ast.unparse(d) for d in node.args.defaults]
            found[node.name] = [(argument.arg, default) for argument, default in zip(arguments, defaults)]
            if node.returns is not None and all(argument.annotation is not None for argument in arguments):
                typed.add(node.name)
    return found, typed


def _runtime(function):
    return [(name, None if p.default is inspect.Parameter.empty else repr(p.default))
            for name, p in inspect.signature(function).parameters.items()]


@pytest.mark.parametrize("name", raw_ops.__all__)
def test_the_raw_ops_stub_matches_the_functions(name):
    stubs, typed = _stub_signatures()
    assert name in typed, f"raw_ops.pyi: {name} lacks hints"
    normalise = [(parameter, default if default is None else repr(ast.literal_eval(default)))
                 for parameter, default in stubs[name]]
    assert normalise == _runtime(getattr(raw_ops, name))


@pytest.mark.parametrize("name", raw_ops.__all__)
def test_the_raw_ops_stub_matches_tensorflow(name):
    tf = pytest.importorskip("tensorflow")
    stubs, _ = _stub_signatures()
    assert [parameter for parameter, _ in stubs[name]] == list(inspect.signature(getattr(tf.raw_ops, name)).parameters)


def test_the_torch_bridge_without_torch_is_a_module_not_found_error_that_says_what_to_install():
    # A missing module's error, as Python's own: pytest.importorskip and `except ModuleNotFoundError`
    # treat the bridge as they treat torch (a plain ImportError made the suite fail without torch).
    import subprocess
    import sys
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import gpu_tensorarray.torch\n"
            "except ModuleNotFoundError as error:\n    print(error.name, '|', error)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    name, _, message = result.stdout.partition(" | ")
    assert name == "torch" and "gpu_tensorarray.torch needs PyTorch: pip install 'gpu_tensorarray[torch]'" in message
