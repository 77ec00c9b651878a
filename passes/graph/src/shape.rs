//! Static shapes as TensorFlow's shape inference knows them: unknown rank,
//! or a list of dimensions each known or unknown.

use std::fmt;

/// One dimension: `Some(n)` known, `None` unknown (TensorFlow's `-1`).
pub type Dim = Option<i64>;

/// A possibly partial static shape (`TensorShapeProto`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    /// `None` is unknown rank; `Some(vec![])` is a scalar.
    pub dims: Option<Vec<Dim>>,
}

impl Shape {
    pub fn unknown() -> Shape {
        Shape { dims: None }
    }
    pub fn scalar() -> Shape {
        Shape { dims: Some(vec![]) }
    }
    pub fn known(dims: &[usize]) -> Shape {
        Shape { dims: Some(dims.iter().map(|&d| Some(d as i64)).collect()) }
    }
    pub fn with_dims(dims: Vec<Dim>) -> Shape {
        Shape { dims: Some(dims) }
    }
    pub fn rank(&self) -> Option<usize> {
        self.dims.as_ref().map(Vec::len)
    }
    /// All dimensions, if the shape is fully known.
    pub fn to_known(&self) -> Option<Vec<usize>> {
        self.dims.as_ref()?.iter().map(|d| d.and_then(|n| usize::try_from(n).ok())).collect()
    }
    pub fn is_fully_known(&self) -> bool {
        self.to_known().is_some()
    }
    /// The element count, if the shape is fully known and the count fits in a `usize`.
    pub fn num_elements(&self) -> Option<usize> {
        self.to_known()?.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
    }
}

/// Equality of two short slices (dimensions, shape vectors) element by element: the
/// standard library's slice equality calls `memcmp`, whose call costs more than the
/// comparison itself for the handful of elements a shape has — and shapes are compared on
/// every call of a compiled function and every host step.
#[inline]
pub fn same_dims<T: Copy + PartialEq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// TensorFlow's (numpy's) broadcast of two concrete shapes, aligned at their last
/// dimensions; `None` when a pair of dimensions differs and neither is 1. The one concrete
/// broadcast the compiler's analysis and the interpreter's kernels share (the registry's
/// `broadcast_shapes` is its symbolic form, over partly known [`Shape`]s).
pub fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let at = |s: &[usize], i: usize| if i + s.len() >= n { s[i + s.len() - n] } else { 1 };
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Some(x),
            (1, y) => Some(y),
            _ => None,
        })
        .collect()
}

/// TensorFlow's `BroadcastGradientArgs` of two known shapes: the axes (of the broadcast
/// result) each operand was broadcast along, to be summed away in its gradient. An axis
/// where both are 1 is in both lists, as TensorFlow reports it. `None` when the shapes do
/// not broadcast. The registry's value function, the compiler's folding and the
/// interpreter's kernel all use this one.
pub fn broadcast_gradient_args(s0: &[i64], s1: &[i64]) -> Option<(Vec<i64>, Vec<i64>)> {
    let n = s0.len().max(s1.len());
    let at = |s: &[i64], i: usize| if i + s.len() >= n { s[i + s.len() - n] } else { 1 };
    let (mut r0, mut r1) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (x, y) = (at(s0, i), at(s1, i));
        if x == 1 {
            r0.push(i as i64);
        }
        if y == 1 {
            r1.push(i as i64);
        }
        if x != y && x != 1 && y != 1 {
            return None;
        }
    }
    Some((r0, r1))
}

impl fmt::Display for Shape {
    /// `[2,?,3]`, `[]` for a scalar, `[*]` for unknown rank.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.dims {
            None => f.write_str("[*]"),
            Some(d) => {
                f.write_str("[")?;
                for (i, x) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    match x {
                        Some(n) => write!(f, "{n}")?,
                        None => f.write_str("?")?,
                    }
                }
                f.write_str("]")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concrete_broadcasts_follow_tensorflow() {
        assert_eq!(broadcast_dims(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_dims(&[4, 1], &[1, 5]), Some(vec![4, 5]));
        assert_eq!(broadcast_dims(&[], &[2]), Some(vec![2]));
        assert_eq!(broadcast_dims(&[0, 3], &[1, 3]), Some(vec![0, 3]));
        assert_eq!(broadcast_dims(&[1], &[0]), Some(vec![0]));
        assert_eq!(broadcast_dims(&[2, 3], &[2]), None);
        assert_eq!(broadcast_gradient_args(&[2, 3], &[3]), Some((vec![], vec![0])));
        assert_eq!(broadcast_gradient_args(&[4, 1], &[1, 5]), Some((vec![1], vec![0])));
        assert_eq!(broadcast_gradient_args(&[], &[2, 2]), Some((vec![0, 1], vec![])));
        assert_eq!(broadcast_gradient_args(&[1, 3], &[1, 3]), Some((vec![0], vec![0])));
        assert_eq!(broadcast_gradient_args(&[2], &[3]), None);
    }
}
