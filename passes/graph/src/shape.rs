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
