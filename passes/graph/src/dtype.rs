//! Element types, numbered exactly as TensorFlow's `DataType` enum.

use std::fmt;

/// A TensorFlow element type. The discriminants are TensorFlow's `DataType`
/// numbers, so GraphDef import and export are a cast; reference types
/// (`DT_FLOAT_REF` = 101, …) are kept as [`DType::Ref`] so nothing is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Float32,
    Float64,
    Int32,
    UInt8,
    Int16,
    Int8,
    String,
    Complex64,
    Int64,
    Bool,
    QInt8,
    QUInt8,
    QInt32,
    BFloat16,
    QInt16,
    QUInt16,
    UInt16,
    Complex128,
    Float16,
    Resource,
    Variant,
    UInt32,
    UInt64,
    /// `T_REF`: TensorFlow numbers it `T + 100`. Only legacy ref variables use these.
    Ref(RefBase),
    /// A number TensorFlow may define that this build does not know; kept verbatim.
    Other(i32),
}

/// The base of a reference type, stored as its TensorFlow number (1..=23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RefBase(pub i32);

impl DType {
    /// TensorFlow's enum number (`DT_FLOAT` = 1, …, `DT_FLOAT_REF` = 101).
    pub fn to_tf(self) -> i32 {
        match self {
            DType::Float32 => 1,
            DType::Float64 => 2,
            DType::Int32 => 3,
            DType::UInt8 => 4,
            DType::Int16 => 5,
            DType::Int8 => 6,
            DType::String => 7,
            DType::Complex64 => 8,
            DType::Int64 => 9,
            DType::Bool => 10,
            DType::QInt8 => 11,
            DType::QUInt8 => 12,
            DType::QInt32 => 13,
            DType::BFloat16 => 14,
            DType::QInt16 => 15,
            DType::QUInt16 => 16,
            DType::UInt16 => 17,
            DType::Complex128 => 18,
            DType::Float16 => 19,
            DType::Resource => 20,
            DType::Variant => 21,
            DType::UInt32 => 22,
            DType::UInt64 => 23,
            DType::Ref(RefBase(b)) => b + 100,
            DType::Other(n) => n,
        }
    }

    /// The type for TensorFlow's enum number. `0` (`DT_INVALID`) is `None`.
    pub fn from_tf(n: i32) -> Option<DType> {
        Some(match n {
            0 => return None,
            1 => DType::Float32,
            2 => DType::Float64,
            3 => DType::Int32,
            4 => DType::UInt8,
            5 => DType::Int16,
            6 => DType::Int8,
            7 => DType::String,
            8 => DType::Complex64,
            9 => DType::Int64,
            10 => DType::Bool,
            11 => DType::QInt8,
            12 => DType::QUInt8,
            13 => DType::QInt32,
            14 => DType::BFloat16,
            15 => DType::QInt16,
            16 => DType::QUInt16,
            17 => DType::UInt16,
            18 => DType::Complex128,
            19 => DType::Float16,
            20 => DType::Resource,
            21 => DType::Variant,
            22 => DType::UInt32,
            23 => DType::UInt64,
            101..=123 => DType::Ref(RefBase(n - 100)),
            other => DType::Other(other),
        })
    }

    /// The short name used by the native text format and the safetensors /
    /// JSON outputs (`float32`, `int64`, …) — the names numpy and safetensors use.
    pub fn name(self) -> String {
        match self {
            DType::Float32 => "float32".into(),
            DType::Float64 => "float64".into(),
            DType::Int32 => "int32".into(),
            DType::UInt8 => "uint8".into(),
            DType::Int16 => "int16".into(),
            DType::Int8 => "int8".into(),
            DType::String => "string".into(),
            DType::Complex64 => "complex64".into(),
            DType::Int64 => "int64".into(),
            DType::Bool => "bool".into(),
            DType::QInt8 => "qint8".into(),
            DType::QUInt8 => "quint8".into(),
            DType::QInt32 => "qint32".into(),
            DType::BFloat16 => "bfloat16".into(),
            DType::QInt16 => "qint16".into(),
            DType::QUInt16 => "quint16".into(),
            DType::UInt16 => "uint16".into(),
            DType::Complex128 => "complex128".into(),
            DType::Float16 => "float16".into(),
            DType::Resource => "resource".into(),
            DType::Variant => "variant".into(),
            DType::UInt32 => "uint32".into(),
            DType::UInt64 => "uint64".into(),
            DType::Ref(RefBase(b)) => match DType::from_tf(b) {
                Some(base) if !matches!(base, DType::Ref(_)) => format!("{}_ref", base.name()),
                _ => format!("dtype{}", b + 100),
            },
            DType::Other(n) => format!("dtype{n}"),
        }
    }

    /// TensorFlow's `DataTypeString`, the name its error messages use: C's `float`, `double`
    /// and `half` for the three IEEE widths, [`DType::name`] otherwise.
    pub fn tf_name(self) -> String {
        match self {
            DType::Float32 => "float".into(),
            DType::Float64 => "double".into(),
            DType::Float16 => "half".into(),
            d => d.name(),
        }
    }

    /// Parses a name printed by [`DType::name`]; also accepts TensorFlow's
    /// `DT_FLOAT`-style names and Python's short aliases (`float`, `double`, `half`).
    pub fn from_name(s: &str) -> Option<DType> {
        let all = [
            DType::Float32,
            DType::Float64,
            DType::Int32,
            DType::UInt8,
            DType::Int16,
            DType::Int8,
            DType::String,
            DType::Complex64,
            DType::Int64,
            DType::Bool,
            DType::QInt8,
            DType::QUInt8,
            DType::QInt32,
            DType::BFloat16,
            DType::QInt16,
            DType::QUInt16,
            DType::UInt16,
            DType::Complex128,
            DType::Float16,
            DType::Resource,
            DType::Variant,
            DType::UInt32,
            DType::UInt64,
        ];
        if let Some(d) = all.iter().find(|d| d.name() == s) {
            return Some(*d);
        }
        match s {
            "float" | "DT_FLOAT" => return Some(DType::Float32),
            "double" | "DT_DOUBLE" => return Some(DType::Float64),
            "half" | "DT_HALF" => return Some(DType::Float16),
            _ => {}
        }
        if let Some(base) = s.strip_suffix("_ref") {
            let b = DType::from_name(base)?;
            return Some(DType::Ref(RefBase(b.to_tf())));
        }
        if let Some(n) = s.strip_prefix("dtype") {
            return n.parse().ok().and_then(DType::from_tf);
        }
        if let Some(rest) = s.strip_prefix("DT_") {
            let lower = rest.to_ascii_lowercase();
            return all.iter().copied().find(|d| d.name() == lower);
        }
        None
    }

    /// Size in bytes of one element for the fixed-width numeric types.
    pub fn size_of(self) -> Option<usize> {
        Some(match self {
            DType::Float32 | DType::Int32 | DType::UInt32 | DType::QInt32 => 4,
            DType::Float64 | DType::Int64 | DType::UInt64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
            DType::Int16 | DType::UInt16 | DType::Float16 | DType::BFloat16 => 2,
            DType::QInt16 | DType::QUInt16 => 2,
            DType::Int8 | DType::UInt8 | DType::Bool | DType::QInt8 | DType::QUInt8 => 1,
            _ => return None,
        })
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64 | DType::Float16 | DType::BFloat16)
    }

    /// `float16` or `bfloat16` (stored as their bits; computed through float32).
    pub fn is_half(self) -> bool {
        matches!(self, DType::Float16 | DType::BFloat16)
    }

    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::Int8
                | DType::Int16
                | DType::Int32
                | DType::Int64
                | DType::UInt8
                | DType::UInt16
                | DType::UInt32
                | DType::UInt64
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf_numbers_round_trip() {
        for n in 1..=23 {
            let d = DType::from_tf(n).unwrap();
            assert_eq!(d.to_tf(), n);
            assert_eq!(DType::from_name(&d.name()), Some(d));
            let r = DType::from_tf(n + 100).unwrap();
            assert_eq!(r.to_tf(), n + 100);
            assert_eq!(DType::from_name(&r.name()), Some(r), "{}", r.name());
        }
        assert_eq!(DType::from_tf(0), None);
        assert_eq!(DType::from_tf(77), Some(DType::Other(77)));
        assert_eq!(DType::from_name("DT_FLOAT"), Some(DType::Float32));
        assert_eq!(DType::from_name("DT_INT64"), Some(DType::Int64));
    }
}
