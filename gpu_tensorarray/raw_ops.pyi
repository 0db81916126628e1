# The public signatures of raw_ops.py for type checkers (PEP 561): tf.raw_ops' names,
# arguments, defaults and outputs. tests/tooling/test_public_api.py keeps them equal to
# the functions' own and to TensorFlow's.
from typing import Any, NamedTuple

from .registry import Handle
from .tensor_array import DTypeLike, IntLike, IntsLike, ShapeLike, Tensor, TensorLike

__all__ = [
    "TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayGatherV3",
    "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3",
    "TensorArrayCloseV3", "TensorArrayGradV3", "TensorArrayGradWithShape",
]


class TensorArrayV3Output(NamedTuple):
    handle: Handle
    flow: Tensor


class TensorArrayConcatV3Output(NamedTuple):
    value: Tensor
    lengths: Tensor


class TensorArrayGradV3Output(NamedTuple):
    grad_handle: Handle
    flow_out: Tensor


class TensorArrayGradWithShapeOutput(NamedTuple):
    grad_handle: Handle
    flow_out: Tensor


def recording() -> bool: ...
def set_recorder(recorder: Any) -> Any: ...


def TensorArrayV3(size: IntLike, dtype: DTypeLike, element_shape: ShapeLike = None, dynamic_size: bool = False,
                  clear_after_read: bool = True, identical_element_shapes: bool = False,
                  tensor_array_name: str = "", name: str | None = None) -> TensorArrayV3Output: ...


def TensorArrayWriteV3(handle: Handle, index: IntLike, value: TensorLike, flow_in: TensorLike,
                       name: str | None = None) -> Tensor: ...


def TensorArrayReadV3(handle: Handle, index: IntLike, flow_in: TensorLike, dtype: DTypeLike,
                      name: str | None = None) -> Tensor: ...


def TensorArrayGatherV3(handle: Handle, indices: IntsLike, flow_in: TensorLike, dtype: DTypeLike,
                        element_shape: ShapeLike = None, name: str | None = None) -> Tensor: ...


def TensorArrayScatterV3(handle: Handle, indices: IntsLike, value: TensorLike, flow_in: TensorLike,
                         name: str | None = None) -> Tensor: ...


def TensorArrayConcatV3(handle: Handle, flow_in: TensorLike, dtype: DTypeLike, element_shape_except0: ShapeLike = None,
                        name: str | None = None) -> TensorArrayConcatV3Output: ...


def TensorArraySplitV3(handle: Handle, value: TensorLike, lengths: IntsLike, flow_in: TensorLike,
                       name: str | None = None) -> Tensor: ...


def TensorArraySizeV3(handle: Handle, flow_in: TensorLike, name: str | None = None) -> Tensor: ...


def TensorArrayCloseV3(handle: Handle, name: str | None = None) -> None: ...


def TensorArrayGradV3(handle: Handle, flow_in: TensorLike, source: str,
                      name: str | None = None) -> TensorArrayGradV3Output: ...


def TensorArrayGradWithShape(handle: Handle, flow_in: TensorLike, shape_to_prepend: IntsLike, source: str,
                             name: str | None = None) -> TensorArrayGradWithShapeOutput: ...
