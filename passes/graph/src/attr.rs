//! Node attributes (`AttrValue`), with TensorFlow's variants.

use std::collections::BTreeMap;

use std::borrow::Cow;

use crate::{CompactTensor, DType, Shape, Tensor, TensorError};

/// A function reference with its instantiation attributes (`NameAttrList`).
#[derive(Clone, Debug, PartialEq)]
pub struct FuncAttr {
    pub name: String,
    pub attrs: BTreeMap<String, AttrValue>,
}

/// An attribute value. Mirrors `AttrValue`'s oneof; lists are homogeneous,
/// as TensorFlow's writers always produce them.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    S(Vec<u8>),
    I(i64),
    F(f32),
    B(bool),
    Type(DType),
    Shape(Shape),
    Tensor(Tensor),
    /// A large constant kept as its file gives it (a splat, or values then repeats);
    /// see [`CompactTensor`]. Only readers make one; [`AttrValue::tensor_value`] expands it.
    Compact(CompactTensor),
    Func(FuncAttr),
    /// A placeholder naming an attribute of the enclosing function (`$T`).
    Placeholder(String),
    List(ListValue),
}

/// `AttrValue.ListValue`.
#[derive(Clone, Debug, PartialEq)]
pub enum ListValue {
    /// An empty list (TensorFlow does not record its element type).
    Empty,
    S(Vec<Vec<u8>>),
    I(Vec<i64>),
    F(Vec<f32>),
    B(Vec<bool>),
    Type(Vec<DType>),
    Shape(Vec<Shape>),
    Tensor(Vec<Tensor>),
    Func(Vec<FuncAttr>),
}

impl ListValue {
    pub fn len(&self) -> usize {
        match self {
            ListValue::Empty => 0,
            ListValue::S(v) => v.len(),
            ListValue::I(v) => v.len(),
            ListValue::F(v) => v.len(),
            ListValue::B(v) => v.len(),
            ListValue::Type(v) => v.len(),
            ListValue::Shape(v) => v.len(),
            ListValue::Tensor(v) => v.len(),
            ListValue::Func(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl AttrValue {
    pub fn as_type(&self) -> Option<DType> {
        match self {
            AttrValue::Type(t) => Some(*t),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttrValue::I(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_float(&self) -> Option<f32> {
        match self {
            AttrValue::F(x) => Some(*x),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            AttrValue::B(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::S(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }
    pub fn as_shape(&self) -> Option<&Shape> {
        match self {
            AttrValue::Shape(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            AttrValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
    /// A tensor attribute's dtype and shape, dense or compact, without expanding it.
    pub fn tensor_type(&self) -> Option<(DType, &[usize])> {
        match self {
            AttrValue::Tensor(t) => Some((t.dtype, &t.shape)),
            AttrValue::Compact(c) => Some((c.dtype(), &c.shape)),
            _ => None,
        }
    }
    /// A tensor attribute's value, a compact one expanded through the size budget;
    /// `None` if this is not a tensor.
    pub fn tensor_value(&self) -> Option<Result<Cow<'_, Tensor>, TensorError>> {
        match self {
            AttrValue::Tensor(t) => Some(Ok(Cow::Borrowed(t))),
            AttrValue::Compact(c) => Some(c.expand().map(Cow::Owned)),
            _ => None,
        }
    }
    pub fn as_func(&self) -> Option<&FuncAttr> {
        match self {
            AttrValue::Func(f) => Some(f),
            _ => None,
        }
    }
    pub fn as_type_list(&self) -> Option<&[DType]> {
        match self {
            AttrValue::List(ListValue::Type(v)) => Some(v),
            AttrValue::List(ListValue::Empty) => Some(&[]),
            _ => None,
        }
    }
    pub fn as_int_list(&self) -> Option<&[i64]> {
        match self {
            AttrValue::List(ListValue::I(v)) => Some(v),
            AttrValue::List(ListValue::Empty) => Some(&[]),
            _ => None,
        }
    }
    /// Whether this value names a function (a `func` attr or a list of them).
    pub fn is_func(&self) -> bool {
        matches!(self, AttrValue::Func(_) | AttrValue::List(ListValue::Func(_)))
    }

    /// How many attribute values the longest path through this one holds:
    /// 1 for a scalar, a list or a function without attributes; one more per
    /// function attribute (also in a list) whose attributes hold values.
    /// Iterative, so any depth can be measured (see [`crate::limits::MAX_ATTR_DEPTH`]).
    pub fn depth(&self) -> usize {
        let mut max = 0;
        let mut stack = vec![(self, 1usize)];
        while let Some((v, d)) = stack.pop() {
            max = max.max(d);
            let funcs = match v {
                AttrValue::Func(f) => std::slice::from_ref(f),
                AttrValue::List(ListValue::Func(fs)) => fs.as_slice(),
                _ => &[],
            };
            stack.extend(funcs.iter().flat_map(|f| f.attrs.values()).map(|a| (a, d + 1)));
        }
        max
    }

    /// Structural equality that compares floats and tensors bit for bit.
    pub fn bit_eq(&self, other: &AttrValue) -> bool {
        match (self, other) {
            (AttrValue::F(a), AttrValue::F(b)) => a.to_bits() == b.to_bits(),
            (AttrValue::Tensor(a), AttrValue::Tensor(b)) => a.bit_eq(b),
            (AttrValue::Compact(a), AttrValue::Compact(b)) => a.bit_eq(b),
            (AttrValue::List(ListValue::F(a)), AttrValue::List(ListValue::F(b))) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (AttrValue::List(ListValue::Tensor(a)), AttrValue::List(ListValue::Tensor(b))) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.bit_eq(y))
            }
            (AttrValue::Func(a), AttrValue::Func(b)) => func_bit_eq(a, b),
            (AttrValue::List(ListValue::Func(a)), AttrValue::List(ListValue::Func(b))) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| func_bit_eq(x, y))
            }
            (a, b) => a == b,
        }
    }
}

fn func_bit_eq(a: &FuncAttr, b: &FuncAttr) -> bool {
    a.name == b.name
        && a.attrs.len() == b.attrs.len()
        && a.attrs.iter().zip(&b.attrs).all(|((ka, va), (kb, vb))| ka == kb && va.bit_eq(vb))
}

/// A node's attributes, sorted by name (as TensorFlow's writers print them).
pub type Attrs = BTreeMap<String, AttrValue>;
