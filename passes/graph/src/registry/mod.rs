//! The op registry: what autoclust knows about each supported op.
//!
//! An [`OpSchema`] is a small `OpDef`: the op's input and output arguments
//! (fixed dtypes, dtypes from a type attribute, lists repeated by an `N`
//! attribute or typed by a `list(type)` attribute), its attributes with
//! their defaults and allowed dtypes, whether it is stateful, its resource
//! effect (TensorFlow's resource-operation table in [`crate::effects`]) and
//! its static-shape function. Shape functions follow TensorFlow's
//! (`common_shape_fns.cc` and the ops' `SetShapeFn`s), including the
//! broadcasting rules with unknown dimensions, and read small integer
//! operands (shapes, axes, permutations, masks' begin/end) when they are
//! known at graph-build time — see [`InferCtx::value`].
//!
//! Ops not in the registry are opaque: the verifier never rejects them.

mod audio;
mod bitwise;
mod build;
mod calls;
mod codecs;
mod control_flow;
mod ctc;
mod detection;
mod diag;
mod files;
mod image;
mod indexing;
mod linalg;
mod lists;
mod lookup;
mod nn;
mod ops;
mod optional;
mod parsing;
mod quantization;
mod rearrange;
mod shapes;
mod sparse;
mod spectral;
mod strided;
mod strings;
mod summary;

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::ListValue;
use crate::{AttrValue, DType, Dim, Node, ResourceKind, Shape};

pub use sparse::resolve_reshape as resolve_sparse_reshape;
pub use strided::{strided_slice, SliceSpec};

/// Where an argument's dtype comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeRule {
    /// Always this dtype.
    Fixed(DType),
    /// The node's `type` attribute of this name.
    Attr(&'static str),
    /// The node's `list(type)` attribute of this name: one argument per element.
    ListAttr(&'static str),
}

/// One input or output argument of an op (`OpDef.ArgDef`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    pub name: &'static str,
    pub ty: TypeRule,
    /// When set, the argument is repeated as many times as this int attribute says.
    pub number_attr: Option<&'static str>,
}

/// The kind of value an attribute must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Type,
    Int,
    Float,
    Bool,
    String,
    Shape,
    Tensor,
    ListInt,
    ListType,
    ListFloat,
    ListString,
    ListShape,
}

impl AttrKind {
    pub fn name(self) -> &'static str {
        match self {
            AttrKind::Type => "a type",
            AttrKind::Int => "an int",
            AttrKind::Float => "a float",
            AttrKind::Bool => "a bool",
            AttrKind::String => "a string",
            AttrKind::Shape => "a shape",
            AttrKind::Tensor => "a tensor",
            AttrKind::ListInt => "a list of ints",
            AttrKind::ListType => "a list of types",
            AttrKind::ListFloat => "a list of floats",
            AttrKind::ListString => "a list of strings",
            AttrKind::ListShape => "a list of shapes",
        }
    }

    pub fn accepts(self, v: &AttrValue) -> bool {
        match self {
            AttrKind::Type => v.as_type().is_some(),
            AttrKind::Int => v.as_int().is_some(),
            AttrKind::Float => v.as_float().is_some(),
            AttrKind::Bool => v.as_bool().is_some(),
            AttrKind::String => matches!(v, AttrValue::S(_)),
            AttrKind::Shape => v.as_shape().is_some(),
            AttrKind::Tensor => v.tensor_type().is_some(),
            AttrKind::ListInt => v.as_int_list().is_some(),
            AttrKind::ListType => v.as_type_list().is_some(),
            AttrKind::ListFloat => matches!(v, AttrValue::List(ListValue::F(_) | ListValue::Empty)),
            AttrKind::ListString => matches!(v, AttrValue::List(ListValue::S(_) | ListValue::Empty)),
            AttrKind::ListShape => matches!(v, AttrValue::List(ListValue::Shape(_) | ListValue::Empty)),
        }
    }
}

/// The default of an attribute the node may omit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AttrDefault {
    /// The node must set it.
    Required,
    /// May be omitted; shape functions treat absence as TensorFlow does.
    Optional,
    Type(DType),
    Int(i64),
    Bool(bool),
}

/// One attribute of an op (`OpDef.AttrDef`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttrSpec {
    pub name: &'static str,
    pub kind: AttrKind,
    pub default: AttrDefault,
    /// For a type attribute: the dtypes it may take (`None`: any).
    pub allowed: Option<&'static [DType]>,
}

/// A coarse grouping of ops, for passes that treat families alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpFamily {
    /// Graph sources: Const, Placeholder, PlaceholderWithDefault.
    Source,
    /// Resource-variable ops.
    Resource,
    /// Elementwise ops of one input.
    Unary,
    /// Elementwise ops of two or more broadcasting inputs.
    Binary,
    /// Reductions over axes.
    Reduction,
    /// Matrix products.
    MatMul,
    /// Ops that move or reshape data without arithmetic.
    Shape,
    /// Neural-network ops and their gradients.
    NeuralNet,
    /// Identity, IdentityN, StopGradient, NoOp.
    Control,
    /// Stateful random-number ops (RandomUniform, …).
    Random,
    /// Function calls and functional control flow (PartitionedCall, If, While, …).
    Call,
    /// TensorFlow 1 control flow (Switch, Merge, Enter, Exit, NextIteration, LoopCond, ControlTrigger).
    ControlFlow,
    /// Per-step containers: the StackV2 and TensorArrayV3 families.
    Container,
    /// Session lookup tables: the HashTableV2 family.
    LookupTable,
}

/// Computes output shapes from the inputs' facts.
pub type ShapeFn = fn(&InferCtx<'_>) -> Result<Vec<Shape>, String>;
/// Computes the (partially) known integer values of small outputs.
pub type ValueFn = fn(&InferCtx<'_>) -> Vec<Option<Vec<Dim>>>;

/// What autoclust knows about one op.
#[derive(Debug)]
pub struct OpSchema {
    pub name: &'static str,
    pub family: OpFamily,
    pub inputs: &'static [ArgSpec],
    pub outputs: &'static [ArgSpec],
    pub attrs: &'static [AttrSpec],
    /// The op must not be merged, duplicated or constant-folded: TensorFlow's
    /// `is_stateful`, and also every op that touches a resource variable
    /// (TensorFlow gets the same effect from the op's resource input).
    pub is_stateful: bool,
    pub(crate) shape_fn: ShapeFn,
    pub(crate) value_fn: Option<ValueFn>,
}

impl OpSchema {
    /// The op's resource effect from TensorFlow's resource-operation table.
    pub fn resource_kind(&self) -> Option<ResourceKind> {
        crate::effects::table_kind(self.name)
    }

    /// The inputs that are resource handles (fixed dtype `resource`), in order: for a
    /// variable op, the variables it reads or writes.
    pub fn resource_inputs(&self) -> impl Iterator<Item = usize> + '_ {
        self.inputs.iter().enumerate().filter(|(_, a)| a.ty == TypeRule::Fixed(DType::Resource)).map(|(i, _)| i)
    }

    /// The attribute spec of `name`.
    pub fn attr(&self, name: &str) -> Option<&'static AttrSpec> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// Runs the shape function on already-typed inputs.
    pub fn infer_shapes(&self, ctx: &InferCtx<'_>) -> Result<Vec<Shape>, String> {
        (self.shape_fn)(ctx)
    }

    /// Runs the value function (empty when the op has none).
    pub fn infer_values(&self, ctx: &InferCtx<'_>) -> Vec<Option<Vec<Dim>>> {
        self.value_fn.map(|f| f(ctx)).unwrap_or_default()
    }
}

/// What inference knows about one data input of a node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct InputFacts<'a> {
    /// `None` when the producer is an opaque op.
    pub dtype: Option<DType>,
    pub shape: &'a Shape,
    /// The elements of a small integer tensor (flat, row-major), each known or not.
    pub value: Option<&'a [Dim]>,
    /// For a resource handle: the variable's dtype and shape, when the handle
    /// comes from a `VarHandleOp` (directly or through identities).
    pub handle: Option<(DType, &'a Shape)>,
}

/// The shape of an input nothing is known about.
pub static UNKNOWN_SHAPE: Shape = Shape { dims: None };

/// The context a shape or value function sees.
#[derive(Debug)]
pub struct InferCtx<'a> {
    pub node: &'a Node,
    pub inputs: &'a [InputFacts<'a>],
    /// The output dtypes, already resolved from the attributes.
    pub out_types: &'a [DType],
}

impl InferCtx<'_> {
    pub fn shape(&self, i: usize) -> &Shape {
        self.inputs[i].shape
    }
    /// The known elements of input `i`, if it is a small integer tensor.
    pub fn value(&self, i: usize) -> Option<&[Dim]> {
        self.inputs.get(i)?.value
    }
    /// Input `i` as a fully known integer list (a scalar is a one-element list).
    pub fn known_value(&self, i: usize) -> Option<Vec<i64>> {
        self.value(i)?.iter().copied().collect()
    }
    /// Input `i` as a known scalar (or one-element vector).
    pub fn scalar_value(&self, i: usize) -> Option<i64> {
        match self.value(i)? {
            [Some(x)] => Some(*x),
            _ => None,
        }
    }
    pub fn attr_int(&self, name: &str, default: i64) -> i64 {
        self.node.attr(name).and_then(AttrValue::as_int).unwrap_or(default)
    }
    pub fn attr_bool(&self, name: &str, default: bool) -> bool {
        self.node.attr(name).and_then(AttrValue::as_bool).unwrap_or(default)
    }
    pub fn attr_ints(&self, name: &str) -> Vec<i64> {
        self.node.attr(name).and_then(AttrValue::as_int_list).map(<[i64]>::to_vec).unwrap_or_default()
    }
    pub fn attr_shape(&self, name: &str) -> Option<&Shape> {
        self.node.attr(name).and_then(AttrValue::as_shape)
    }
}

/// The schema tables, one per op area. A later table never redefines an op of an earlier one
/// (checked by a unit test).
const TABLES: &[&[OpSchema]] = &[
    ops::OPS,
    indexing::OPS,
    image::OPS,
    lists::OPS,
    nn::OPS,
    calls::OPS,
    strings::OPS,
    summary::OPS,
    files::OPS,
    audio::OPS,
    parsing::OPS,
    control_flow::OPS,
    diag::OPS,
    bitwise::OPS,
    lookup::OPS,
    sparse::OPS,
    detection::OPS,
    linalg::OPS,
    rearrange::OPS,
    spectral::OPS,
    ctc::OPS,
    codecs::OPS,
    quantization::OPS,
    optional::OPS,
];

/// Op name → schema, hashed by foldhash (looked up several times per node of every graph).
type Index = HashMap<&'static str, &'static OpSchema, foldhash::fast::FixedState>;

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| TABLES.iter().flat_map(|t| t.iter()).map(|s| (s.name, s)).collect())
}

/// Every op the registry knows.
pub fn op_names() -> impl Iterator<Item = &'static str> {
    TABLES.iter().flat_map(|t| t.iter()).map(|s| s.name)
}

/// The schema of `op`, if the registry knows it.
pub fn lookup(op: &str) -> Option<&'static OpSchema> {
    index().get(op).copied()
}

/// How many outputs a node of `op` with `attrs` has: from the op's schema (list and
/// number attributes expanded), or from the signature of the `library` function the op
/// names. `None` when that is not known: an op the registry does not know (opaque), an
/// attribute the count depends on missing or malformed, a function output of list type.
pub fn output_count(op: &str, attrs: &crate::Attrs, library: &crate::Library) -> Option<usize> {
    let Some(schema) = lookup(op) else {
        let sig = &library.function(op)?.signature;
        let single = |a: &crate::ArgDef| a.number_attr.is_empty() && a.type_list_attr.is_empty();
        return sig.outputs.iter().all(single).then_some(sig.outputs.len());
    };
    let mut n = 0usize;
    for arg in schema.outputs {
        n = n.checked_add(match (arg.ty, arg.number_attr) {
            (TypeRule::ListAttr(name), _) => attrs.get(name)?.as_type_list()?.len(),
            (_, Some(name)) => {
                usize::try_from(attrs.get(name)?.as_int()?).ok().filter(|&k| k <= crate::limits::MAX_NODE_ARITY)?
            }
            (_, None) => 1,
        })?;
    }
    Some(n)
}

/// Whether the registry knows `op`.
pub fn is_known(op: &str) -> bool {
    lookup(op).is_some()
}

/// Every schema, in registry order.
pub fn all() -> impl Iterator<Item = &'static OpSchema> {
    TABLES.iter().flat_map(|t| t.iter())
}

/// TensorFlow's broadcasting of two static shapes: align trailing
/// dimensions; a dimension of 1 stretches; an unknown dimension against a
/// known `d > 1` is `d`, against 1 or unknown it stays unknown.
pub fn broadcast_shapes(a: &Shape, b: &Shape) -> Result<Shape, String> {
    let (Some(x), Some(y)) = (&a.dims, &b.dims) else { return Ok(Shape::unknown()) };
    let n = x.len().max(y.len());
    let mut out: Vec<Dim> = Vec::with_capacity(n);
    for i in 0..n {
        let dx = if i + x.len() >= n { x[i + x.len() - n] } else { Some(1) };
        let dy = if i + y.len() >= n { y[i + y.len() - n] } else { Some(1) };
        out.push(match (dx, dy) {
            (Some(1), d) | (d, Some(1)) => d,
            (Some(p), Some(q)) if p == q => Some(p),
            (Some(p), Some(q)) => {
                return Err(format!("incompatible shapes for broadcasting: {a} and {b} ({p} vs {q})"))
            }
            (Some(p), None) | (None, Some(p)) => Some(p),
            (None, None) => None,
        });
    }
    Ok(Shape::with_dims(out))
}

/// The most specific shape compatible with both (TensorFlow's `Merge`).
pub fn merge_shapes(a: &Shape, b: &Shape) -> Result<Shape, String> {
    match (&a.dims, &b.dims) {
        (None, _) => Ok(b.clone()),
        (_, None) => Ok(a.clone()),
        (Some(x), Some(y)) => {
            if x.len() != y.len() {
                return Err(format!("shapes {a} and {b} have different ranks"));
            }
            x.iter()
                .zip(y)
                .map(|(p, q)| match (p, q) {
                    (Some(p), Some(q)) if p != q => Err(format!("shapes {a} and {b} are incompatible")),
                    (Some(p), _) | (_, Some(p)) => Ok(Some(*p)),
                    (None, None) => Ok(None),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Shape::with_dims)
        }
    }
}

#[cfg(test)]
mod tests;
