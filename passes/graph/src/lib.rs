//! The graph IR shared by every autoclust crate.
//!
//! A [`Graph`] is TensorFlow's `GraphDef` with its edges resolved to typed
//! ids: nodes keep TensorFlow's names, op names and attributes, so a graph
//! read from a `.pbtxt` and written back loses nothing. [`registry`] knows
//! the supported ops (signatures, dtype and shape inference, resource
//! effects); [`verify`] checks a graph against it; [`text`] is the native
//! text format.

pub mod arith;
mod attr;
pub mod device;
mod dtype;
pub mod effects;
pub mod einsum;
pub mod fake_quant;
pub mod function;
mod graph;
pub mod half;
pub mod infer;
pub mod jit_ops;
pub mod limits;
pub mod protocol;
pub mod registry;
mod shape;
mod tensor;
pub mod text;
pub mod verify;

pub use attr::{AttrValue, Attrs, FuncAttr, ListValue};

pub use dtype::{DType, RefBase};
pub use effects::ResourceKind;
pub use graph::{
    parse_input, ArgDef, AttrDef, CycleError, FunctionDef, GradientDef, Graph, GraphError, InputRef, Library, Lists,
    Node, NodeId, Output, PortOutOfRange, RawNode, Revision, Signature, Span, Successors, Versions,
};
pub use jit_ops::{JIT_FLOAT32_ONLY_KERNELS, JIT_FLOAT32_ONLY_OPS};
pub use protocol::ORIGIN_OP_ATTR;
pub use shape::{broadcast_dims, broadcast_gradient_args, same_dims, Dim, Shape};
pub use tensor::{
    element_shape_operand, merge_element_shapes, small_int_values, CompactTensor, ItemSummary, Tensor, TensorData,
    TensorError, TensorList, COMPACT_MIN_ELEMENTS, SMALL_INT_MAX_ELEMENTS, TENSOR_LIST_OPS,
};
