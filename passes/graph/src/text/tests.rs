//! Tests of the native format: the spec's examples, error positions, and a
//! property test that printing then parsing is the identity.

use proptest::prelude::*;

use super::*;
use crate::{
    ArgDef, AttrDef, AttrValue, Attrs, DType, FuncAttr, FunctionDef, GradientDef, Graph, Library, ListValue, RawNode,
    Shape, Signature, Span, Tensor, Versions,
};

/// Graph equality that ignores source positions and compares values bit for bit.
fn same(a: &Graph, b: &Graph) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} nodes vs {}", a.len(), b.len()));
    }
    for (x, y) in a.nodes().iter().zip(b.nodes()) {
        let attrs_eq = x.attrs.len() == y.attrs.len()
            && x.attrs.iter().zip(&y.attrs).all(|((ka, va), (kb, vb))| ka == kb && va.bit_eq(vb));
        if x.name != y.name
            || x.op != y.op
            || x.inputs != y.inputs
            || x.control_inputs != y.control_inputs
            || x.device != y.device
            || !attrs_eq
        {
            return Err(format!("node differs:\n{x:?}\n{y:?}"));
        }
    }
    if a.versions != b.versions {
        return Err("versions differ".into());
    }
    // Spans aside, the library must match; Debug compares NaNs loosely, so
    // also compare attribute values bit for bit.
    let strip = |l: &Library| {
        let mut l = l.clone();
        for f in l.functions_mut() {
            for n in &mut f.nodes {
                n.span = None;
            }
        }
        format!("{l:?}")
    };
    if strip(&a.library) != strip(&b.library) {
        return Err(format!("library differs:\n{}\n{}", strip(&a.library), strip(&b.library)));
    }
    Ok(())
}

fn round_trip(g: &Graph) {
    let text = print_graph(g);
    let back = parse_graph(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    if let Err(e) = same(g, &back) {
        panic!("{e}\n{text}");
    }
    assert_eq!(print_graph(&back), text);
}

const SPEC_EXAMPLE: &str = r#"
versions producer=1882 min_consumer=12          # optional, at most once
x = VarHandleOp() {dtype = float32, shape = shape[], shared_name = "x", container = ""}
c = Const() {dtype = float32, value = float32[2]{1.0, 2.5}}
a = AssignVariableOp(x, c) {dtype = float32}
r = ReadVariableOp(x, ^a) {dtype = float32}
d = Placeholder() {dtype = float32, shape = shape[?,784]}
m = Const() {dtype = int32, value = int32[]{7}}
s = Split(d, m:0) {num_split = 2, T = float32} device "/device:CPU:0"
call = Scale(r) {T = float32, f = @Const_func, g = @Scale{T = float32}, l = [1, 2], e = [], p = $T}

function Const_func() -> (out: float32) {
  one = Const() {dtype = float32, value = float32[]{1.0}}
  return out = one:0
}
function Scale(x: T, n: N * int32) -> (y: T) stateful attrs {T: type, N: int >= 1 = 2} {attr_name = "v"} {
  mul = Mul(x, n) {T = $T}
  return y = mul:z:0
  control_return c = mul
}
gradient Const_func = Const_func_grad
"#;

#[test]
fn reads_the_spec_example() {
    let g = parse_graph(SPEC_EXAMPLE).unwrap();
    assert_eq!(g.versions, Some(Versions { producer: 1882, min_consumer: 12, bad_consumers: vec![] }));
    assert_eq!(g.len(), 8);
    let c = g.node(g.find("c").unwrap());
    assert_eq!(c.attr("value").unwrap().as_tensor().unwrap().as_f32().unwrap(), &[1.0, 2.5]);
    let s = g.node(g.find("s").unwrap());
    assert_eq!(s.device, "/device:CPU:0");
    assert_eq!(s.inputs[1].port, 0);
    let r = g.node(g.find("r").unwrap());
    assert_eq!(r.control_inputs, vec![g.find("a").unwrap()]);
    assert_eq!(
        g.node(g.find("d").unwrap()).attr("shape"),
        Some(&AttrValue::Shape(Shape::with_dims(vec![None, Some(784)])))
    );
    assert_eq!(g.library.functions.len(), 2);
    let scale = g.library.function("Scale").unwrap();
    assert!(scale.signature.is_stateful);
    assert_eq!(scale.signature.inputs[1].number_attr, "N");
    assert_eq!(scale.signature.inputs[1].dtype, Some(DType::Int32));
    assert_eq!(scale.signature.inputs[0].type_attr, "T");
    assert_eq!(scale.signature.attrs[1].minimum, 1);
    assert_eq!(scale.signature.attrs[1].default, Some(AttrValue::I(2)));
    assert_eq!(scale.attrs.get("attr_name"), Some(&AttrValue::S(b"v".to_vec())));
    assert_eq!(scale.ret, vec![("y".to_string(), "mul:z:0".to_string())]);
    assert_eq!(scale.control_ret, vec![("c".to_string(), "mul".to_string())]);
    assert_eq!(g.library.gradients[0].gradient_func, "Const_func_grad");
    round_trip(&g);
}

fn err(src: &str) -> (Span, String) {
    let e = parse_graph(src).unwrap_err();
    (e.span().expect("a position"), e.to_string())
}

#[test]
fn errors_carry_line_and_column() {
    let (span, msg) = err("a = Const() {dtype = float32}\nb = Neg(a {T = float32}\n");
    assert_eq!(span, Span { line: 2, column: 11 }, "{msg}");
    let (span, msg) = err("a = Const() {s = \"ab\\qc\"}\n");
    assert_eq!(span, Span { line: 1, column: 21 }, "{msg}");
    assert!(msg.contains("bad escape"), "{msg}");
    let (span, msg) = err("\n\n  b = Neg(zz)\n");
    assert_eq!(span, Span { line: 3, column: 3 });
    assert!(msg.contains("'zz'"), "{msg}");
    let (span, msg) = err("a = X()\na = Y()\n");
    assert_eq!(span.line, 2);
    assert!(msg.contains("duplicate"), "{msg}");
    let (span, msg) = err("c = Const() {value = float32[3]{1.0, 2.0}}\n");
    assert_eq!(span.line, 1);
    assert!(msg.contains("needs 3"), "{msg}");
    let (_, msg) = err("c = Const() {value = bogus}\n");
    assert!(msg.contains("unknown value 'bogus'"), "{msg}");
    let (span, msg) = err("a = X() {s = \"unterminated}\n");
    assert_eq!(span, Span { line: 1, column: 14 }, "{msg}");
    let (_, msg) = err("function f() -> () {\n  a = X()\n");
    assert!(msg.contains("needs '}'"), "{msg}");
}

#[test]
fn keeps_odd_names_floats_and_bytes() {
    let mut attrs = Attrs::new();
    attrs.insert("weird key".into(), AttrValue::S(vec![0, 255, b'"', b'\\', b'\n']));
    attrs.insert("nan".into(), AttrValue::F(f32::from_bits(0x7fc0_0001)));
    attrs.insert("neg0".into(), AttrValue::F(-0.0));
    attrs.insert("tiny".into(), AttrValue::F(1e-45));
    attrs.insert(
        "half".into(),
        AttrValue::Tensor(Tensor::from_raw(DType::Float16, vec![2], vec![0, 0x3c, 0, 0xbc]).unwrap()),
    );
    let nodes = vec![
        RawNode { name: "a b".into(), op: "X".into(), inputs: vec![], attrs, device: String::new(), span: None },
        RawNode {
            name: "3".into(),
            op: "Y".into(),
            inputs: vec!["a b:2".into(), "^a b".into()],
            attrs: Attrs::new(),
            device: "dev\"ice".into(),
            span: None,
        },
    ];
    let g = Graph::from_raw(nodes, Library::default(), None).unwrap();
    round_trip(&g);
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_][a-z0-9_./-]{0,6}",
        1 => "[ -9;-\\]_-~]{1,5}",
        1 => Just("function".to_string()),
        1 => Just("device".to_string()),
        1 => Just("return".to_string()),
    ]
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        1 => Just(Shape::unknown()),
        4 => prop::collection::vec(prop::option::of(0i64..100), 0..4).prop_map(Shape::with_dims),
    ]
}

fn arb_f32() -> impl Strategy<Value = f32> {
    prop_oneof![any::<u32>().prop_map(f32::from_bits), any::<f32>(), Just(0.1f32), Just(f32::INFINITY)]
}

fn arb_tensor() -> impl Strategy<Value = Tensor> {
    let dims = prop::collection::vec(0usize..3, 0..3);
    dims.prop_flat_map(|shape| {
        let n: usize = shape.iter().product();
        let s = shape.clone();
        prop_oneof![
            prop::collection::vec(arb_f32(), n).prop_map({
                let s = s.clone();
                move |v| Tensor::from_f32(s.clone(), v).unwrap()
            }),
            prop::collection::vec(any::<u64>().prop_map(f64::from_bits), n).prop_map({
                let s = s.clone();
                move |v| Tensor::from_f64(s.clone(), v).unwrap()
            }),
            prop::collection::vec(any::<i32>(), n).prop_map({
                let s = s.clone();
                move |v| Tensor::from_i32(s.clone(), v).unwrap()
            }),
            prop::collection::vec(any::<i64>(), n).prop_map({
                let s = s.clone();
                move |v| Tensor::from_i64(s.clone(), v).unwrap()
            }),
            prop::collection::vec(any::<bool>(), n).prop_map({
                let s = s.clone();
                move |v| Tensor::from_bool(s.clone(), v).unwrap()
            }),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4), n).prop_map({
                let s = s.clone();
                move |v| Tensor::from_strings(s.clone(), v).unwrap()
            }),
            prop::collection::vec(any::<u8>(), n * 2).prop_map(move |v| Tensor::from_raw(
                DType::BFloat16,
                s.clone(),
                v
            )
            .unwrap()),
        ]
    })
}

fn arb_dtype() -> impl Strategy<Value = DType> {
    prop_oneof![(1i32..=23), (101i32..=123), Just(77)].prop_map(|n| DType::from_tf(n).unwrap())
}

fn arb_func() -> impl Strategy<Value = FuncAttr> {
    (arb_name(), prop::collection::btree_map(arb_name(), any::<i64>().prop_map(AttrValue::I), 0..2))
        .prop_map(|(name, attrs)| FuncAttr { name, attrs: attrs.into_iter().collect() })
}

fn arb_attr() -> impl Strategy<Value = AttrValue> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..6).prop_map(AttrValue::S),
        any::<i64>().prop_map(AttrValue::I),
        arb_f32().prop_map(AttrValue::F),
        any::<bool>().prop_map(AttrValue::B),
        arb_dtype().prop_map(AttrValue::Type),
        arb_shape().prop_map(AttrValue::Shape),
        arb_tensor().prop_map(AttrValue::Tensor),
        arb_func().prop_map(AttrValue::Func),
        arb_name().prop_map(AttrValue::Placeholder),
        Just(AttrValue::List(ListValue::Empty)),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3), 1..3)
            .prop_map(|v| AttrValue::List(ListValue::S(v))),
        prop::collection::vec(any::<i64>(), 1..3).prop_map(|v| AttrValue::List(ListValue::I(v))),
        prop::collection::vec(arb_f32(), 1..3).prop_map(|v| AttrValue::List(ListValue::F(v))),
        prop::collection::vec(any::<bool>(), 1..3).prop_map(|v| AttrValue::List(ListValue::B(v))),
        prop::collection::vec(arb_dtype(), 1..3).prop_map(|v| AttrValue::List(ListValue::Type(v))),
        prop::collection::vec(arb_shape(), 1..3).prop_map(|v| AttrValue::List(ListValue::Shape(v))),
        prop::collection::vec(arb_tensor(), 1..3).prop_map(|v| AttrValue::List(ListValue::Tensor(v))),
        prop::collection::vec(arb_func(), 1..3).prop_map(|v| AttrValue::List(ListValue::Func(v))),
    ]
}

/// Nodes whose inputs name earlier nodes (data first, then control).
fn arb_graph() -> impl Strategy<Value = Graph> {
    let node = (
        arb_name(),
        arb_name(),
        prop::collection::vec((any::<prop::sample::Index>(), 0u32..3), 0..3),
        prop::collection::vec(any::<prop::sample::Index>(), 0..2),
        prop::collection::btree_map(arb_name(), arb_attr(), 0..4),
        prop_oneof![3 => Just(String::new()), 1 => "[ -~]{0,8}"],
    );
    let versions = prop::option::of((any::<i32>(), any::<i32>(), prop::collection::vec(any::<i32>(), 0..2)));
    (prop::collection::vec(node, 1..8), versions, prop::collection::vec(arb_function(), 0..3)).prop_map(
        |(nodes, versions, functions)| {
            let mut raw: Vec<RawNode> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for (name, op, data, control, attrs, device) in nodes {
                if !seen.insert(name.clone()) {
                    continue;
                }
                let mut inputs = Vec::new();
                if !raw.is_empty() {
                    for (i, port) in data {
                        let src = &raw[i.index(raw.len())].name;
                        inputs.push(if port == 0 { src.clone() } else { format!("{src}:{port}") });
                    }
                    for i in control {
                        inputs.push(format!("^{}", raw[i.index(raw.len())].name));
                    }
                }
                raw.push(RawNode { name, op, inputs, attrs: attrs.into_iter().collect(), device, span: None });
            }
            let versions = versions.map(|(producer, min_consumer, bad_consumers)| Versions {
                producer,
                min_consumer,
                bad_consumers,
            });
            let gradients = functions
                .iter()
                .map(|f: &FunctionDef| GradientDef {
                    function_name: f.signature.name.clone(),
                    gradient_func: "g".into(),
                })
                .collect();
            Graph::from_raw(raw, Library::new(functions, gradients), versions).unwrap()
        },
    )
}

fn arb_arg() -> impl Strategy<Value = ArgDef> {
    (arb_name(), prop_oneof![Just(String::new()), "[a-z ]{1,6}"], 0..5, arb_dtype(), any::<bool>()).prop_map(
        |(name, description, kind, dtype, is_ref)| {
            let mut a = ArgDef { name, description, is_ref, ..ArgDef::default() };
            match kind {
                0 => a.dtype = Some(dtype),
                1 => a.type_attr = "T".into(),
                2 => {
                    a.number_attr = "N".into();
                    a.type_attr = "T".into();
                }
                3 => {
                    a.number_attr = "N".into();
                    a.dtype = Some(dtype);
                }
                _ => a.type_list_attr = "Tlist".into(),
            }
            a
        },
    )
}

fn arb_function() -> impl Strategy<Value = FunctionDef> {
    (
        arb_name(),
        prop::collection::vec(arb_arg(), 0..3),
        prop::collection::vec(arb_arg(), 0..2),
        any::<bool>(),
        prop::collection::vec((arb_name(), prop::option::of(arb_attr()), any::<bool>(), -2i64..3), 0..3),
        prop::collection::btree_map(arb_name(), arb_attr(), 0..2),
        prop::collection::vec(
            (arb_name(), arb_name(), prop::collection::btree_map(arb_name(), arb_attr(), 0..2)),
            0..3,
        ),
    )
        .prop_map(|(name, inputs, outputs, is_stateful, attr_defs, attrs, body)| {
            let attrs_defs = attr_defs
                .into_iter()
                .map(|(name, default, has_minimum, minimum)| AttrDef {
                    name,
                    ty: "list(type)".into(),
                    default,
                    allowed_values: None,
                    has_minimum,
                    minimum: if has_minimum { minimum } else { 0 },
                    description: String::new(),
                })
                .collect();
            let nodes: Vec<RawNode> = body
                .into_iter()
                .map(|(name, op, attrs)| RawNode {
                    inputs: vec![format!("{name}:out:0"), "^x".into()],
                    name,
                    op,
                    attrs: attrs.into_iter().collect(),
                    device: String::new(),
                    span: None,
                })
                .collect();
            let ret = outputs.iter().map(|o| (o.name.clone(), "n:y:0".to_string())).collect();
            FunctionDef {
                signature: Signature {
                    name,
                    inputs,
                    outputs,
                    control_outputs: vec!["c".into()],
                    attrs: attrs_defs,
                    is_stateful,
                    description: String::new(),
                },
                attrs: attrs.into_iter().collect(),
                nodes,
                ret,
                control_ret: vec![("c".into(), "n".into())],
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn print_then_parse_is_identity(g in arb_graph()) {
        let text = print_graph(&g);
        let back = parse_graph(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        same(&g, &back).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(print_graph(&back), text);
    }
}

#[test]
fn large_graphs_parse_quickly_enough_for_a_debug_test() {
    let mut src = String::new();
    src.push_str("c = Const() {dtype = float32, value = float32[]{1.0}}\n");
    for i in 0..20_000 {
        let prev = if i == 0 { "c".to_string() } else { format!("n{}", i - 1) };
        src.push_str(&format!("n{i} = AddV2({prev}, c) {{T = float32}}\n"));
    }
    let g = parse_graph(&src).unwrap();
    assert_eq!(g.len(), 20_001);
}

/// `@f{a = @f{a = … 1 …}}`: `levels` attribute values, the innermost an int.
fn nested_funcs(levels: usize) -> String {
    let mut v = "1".to_string();
    for _ in 1..levels {
        v = format!("@f{{a = {v}}}");
    }
    v
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // Found by fuzzing: ~7,400 nested function attributes or ~11,300 nested lists overflowed the stack.
    let src = format!(
        "c = Const() {{dtype = float32, value = float32[]{{1.0}}}}\nx = NoOp() {{f = {}}}\n",
        nested_funcs(10_000)
    );
    let e = parse_graph(&src).unwrap_err();
    // The 101st level starts after 100 `@f{a = ` (7 characters each) and `x = NoOp() {f = ` (16).
    assert_eq!(e.to_string(), "2:717: node 'x': attribute 'f': nested deeper than 100 levels");
    let src = format!("x = NoOp() {{f = {}1{}}}", "[".repeat(20_000), "]".repeat(20_000));
    let e = parse_graph(&src).unwrap_err();
    assert_eq!(e.span(), Some(Span { line: 1, column: 18 }));
    assert!(e.to_string().contains("lists hold strings"), "{e}");
    // A list of functions: the list's items are at its own level.
    let src = format!("x = NoOp() {{l = [{}]}}", nested_funcs(10_000).replacen("@f{a = ", "@g{b = ", 1));
    let e = parse_graph(&src).unwrap_err();
    assert!(e.to_string().ends_with("node 'x': attribute 'l': nested deeper than 100 levels"), "{e}");
    // In a function: the body node is named as the converters name it; signature defaults and
    // the function's attributes by the function.
    let deep = nested_funcs(101);
    for ((src, line), name) in [
        (format!("function fn1() -> () {{\n  n = NoOp() {{a = {deep}}}\n}}\n"), "2:"),
        (format!("function fn1() -> () attrs {{T: func = {deep}}} {{\n}}\n"), "1:"),
        (format!("function fn1() -> () {{q = {deep}}} {{\n}}\n"), "1:"),
    ]
    .into_iter()
    .zip(["node 'fn1/n': attribute 'a'", "node 'fn1': attribute 'T'", "node 'fn1': attribute 'q'"])
    {
        let e = parse_graph(&src).unwrap_err().to_string();
        assert!(e.starts_with(line) && e.contains(name), "{e}");
        assert!(e.ends_with("nested deeper than 100 levels"), "{e}");
    }
}

#[test]
fn nesting_up_to_the_limit_parses_and_prints_back() {
    let src = format!("x = NoOp() {{f = {}, l = [{}]}}\n", nested_funcs(100), nested_funcs(100));
    let g = parse_graph(&src).unwrap();
    let x = g.node(g.find("x").unwrap());
    assert_eq!(x.attr("f").unwrap().depth(), crate::limits::MAX_ATTR_DEPTH);
    assert_eq!(x.attr("l").unwrap().depth(), crate::limits::MAX_ATTR_DEPTH);
    let back = parse_graph(&print_graph(&g)).unwrap();
    same(&g, &back).unwrap();
}

#[test]
fn large_splats_are_written_and_read_compactly() {
    // `{v, ...}` repeats the last value (TensorFlow's splat rule); `{...}` is zeros.
    let src = "a = Const() {dtype = float32, value = float32[1000000,1000000]{0.5, ...}}\n\
               b = Const() {dtype = int64, value = int64[4096]{1, 2, ...}}\n\
               z = Const() {dtype = bool, value = bool[2048]{...}}\n\
               s = Const() {dtype = float32, value = float32[3]{7.0, ...}}\n";
    let g = parse_graph(src).unwrap();
    let value = |n: &str| g.node(g.find(n).unwrap()).attr("value").unwrap().clone();
    let AttrValue::Compact(a) = value("a") else { panic!("a is compact") };
    assert_eq!((a.shape.as_slice(), a.values.as_f32()), (&[1_000_000, 1_000_000][..], Some(&[0.5f32][..])));
    let AttrValue::Compact(b) = value("b") else { panic!("b is compact") };
    let dense = b.expand().unwrap();
    assert_eq!(dense.as_i64().unwrap()[..4], [1, 2, 2, 2]);
    assert_eq!(dense.num_elements(), 4096);
    let AttrValue::Compact(z) = value("z") else { panic!("z is compact") };
    assert!(z.expand().unwrap().as_bool().unwrap().iter().all(|&x| !x));
    // Small ones are expanded at once: every pass sees an ordinary tensor.
    assert_eq!(value("s"), AttrValue::Tensor(Tensor::from_f32(vec![3], vec![7.0; 3]).unwrap()));
    // Past the budget the values are refused when expanded, not when read.
    assert!(a.expand().unwrap_err().to_string().contains("--max-tensor-bytes"));
    round_trip(&g);
    let text = print_graph(&g);
    assert!(text.contains("float32[1000000,1000000]{0.5, ...}") && text.contains("bool[2048]{...}"), "{text}");
    // As many values as elements with `...`, or a `...` not at the end, is an error.
    assert!(err("a = Const() {value = float32[2]{1.0, 2.0, ...}}\n").1.contains("'...'"));
    assert!(parse_graph("a = Const() {value = float32[2048]{..., 1.0}}\n").is_err());
}
