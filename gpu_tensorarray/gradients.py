"""Gradients of the TensorArray ops (tensorflow/python/ops/tensor_array_grad.py) and
TensorFlow's grad-source rule. The tape that runs them is tape.py; the
finite-difference checker is gradcheck.py.

The gradient functions follow TensorFlow's one for one: each wraps the forward
handle in a TensorArray, asks it for the gradient array of the current gradient
computation (``.grad(source, flow)``, i.e. TensorArrayGradV3) and runs the adjoint
op on it:

    forward op   flow given to TensorArrayGradV3   op on the gradient array
    ReadV3       the read's flow_in                write(index, grad)
    WriteV3      the write barrier flow            read(index)
    GatherV3     the gather's flow_in              scatter(indices, grad)
    ScatterV3    the write barrier flow            gather(indices)
    ConcatV3     the concat's flow_in              split(grad, lengths=the concat's lengths)
    SplitV3      the write barrier flow            concat()

TensorFlow finds the source of a gradient computation in the name of the incoming
gradient tensor (``_GetGradSource``: "gradients/..." -> "gradients",
"gradients_1/..." -> "gradients_1"). There are no named tensors here, so every
gradient function takes that name as ``grad_name``; the tape passes
"<source>/<op type>_grad".
"""

import functools

from .errors import InvalidArgumentError
from .registry import Handle, registry
from .tensor_array import TensorArray

__all__ = [
    "NOT_DIFFERENTIABLE", "GRADIENTS", "Op", "grad_source", "gradient_function",
    "read_grad", "write_grad", "gather_grad", "scatter_grad", "concat_grad", "split_grad",
]

# -- _GetGradSource ---------------------------------------------------------------------------

def grad_source(name):
    """TensorFlow's ``_GetGradSource``: the name of the gradient computation that a
    gradient tensor or op named ``name`` belongs to. ``name`` is a string or an object
    with a ``.name``. Splits on "/", keeps the tokens up to the last one that starts
    with "gradients". "gradients_1/foo" -> "gradients_1"; "outer/gradients/foo" ->
    "outer/gradients"; a name with no such token raises InvalidArgumentError (a
    ValueError, as TensorFlow's)."""
    return _grad_source(getattr(name, "name", name))


@functools.lru_cache(maxsize=1024)
def _grad_source(name):
    name_tokens = name.split("/")
    grad_pos = [i for i, x in enumerate(name_tokens) if x.startswith("gradients")]
    if not grad_pos:
        raise InvalidArgumentError(
            "Expected op/tensor name to start with gradients (excluding scope)"
            f", got: {name}. This means that a tf.gradients op with "
            "this op in its dependency path has a custom name that does not start "
            "with 'gradients'. Please make sure all calls to tf.gradients that "
            "have non-empty `name` arguments use names that start with "
            "'gradients'.")
    return "/".join(name_tokens[:grad_pos[-1] + 1])


# -- recorded ops -----------------------------------------------------------------------------

# The dtype attribute's name per op type (TensorFlow's: reads have "dtype", writes "T").
DTYPE_ATTR = {
    "TensorArrayReadV3": "dtype", "TensorArrayGatherV3": "dtype", "TensorArrayConcatV3": "dtype",
    "TensorArrayWriteV3": "T", "TensorArrayScatterV3": "T", "TensorArraySplitV3": "T",
}
# Ops whose first output is a value that can be a target (READS), and ops whose
# ``value`` input, at this position, can be a source (WRITE_VALUE).
READS = frozenset(("TensorArrayReadV3", "TensorArrayGatherV3", "TensorArrayConcatV3"))
WRITE_VALUE = {"TensorArrayWriteV3": 2, "TensorArrayScatterV3": 2, "TensorArraySplitV3": 1}


class Op:
    """One op as a gradient function sees it (TensorFlow's ``op``): ``type``, ``inputs``
    and ``outputs`` in the V3 op's order, attributes through ``get_attr``. Inputs hold
    host indices and lengths as the op converted them (a range for stack)."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "array")

    def __init__(self, type, inputs, outputs, attrs=None):
        inputs = tuple(inputs)
        if inputs and type in DTYPE_ATTR and not isinstance(inputs[0], Handle):
            inputs = (Handle(registry.lookup(inputs[0])),) + inputs[1:]   # a name handle
        self.type = type
        self.inputs = inputs
        self.outputs = tuple(outputs)
        self.attrs = dict(attrs or {})
        #: The TensorArray resource (registry storage) the op ran on.
        self.array = registry.lookup(inputs[0]) if inputs and type in DTYPE_ATTR else None

    def get_attr(self, name):
        try:
            return self.attrs[name]
        except KeyError:
            raise InvalidArgumentError(f"Operation {self.type} has no attr named '{name}'.") from None

    def __repr__(self):
        return f"<Op {self.type} on {self.inputs[0].name!r}>"


# -- the gradient functions -------------------------------------------------------------------

def _grad_array(handle, dtype, flow, grad_name):
    # As TensorFlow: wrap the forward handle, then TensorArrayGradV3 with ``flow``.
    return (TensorArray(dtype=dtype, handle=handle, flow=flow, colocate_with_first_write_call=False, mode="tf1")
            .grad(source=grad_source(grad_name), flow=flow))


def _write_barrier(flow):
    # TensorFlow's identity(flow) with a control dependency on the forward op's
    # flow_out, so the gradient array is made after the forward write ran (and sees
    # the final size of a dynamic array). Ops here run in program order and a tape
    # differentiates after the whole forward pass: the identity is all that is left.
    return flow


def read_grad(op, grad, grad_name="gradients"):
    """TensorArrayReadV3: write ``grad`` at the read's index of the gradient array
    (reads of one slot add up there). Returns [None, None, flow]."""
    handle, index, flow = op.inputs
    g = _grad_array(handle, op.get_attr("dtype"), flow, grad_name)
    w_g = g.write(index, grad)
    return [None, None, w_g.flow]


def write_grad(op, flow, grad_name="gradients"):
    """TensorArrayWriteV3: the gradient of the written value is the gradient array's
    element at that index (zeros when nothing was read there). ``flow`` is the
    incoming flow gradient. Returns [None, None, grad, flow]."""
    handle, index = op.inputs[0], op.inputs[1]
    flow = _write_barrier(flow)
    g = _grad_array(handle, op.get_attr("T"), flow, grad_name)
    grad = g.read(index)
    return [None, None, grad, flow]


def gather_grad(op, grad, grad_name="gradients"):
    """TensorArrayGatherV3 (and stack): scatter ``grad``'s rows to the gathered
    indices of the gradient array (repeated indices add). Returns [None, None, flow]."""
    handle, indices, flow = op.inputs
    g = _grad_array(handle, op.get_attr("dtype"), flow, grad_name)
    u_g = g.scatter(indices, grad)
    return [None, None, u_g.flow]


def scatter_grad(op, flow, grad_name="gradients"):
    """TensorArrayScatterV3 (and unstack): gather the scattered indices of the
    gradient array. Returns [None, None, grad, flow]."""
    handle, indices = op.inputs[0], op.inputs[1]
    flow = _write_barrier(flow)
    g = _grad_array(handle, op.get_attr("T"), flow, grad_name)
    grad = g.gather(indices)
    return [None, None, grad, flow]


def concat_grad(op, grad, unused_lengths_grad=None, grad_name="gradients"):
    """TensorArrayConcatV3: split ``grad`` into the gradient array with the lengths
    the forward concat returned. Returns [None, flow]."""
    handle, flow = op.inputs
    lengths = op.outputs[1]
    g = _grad_array(handle, op.get_attr("dtype"), flow, grad_name)
    u_g = g.split(grad, lengths=lengths)
    return [None, u_g.flow]


def split_grad(op, flow, grad_name="gradients"):
    """TensorArraySplitV3: concat the gradient array (its marked size: the forward's
    number of split pieces). Returns [None, grad, None, flow]."""
    handle = op.inputs[0]
    flow = _write_barrier(flow)
    g = _grad_array(handle, op.get_attr("T"), flow, grad_name)
    grad = g.concat()
    return [None, grad, None, flow]


class _NotDifferentiable:
    def __repr__(self):
        return "NOT_DIFFERENTIABLE"


#: Marks ops that have no gradient (TensorFlow's ops.NotDifferentiable).
NOT_DIFFERENTIABLE = _NotDifferentiable()

#: Op type -> gradient function, or NOT_DIFFERENTIABLE (tensor_array_grad.py's registrations).
GRADIENTS = {
    "TensorArrayV3": NOT_DIFFERENTIABLE,
    "TensorArrayGradV3": NOT_DIFFERENTIABLE,
    "TensorArrayGradWithShape": NOT_DIFFERENTIABLE,
    "TensorArraySizeV3": NOT_DIFFERENTIABLE,
    "TensorArrayCloseV3": NOT_DIFFERENTIABLE,
    "TensorArrayReadV3": read_grad,
    "TensorArrayWriteV3": write_grad,
    "TensorArrayGatherV3": gather_grad,
    "TensorArrayScatterV3": scatter_grad,
    "TensorArrayConcatV3": concat_grad,
    "TensorArraySplitV3": split_grad,
}


def gradient_function(op_type):
    """The gradient function of ``op_type``, or None for a non-differentiable op;
    LookupError (TensorFlow's) for an op with no registration."""
    fn = GRADIENTS.get(op_type)
    if fn is None:
        raise LookupError(f"No gradient defined for operation of type '{op_type}'")
    return None if fn is NOT_DIFFERENTIABLE else fn


