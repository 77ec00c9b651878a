//! Node attributes (`AttrValue`), with TensorFlow's variants.

use std::borrow::Cow;

use crate::{CompactTensor, DType, Shape, Tensor, TensorError};

/// A function reference with its instantiation attributes (`NameAttrList`).
#[derive(Clone, Debug, PartialEq)]
pub struct FuncAttr {
    pub name: String,
    pub attrs: Attrs,
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
///
/// A map with the part of `BTreeMap`'s interface the crates use, kept as one sorted
/// vector: a node has a handful of attributes, and a `BTreeMap` spends a ~1.2 KB leaf on
/// even one of them, which at 10⁵ nodes and the few copies of a graph a clustered run
/// holds was hundreds of megabytes of memory faulted in (issue 19). Lookups are binary
/// searches; iteration is in name order, as a `BTreeMap`'s.
#[derive(Clone, Default, PartialEq)]
pub struct Attrs(Vec<(String, AttrValue)>);

impl Attrs {
    pub fn new() -> Attrs {
        Attrs(Vec::new())
    }

    /// Empty, with room for `n` attributes.
    pub fn with_capacity(n: usize) -> Attrs {
        Attrs(Vec::with_capacity(n))
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut AttrValue> {
        self.position(key).ok().map(|i| &mut self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the value it replaced.
    pub fn insert(&mut self, key: String, value: AttrValue) -> Option<AttrValue> {
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        self.position(key).ok().map(|i| self.0.remove(i).1)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &AttrValue)> + ExactSizeIterator + Clone {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (&String, &mut AttrValue)> + ExactSizeIterator {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator + Clone {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &AttrValue> + ExactSizeIterator + Clone {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut AttrValue> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }

    /// Keeps the attributes `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut AttrValue) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
    }
}

impl std::fmt::Debug for Attrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Extend<(String, AttrValue)> for Attrs {
    fn extend<I: IntoIterator<Item = (String, AttrValue)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl FromIterator<(String, AttrValue)> for Attrs {
    /// Later entries replace earlier ones of the same name, as in a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (String, AttrValue)>>(iter: I) -> Attrs {
        let mut v: Vec<(String, AttrValue)> = iter.into_iter().collect();
        // A stable sort keeps equal names in arrival order; the last one wins.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, AttrValue)> = Vec::with_capacity(v.len());
        for e in v {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        Attrs(out)
    }
}

impl<const N: usize> From<[(String, AttrValue); N]> for Attrs {
    fn from(entries: [(String, AttrValue); N]) -> Attrs {
        entries.into_iter().collect()
    }
}

impl IntoIterator for Attrs {
    type Item = (String, AttrValue);
    type IntoIter = std::vec::IntoIter<(String, AttrValue)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Attrs {
    type Item = (&'a String, &'a AttrValue);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, AttrValue)>,
        fn(&'a (String, AttrValue)) -> (&'a String, &'a AttrValue),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl std::ops::Index<&str> for Attrs {
    type Output = AttrValue;
    fn index(&self, key: &str) -> &AttrValue {
        self.get(key).unwrap_or_else(|| panic!("no attribute '{key}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(v: i64) -> AttrValue {
        AttrValue::I(v)
    }

    #[test]
    fn attrs_behave_as_a_sorted_map() {
        let mut a = Attrs::new();
        assert!(a.is_empty());
        assert_eq!(a.insert("b".into(), i(2)), None);
        assert_eq!(a.insert("a".into(), i(1)), None);
        assert_eq!(a.insert("c".into(), i(3)), None);
        assert_eq!(a.insert("b".into(), i(20)), Some(i(2)));
        assert_eq!(a.keys().map(String::as_str).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(a.get("b"), Some(&i(20)));
        assert_eq!(a["c"], i(3));
        assert!(a.contains_key("a") && !a.contains_key("d"));
        *a.get_mut("a").unwrap() = i(10);
        assert_eq!(a.remove("a"), Some(i(10)));
        assert_eq!(a.remove("a"), None);
        a.retain(|k, _| k != "c");
        assert_eq!(a.len(), 1);
        assert_eq!(format!("{a:?}"), "{\"b\": I(20)}");
    }

    #[test]
    fn collecting_attrs_sorts_them_and_keeps_the_last_of_a_name() {
        let a: Attrs =
            [("z", 1), ("a", 2), ("z", 3), ("m", 4)].into_iter().map(|(k, v)| (k.to_string(), i(v))).collect();
        let b: std::collections::BTreeMap<String, AttrValue> =
            [("z", 1), ("a", 2), ("z", 3), ("m", 4)].into_iter().map(|(k, v)| (k.to_string(), i(v))).collect();
        assert_eq!(
            a.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>(),
            b.into_iter().collect::<Vec<_>>()
        );
        let mut c = a.clone();
        c.extend([("b".to_string(), i(5)), ("z".to_string(), i(6))]);
        assert_eq!(c.values().cloned().collect::<Vec<_>>(), [i(2), i(5), i(4), i(6)]);
        assert_ne!(a, c);
    }
}
