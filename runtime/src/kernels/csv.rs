//! `DecodeCSV` (`tf.io.decode_csv`, TensorFlow's `decode_csv_op.cc`): each string of
//! `records` split into fields, one output per column, every output of `records`' shape.
//! Input pipelines exported with their model carry it.
//!
//! As TensorFlow splits a record (byte by byte): a line break is skipped only where a field
//! starts; an unquoted field runs to the delimiter and may hold no quote (under
//! `use_quote_delim`) and no line break; a quoted field runs to a quote followed by the
//! delimiter or the end, `""` inside it being one quote; a record ending in the delimiter has
//! a last, empty field. With `select_cols` only those columns are kept, and the rest of a
//! record after the last of them is not read. An empty field, or one equal to `na_value`,
//! takes the column's default (an error when the column has none); numbers are read as
//! `safe_strto*` reads them ([`super::c_number`]). Records are read in row-major order and
//! the first error wins, in TensorFlow's words.

use autoclust_graph::{AttrValue, DType, ListValue, Node, Tensor};

use super::c_number::{parse_f32, parse_f64, parse_i32, parse_i64};
use super::string::strings;
use super::{tensor_of, Inputs, Outputs, PureFn};
use crate::error::{KResult, KernelError};

/// The attributes, checked as TensorFlow's kernel constructor checks them.
struct Format {
    types: Vec<DType>,
    delim: u8,
    quotes: bool,
    na_value: Vec<u8>,
    select: Vec<usize>,
}

/// The kernel, or `None` if `node` is not a `DecodeCSV`.
pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "DecodeCSV" {
        return Ok(None);
    }
    let bad = |m: &str| Err(KernelError::invalid(m.to_string()));
    let types = match node.attr("OUT_TYPE") {
        Some(AttrValue::List(ListValue::Type(t))) => t.clone(),
        _ => return Err(KernelError::Attr("OUT_TYPE".into())),
    };
    let string_attr = |name: &str, default: &[u8]| match node.attr(name) {
        None => Ok(default.to_vec()),
        Some(AttrValue::S(s)) => Ok(s.clone()),
        Some(_) => Err(KernelError::Attr(name.into())),
    };
    let select: Vec<i64> = match node.attr("select_cols") {
        None => Vec::new(),
        Some(AttrValue::List(ListValue::I(v))) => v.clone(),
        Some(AttrValue::List(l)) if l.is_empty() => Vec::new(),
        Some(_) => return Err(KernelError::Attr("select_cols".into())),
    };
    if !select.is_empty() && select.len() != types.len() {
        return bad("select_cols should match output size");
    }
    if select.windows(2).any(|w| w[0] >= w[1]) {
        return bad("select_cols should be strictly increasing indices");
    }
    if select.first().is_some_and(|&c| c < 0) {
        return bad("select_cols should be non-negative indices");
    }
    let delim = string_attr("field_delim", b",")?;
    if delim.len() != 1 {
        return bad("field_delim should be only 1 char");
    }
    let format = Format {
        types,
        delim: delim[0],
        quotes: super::attr_bool_or(node, "use_quote_delim", true)?,
        na_value: string_attr("na_value", b"")?,
        select: select.iter().map(|&c| c as usize).collect(),
    };
    Ok(Some(Box::new(move |inp: Inputs| decode_csv(&inp, &format))))
}

/// One column's values as they are parsed.
enum Column {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Str(Vec<Vec<u8>>),
}

fn decode_csv(inp: &Inputs, format: &Format) -> KResult<Outputs> {
    let n_out = format.types.len();
    super::arity(inp, n_out + 1)?;
    let records = &inp[0];
    let lines = strings(records, "records")?;
    let defaults = &inp[1..];
    for (i, d) in defaults.iter().enumerate() {
        if d.rank() > 1 {
            return Err(KernelError::invalid("Each record default should be at most rank 1"));
        }
        if d.num_elements() > 1 {
            return Err(KernelError::invalid(format!(
                "There should only be 1 default per field but field {i} has {}",
                d.num_elements()
            )));
        }
        if d.dtype != format.types[i] {
            return Err(KernelError::DType(d.dtype));
        }
    }
    let mut columns: Vec<Column> = format
        .types
        .iter()
        .map(|t| match t {
            DType::Float32 => Ok(Column::F32(Vec::with_capacity(lines.len()))),
            DType::Float64 => Ok(Column::F64(Vec::with_capacity(lines.len()))),
            DType::Int32 => Ok(Column::I32(Vec::with_capacity(lines.len()))),
            DType::Int64 => Ok(Column::I64(Vec::with_capacity(lines.len()))),
            DType::String => Ok(Column::Str(Vec::with_capacity(lines.len()))),
            &d => Err(KernelError::DType(d)),
        })
        .collect::<KResult<_>>()?;
    for (r, line) in lines.iter().enumerate() {
        let fields = split(line, format)?;
        if fields.len() != n_out {
            return Err(KernelError::invalid(format!("Expect {n_out} fields but have {} in record {r}", fields.len())));
        }
        for (f, (field, column)) in fields.iter().zip(columns.iter_mut()).enumerate() {
            let missing = field.is_empty() || *field == format.na_value;
            let default = &defaults[f];
            if missing && default.num_elements() != 1 {
                return Err(KernelError::invalid(format!("Field {f} is required but missing in record {r}!")));
            }
            let invalid = |what: &str| {
                KernelError::invalid(format!(
                    "Field {f} in record {r} is not a valid {what}: {}",
                    String::from_utf8_lossy(field)
                ))
            };
            match column {
                Column::F32(v) => v.push(match missing {
                    true => default.as_f32().expect("checked dtype")[0],
                    false => parse_f32(field).ok_or_else(|| invalid("float"))?,
                }),
                Column::F64(v) => v.push(match missing {
                    true => default.as_f64().expect("checked dtype")[0],
                    false => parse_f64(field).ok_or_else(|| invalid("double"))?,
                }),
                Column::I32(v) => v.push(match missing {
                    true => default.as_i32().expect("checked dtype")[0],
                    false => parse_i32(field).ok_or_else(|| invalid("int32"))?,
                }),
                Column::I64(v) => v.push(match missing {
                    true => default.as_i64().expect("checked dtype")[0],
                    false => parse_i64(field).ok_or_else(|| invalid("int64"))?,
                }),
                Column::Str(v) => v.push(match missing {
                    true => default.as_strings().expect("checked dtype")[0].clone(),
                    false => field.clone(),
                }),
            }
        }
    }
    let shape = records.shape.clone();
    Ok(columns
        .into_iter()
        .map(|c| match c {
            Column::F32(v) => tensor_of(shape.clone(), v),
            Column::F64(v) => tensor_of(shape.clone(), v),
            Column::I32(v) => tensor_of(shape.clone(), v),
            Column::I64(v) => tensor_of(shape.clone(), v),
            Column::Str(v) => Tensor::from_strings(shape.clone(), v).expect("one string per record"),
        })
        .collect())
}

/// The fields of a record that `select_cols` keeps (all of them without it).
fn split(rec: &[u8], format: &Format) -> KResult<Vec<Vec<u8>>> {
    let (delim, quotes, select) = (format.delim, format.quotes, &format.select);
    let bad = |m: &str| Err(KernelError::invalid(m.to_string()));
    let mut fields = Vec::new();
    if rec.is_empty() {
        return Ok(fields);
    }
    let n = rec.len();
    let (mut idx, mut parsed, mut kept) = (0usize, 0usize, 0usize);
    let wanted = |parsed: usize, kept: usize| select.is_empty() || select.get(kept) == Some(&parsed);
    while idx < n {
        if rec[idx] == b'\n' || rec[idx] == b'\r' {
            idx += 1;
            continue;
        }
        let include = wanted(parsed, kept);
        let quoted = quotes && rec[idx] == b'"';
        let mut field = Vec::new();
        if !quoted {
            while idx < n && rec[idx] != delim {
                if (quotes && rec[idx] == b'"') || rec[idx] == b'\n' || rec[idx] == b'\r' {
                    return bad("Unquoted fields cannot have quotes/CRLFs inside");
                }
                field.push(rec[idx]);
                idx += 1;
            }
            idx += 1;
        } else {
            idx += 1;
            while idx + 1 < n && !(rec[idx] == b'"' && rec[idx + 1] == delim) {
                if rec[idx] != b'"' {
                    field.push(rec[idx]);
                    idx += 1;
                } else {
                    if rec[idx + 1] != b'"' {
                        return bad("Quote inside a string has to be escaped by another quote");
                    }
                    field.push(b'"');
                    idx += 2;
                }
            }
            let closed = idx < n && rec[idx] == b'"' && (idx == n - 1 || rec[idx + 1] == delim);
            if !closed {
                return bad("Quoted field has to end with quote followed by delim or end");
            }
            idx += 2;
        }
        parsed += 1;
        if include {
            fields.push(field);
            kept += 1;
            if !select.is_empty() && kept == select.len() {
                return Ok(fields);
            }
        }
    }
    if wanted(parsed, kept) && rec[n - 1] == delim {
        fields.push(Vec::new());
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::compute;
    use crate::kernels::tests_support::node;

    fn strs(shape: Vec<usize>, v: &[&str]) -> Tensor {
        Tensor::from_strings(shape, v.iter().map(|s| s.as_bytes().to_vec()).collect()).unwrap()
    }

    fn csv(attrs: &[(&str, AttrValue)], records: Tensor, defaults: Vec<Tensor>) -> Result<Vec<Tensor>, String> {
        let types = AttrValue::List(ListValue::Type(defaults.iter().map(|d| d.dtype).collect()));
        let mut all = vec![("OUT_TYPE", types)];
        all.extend(attrs.iter().cloned());
        let n = node("DecodeCSV", &all);
        let mut ins = vec![records];
        ins.extend(defaults);
        compute(&n, &ins).map_err(|e| e.to_string())
    }

    fn texts(t: &Tensor) -> Vec<String> {
        t.as_strings().unwrap().iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    }

    /// Two string columns with defaults "d" and "e": TensorFlow 2.21's splits of each record.
    #[test]
    fn records_split_as_tensorflow_splits_them() {
        let defaults = || vec![strs(vec![1], &["d"]), strs(vec![1], &["e"])];
        let ok = |rec: &str| {
            let o = csv(&[], strs(vec![], &[rec]), defaults()).unwrap();
            (texts(&o[0]).remove(0), texts(&o[1]).remove(0))
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(ok("a,"), pair("a", "e"));
        assert_eq!(ok(","), pair("d", "e"));
        assert_eq!(ok("\"\",x"), pair("d", "x"));
        assert_eq!(ok("\"a,b\",c"), pair("a,b", "c"));
        assert_eq!(ok("\"a\"\"b\",c"), pair("a\"b", "c"));
        assert_eq!(ok("\"\"\"\",x"), pair("\"", "x"));
        assert_eq!(ok("\na,b"), pair("a", "b"));
        assert_eq!(ok("a,\nb"), pair("a", "b"));
        let err = |rec: &str| csv(&[], strs(vec![], &[rec]), defaults()).unwrap_err();
        assert!(err("a,b,").contains("Expect 2 fields but have 3 in record 0"));
        assert!(err("a,\n").contains("Expect 2 fields but have 1 in record 0"));
        assert!(err("").contains("Expect 2 fields but have 0 in record 0"));
        for rec in ["\"\"\",x", "\"a", "\"a\"\""] {
            assert!(err(rec).contains("Quoted field has to end with quote followed by delim or end"), "{rec:?}");
        }
        for rec in ["\"a\"b,c", "\"a\" ,b", "\"a\"\n"] {
            assert!(err(rec).contains("Quote inside a string has to be escaped by another quote"), "{rec:?}");
        }
        for rec in ["a\"b,c", " \"a\",b", "a,b\n", "a\r\n,b"] {
            assert!(err(rec).contains("Unquoted fields cannot have quotes/CRLFs inside"), "{rec:?}");
        }
        // Without quote handling a quote is an ordinary byte; a space delimiter.
        let o = csv(&[("use_quote_delim", AttrValue::B(false))], strs(vec![], &["\"a,b\""]), defaults()).unwrap();
        assert_eq!((texts(&o[0]), texts(&o[1])), (vec!["\"a".to_string()], vec!["b\"".to_string()]));
        let four = (0..4).map(|_| strs(vec![1], &["?"])).collect();
        let o = csv(&[("field_delim", AttrValue::S(b" ".to_vec()))], strs(vec![], &[" a b "]), four).unwrap();
        let got: Vec<String> = o.iter().map(|t| texts(t).remove(0)).collect();
        assert_eq!(got, ["?", "a", "b", "?"]);
    }

    /// Typed columns, `na_value`, `select_cols` and TensorFlow's errors.
    #[test]
    fn columns_convert_as_tensorflow_converts_them() {
        let o = csv(
            &[],
            strs(vec![2], &["1,2.5,x", "3,4,y"]),
            vec![
                Tensor::from_i32(vec![0], vec![]).unwrap(),
                Tensor::from_f32(vec![0], vec![]).unwrap(),
                strs(vec![0], &[]),
            ],
        )
        .unwrap();
        assert_eq!((o[0].as_i32().unwrap(), o[1].as_f32().unwrap()), (&[1, 3][..], &[2.5, 4.0][..]));
        assert_eq!(texts(&o[2]), ["x", "y"]);
        let na = [("na_value", AttrValue::S(b"NA".to_vec()))];
        let o = csv(&na, strs(vec![3], &["NA,1", "2,NA", ",3"]), vec![Tensor::scalar_i32(7), Tensor::scalar_i32(8)])
            .unwrap();
        assert_eq!((o[0].as_i32().unwrap(), o[1].as_i32().unwrap()), (&[7, 2, 7][..], &[1, 8, 3][..]));
        // Records of any shape: outputs of that shape.
        let o =
            csv(&[], strs(vec![2, 2], &["1,a", "2,b", "3,c", ",d"]), vec![Tensor::scalar_i32(0), strs(vec![0], &[])])
                .unwrap();
        assert_eq!((o[0].shape.clone(), o[0].as_i32().unwrap()), (vec![2, 2], &[1, 2, 3, 0][..]));
        let sel = |cols: Vec<i64>| [("select_cols", AttrValue::List(ListValue::I(cols)))];
        let two = || vec![strs(vec![0], &[]), strs(vec![1], &["z"])];
        let o = csv(&sel(vec![1, 3]), strs(vec![], &["a,b,c,d"]), two()).unwrap();
        assert_eq!((texts(&o[0]), texts(&o[1])), (vec!["b".to_string()], vec!["d".to_string()]));
        let o = csv(&sel(vec![1, 2]), strs(vec![], &["a,b,"]), two()).unwrap();
        assert_eq!(texts(&o[1]), ["z"]);
        // The rest of a record after the last selected column is not read.
        let one = || vec![strs(vec![0], &[])];
        assert_eq!(texts(&csv(&sel(vec![0]), strs(vec![], &["a,b\"x\""]), one()).unwrap()[0]), ["a"]);
        assert!(csv(&sel(vec![1]), strs(vec![], &["a\"x,b"]), one()).unwrap_err().contains("Unquoted fields"));
        assert!(csv(&sel(vec![1, 2]), strs(vec![], &["a,b"]), two())
            .unwrap_err()
            .contains("Expect 2 fields but have 1 in record 0"));
        let int = || vec![Tensor::from_i32(vec![0], vec![]).unwrap()];
        let e = csv(&[], strs(vec![2], &["1", "1e3"]), int()).unwrap_err();
        assert!(e.contains("Field 0 in record 1 is not a valid int32: 1e3"), "{e}");
        let e = csv(&[], strs(vec![], &["1.5x"]), vec![Tensor::from_f32(vec![0], vec![]).unwrap()]).unwrap_err();
        assert!(e.contains("Field 0 in record 0 is not a valid float: 1.5x"), "{e}");
        let e = csv(&[], strs(vec![], &[""]), vec![Tensor::from_f64(vec![0], vec![]).unwrap()]).unwrap_err();
        assert!(e.contains("Expect 1 fields but have 0 in record 0"), "{e}");
        let e =
            csv(&[], strs(vec![], &[",1"]), vec![Tensor::from_i64(vec![0], vec![]).unwrap(), Tensor::scalar_i64(0)])
                .unwrap_err();
        assert!(e.contains("Field 0 is required but missing in record 0!"), "{e}");
        let e = csv(&[], strs(vec![], &["1"]), vec![Tensor::from_i32(vec![2], vec![1, 2]).unwrap()]).unwrap_err();
        assert!(e.contains("There should only be 1 default per field but field 0 has 2"), "{e}");
        let e = csv(&sel(vec![1, 1]), strs(vec![], &["1"]), two()).unwrap_err();
        assert!(e.contains("select_cols should be strictly increasing indices"), "{e}");
        let e = csv(&[("field_delim", AttrValue::S(b"ab".to_vec()))], strs(vec![], &["1"]), one()).unwrap_err();
        assert!(e.contains("field_delim should be only 1 char"), "{e}");
    }
}
