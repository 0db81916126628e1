"""Rules with one home: a rule two modules need is worked out in one place that both call, so
the two cannot drift apart (a copy that is fixed in one place stays wrong in the other).

Each test checks the home against a plain reference written here, and that the modules which
need the rule call it rather than work it out again (read from their source)."""

import ast
from pathlib import Path

import pytest

from gpu_tensorarray import shapes

PACKAGE = Path(shapes.__file__).parent


def _source(module):
    return (PACKAGE / module).read_text(encoding="utf-8")


def _calls(module):
    """The names a module's source calls (f(...) and x.f(...))."""
    names = set()
    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", None))
    return names


@pytest.mark.parametrize("shape, expected", [(None, None), ((), ()), ((3,), ()), ((None, 2, 3), (2, 3))])
def test_except_first_drops_the_first_dimension(shape, expected):
    """A concat's element_shape_except0: unknown stays unknown, a scalar element gives ()."""
    assert shapes.except_first(shape) == expected


@pytest.mark.parametrize("module", ["tensor_array.py", "torch/autograd.py"])
def test_concat_callers_take_element_shape_except0_from_shapes(module):
    """The V3 class's concat and the torch bridge's concat (read_value) both pass
    shapes.except_first(element_shape), and neither slices the element shape itself."""
    assert "except_first" in _calls(module)
    assert "element_shape[1:]" not in _source(module)
