//! The graph verifier: checks a graph against the op registry.
//!
//! A [`Graph`] guarantees unique names and existing input nodes; this module
//! checks the rest: acyclicity, output ports in range, and — for the ops the
//! registry knows — arity, required attributes, input dtypes and static
//! shapes. Ops the registry does not know are opaque and pass unchecked.

use crate::infer::TypeInfo;
use crate::{CycleError, DType, Graph, Span};

/// Why a graph is not well formed. Every variant names the node at fault
/// (with its `line:col` when the node came from a text file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Cycle(#[from] CycleError),
    #[error("{}node '{node}': input {input} reads '{producer}:{port}' but '{producer}' ({op}) has {outputs} output(s)", at(.span))]
    PortOutOfRange {
        node: String,
        span: Option<Span>,
        input: usize,
        producer: String,
        op: String,
        port: u32,
        outputs: usize,
    },
    #[error("{}node '{node}': {op} expects {expected} data input(s), got {got}", at(.span))]
    Arity { node: String, span: Option<Span>, op: String, expected: usize, got: usize },
    #[error("{}node '{node}': input {input} of {op} must be {expected}, got {got} from '{producer}'", at(.span))]
    DTypeMismatch {
        node: String,
        span: Option<Span>,
        op: String,
        input: usize,
        producer: String,
        expected: DType,
        got: DType,
    },
    #[error(
        "{}node '{node}': input {input} of {op} is variable '{variable}' of dtype {got}, but the op works on {expected}",
        at(.span)
    )]
    VariableDType {
        node: String,
        span: Option<Span>,
        op: String,
        input: usize,
        variable: String,
        expected: DType,
        got: DType,
    },
    #[error("{}node '{node}': {op}: {message}", at(.span))]
    Shape { node: String, span: Option<Span>, op: String, message: String },
    #[error("{}node '{node}': {op} requires attribute '{attr}'", at(.span))]
    MissingAttr { node: String, span: Option<Span>, op: String, attr: String },
    #[error("{}node '{node}': attribute '{attr}' of {op} {message}", at(.span))]
    BadAttr { node: String, span: Option<Span>, op: String, attr: String, message: String },
}

pub(crate) fn at(span: &Option<Span>) -> String {
    match span {
        Some(s) => format!("{s}: "),
        None => String::new(),
    }
}

impl VerifyError {
    /// Where the node at fault is, when it came from a text file (none for a cycle).
    pub fn span(&self) -> Option<Span> {
        match self {
            VerifyError::Cycle(_) => None,
            VerifyError::PortOutOfRange { span, .. }
            | VerifyError::Arity { span, .. }
            | VerifyError::DTypeMismatch { span, .. }
            | VerifyError::VariableDType { span, .. }
            | VerifyError::Shape { span, .. }
            | VerifyError::MissingAttr { span, .. }
            | VerifyError::BadAttr { span, .. } => *span,
        }
    }

    /// The name of the node at fault (for a cycle, the first node on it).
    pub fn node(&self) -> Option<&str> {
        match self {
            VerifyError::Cycle(c) => c.nodes.first().map(String::as_str),
            VerifyError::PortOutOfRange { node, .. }
            | VerifyError::Arity { node, .. }
            | VerifyError::DTypeMismatch { node, .. }
            | VerifyError::VariableDType { node, .. }
            | VerifyError::Shape { node, .. }
            | VerifyError::MissingAttr { node, .. }
            | VerifyError::BadAttr { node, .. } => Some(node),
        }
    }
}

/// Verifies `graph` and returns the dtypes and static shapes of every output.
///
/// Today this is exactly [`crate::infer::infer`], which checks as it infers;
/// it is the entry point to call when the intent is checking.
pub fn verify(graph: &Graph) -> Result<TypeInfo, VerifyError> {
    let _span = tracing::debug_span!("verify", nodes = graph.len()).entered();
    crate::infer::infer(graph)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::testing::{ty, Builder};
    use crate::DType::{Float32, Int32, Resource};
    use crate::{ArgDef, AttrValue, FunctionDef, ListValue, Output, RawNode, Signature};

    fn err(b: &Builder) -> VerifyError {
        verify(&b.build()).expect_err("graph must be rejected")
    }

    fn xy() -> Builder {
        let mut b = Builder::new();
        b.input("x", Float32, Some(&[2, 3])).input("y", Float32, Some(&[2, 3])).input("i", Int32, Some(&[2, 3]));
        b
    }

    #[test]
    fn accepts_a_small_training_step() {
        let mut b = Builder::new();
        b.var("w", Float32, &[3, 2]).input("x", Float32, Some(&[-1, 3])).const_f32("lr", &[], &[0.1]);
        b.node("r", "ReadVariableOp", &["w"], &[("dtype", ty(Float32))]);
        b.node("mm", "MatMul", &["x", "r"], &[("T", ty(Float32))]);
        b.node("g", "MatMul", &["x", "mm"], &[("T", ty(Float32)), ("transpose_a", AttrValue::B(true))]);
        b.node("upd", "ResourceApplyGradientDescent", &["w", "lr", "g"], &[("T", ty(Float32))]);
        b.node("step", "NoOp", &["^upd"], &[]);
        let g = b.build();
        let info = verify(&g).unwrap();
        let mm = Output { node: g.find("mm").unwrap(), port: 0 };
        assert_eq!(info.output(mm).unwrap().1.to_string(), "[?,2]");
        assert_eq!(info.outputs(g.find("upd").unwrap()), &[]);
        assert_eq!(info.num_outputs(g.find("upd").unwrap()), Some(0));
    }

    #[test]
    fn wrong_arity() {
        let mut b = xy();
        b.node("add", "AddV2", &["x"], &[("T", ty(Float32))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::Arity { expected: 2, got: 1, .. }), "{e:?}");
        assert_eq!(e.to_string(), "node 'add': AddV2 expects 2 data input(s), got 1");
        let mut b = xy();
        b.node("cat", "ConcatV2", &["x", "y"], &[("T", ty(Float32)), ("N", AttrValue::I(2))]);
        assert!(matches!(err(&b), VerifyError::Arity { expected: 3, got: 2, .. }));
    }

    /// `check_arities` refuses what `verify` would, without inferring anything: a known op
    /// (here one whose inputs are a resource and a value, never typed by inference upstream)
    /// with an extra input, and a variadic op whose `N` disagrees; unknown ops pass.
    #[test]
    fn arities_are_checked_without_inference() {
        let mut b = xy();
        b.node("st", "StackV2", &["i"], &[("elem_type", ty(Float32))]);
        b.node("push", "StackPushV2", &["st", "x", "y"], &[("T", ty(Float32))]);
        let e = crate::infer::check_arities(&b.build()).expect_err("three inputs to StackPushV2");
        assert!(matches!(e, VerifyError::Arity { expected: 2, got: 3, .. }), "{e:?}");
        assert_eq!(e.node(), Some("push"));
        let mut b = xy();
        b.node("cat", "ConcatV2", &["x", "y"], &[("T", ty(Float32)), ("N", AttrValue::I(2))]);
        assert!(matches!(crate::infer::check_arities(&b.build()), Err(VerifyError::Arity { expected: 3, .. })));
        let mut b = xy();
        b.node("add", "AddV2", &["x", "y"], &[("T", ty(Float32))]);
        b.node("mystery", "SomeCustomOp", &["x", "y", "add"], &[]);
        assert_eq!(crate::infer::check_arities(&b.build()), Ok(()));
    }

    #[test]
    fn wrong_dtype_names_node_and_input() {
        let mut b = xy();
        b.node("add", "AddV2", &["x", "i"], &[("T", ty(Float32))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::DTypeMismatch { input: 1, expected: Float32, got: Int32, .. }), "{e:?}");
        assert_eq!(e.to_string(), "node 'add': input 1 of AddV2 must be float32, got int32 from 'i'");
        assert_eq!(e.node(), Some("add"));
        // A variable of the wrong dtype.
        let mut b = Builder::new();
        b.var("v", Int32, &[]).node("r", "ReadVariableOp", &["v"], &[("dtype", ty(Float32))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::VariableDType { .. }), "{e:?}");
        assert!(e.to_string().contains("variable 'v' of dtype int32"));
    }

    #[test]
    fn disallowed_type_attr() {
        let mut b = Builder::new();
        b.input("p", crate::DType::Bool, Some(&[2]));
        b.node("n", "Neg", &["p"], &[("T", ty(crate::DType::Bool))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::BadAttr { ref attr, .. } if attr == "T"), "{e:?}");
    }

    #[test]
    fn port_out_of_range() {
        let mut b = xy();
        b.node("mm", "MatMul", &["x", "y:1"], &[("T", ty(Float32))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::PortOutOfRange { port: 1, outputs: 1, .. }), "{e:?}");
        assert_eq!(e.to_string(), "node 'mm': input 1 reads 'y:1' but 'y' (Placeholder) has 1 output(s)");
        // Even an opaque consumer may not read past a known op's outputs.
        let mut b = xy();
        b.node("u", "MyCustomOp", &["x:3"], &[]);
        assert!(matches!(err(&b), VerifyError::PortOutOfRange { .. }));
    }

    #[test]
    fn cycle_names_its_nodes() {
        let mut b = Builder::new();
        b.node("a", "Identity", &["c"], &[("T", ty(Float32))]);
        b.node("b", "Identity", &["a"], &[("T", ty(Float32))]);
        b.node("c", "Identity", &["b"], &[("T", ty(Float32))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::Cycle(_)));
        assert_eq!(e.to_string(), "graph has a cycle: a -> b -> c -> a");
    }

    #[test]
    fn known_op_missing_attr() {
        let mut b = xy();
        b.node("c", "Cast", &["x"], &[("SrcT", ty(Float32))]);
        let e = err(&b);
        assert!(matches!(e, VerifyError::MissingAttr { ref attr, .. } if attr == "DstT"), "{e:?}");
        assert_eq!(e.to_string(), "node 'c': Cast requires attribute 'DstT'");
        let mut b = Builder::new();
        b.node("k", "Const", &[], &[("dtype", ty(Float32))]);
        assert!(matches!(err(&b), VerifyError::MissingAttr { ref attr, .. } if attr == "value"));
        let mut b = xy();
        b.node("m", "MatMul", &["x", "y"], &[("T", AttrValue::I(3))]);
        let e = err(&b);
        assert_eq!(e.to_string(), "node 'm': attribute 'T' of MatMul must be a type");
    }

    #[test]
    fn errors_carry_the_span() {
        let raw = vec![RawNode {
            name: "k".into(),
            op: "Const".into(),
            inputs: vec![],
            attrs: [("dtype".to_string(), ty(Float32))].into_iter().collect(),
            device: String::new(),
            span: Some(Span { line: 3, column: 1 }),
        }];
        let g = Graph::from_raw(raw, Default::default(), None).unwrap();
        assert_eq!(verify(&g).unwrap_err().to_string(), "3:1: node 'k': Const requires attribute 'value'");
    }

    #[test]
    fn unknown_ops_pass() {
        let mut b = xy();
        b.node("u", "MyCustomOp", &["x", "i", "^y"], &[("weird", AttrValue::I(1))]);
        b.node("v", "AnotherOp", &["u:5", "u:2"], &[]);
        b.node("use", "AddV2", &["v", "x"], &[("T", ty(Float32))]);
        b.node(
            "call",
            "PartitionedCall",
            &["x"],
            &[
                ("Tin", AttrValue::List(ListValue::Type(vec![Float32]))),
                ("Tout", AttrValue::List(ListValue::Type(vec![Float32, Int32]))),
            ],
        );
        b.node("use2", "AddV2", &["call", "x"], &[("T", ty(Float32))]);
        let g = b.build();
        let info = verify(&g).unwrap();
        assert!(info.outputs(g.find("u").unwrap()).is_empty());
        assert_eq!(info.outputs(g.find("call").unwrap())[1].0, Int32);
        assert_eq!(info.output(Output { node: g.find("use").unwrap(), port: 0 }).unwrap().1.to_string(), "[*]");
    }

    #[test]
    fn function_calls_are_typed_from_the_signature() {
        let mut b = xy();
        let arg = |name: &str, dtype| ArgDef { name: name.into(), dtype: Some(dtype), ..ArgDef::default() };
        b.library.functions_mut().push(FunctionDef {
            signature: Signature {
                name: "my_fn".into(),
                inputs: vec![arg("a", Float32)],
                outputs: vec![
                    arg("out", Int32),
                    ArgDef { name: "o2".into(), type_attr: "T".into(), ..ArgDef::default() },
                ],
                ..Signature::default()
            },
            ..FunctionDef::default()
        });
        b.node("call", "my_fn", &["x"], &[("T", ty(Resource))]);
        let g = b.build();
        let info = verify(&g).unwrap();
        let outs = info.outputs(g.find("call").unwrap());
        assert_eq!((outs[0].0, outs[1].0), (Int32, Resource));
        let mut bad = xy();
        bad.library = b.library.clone();
        bad.node("call", "my_fn", &["i"], &[]);
        assert!(matches!(err(&bad), VerifyError::DTypeMismatch { .. }));
        let mut bad = xy();
        bad.library = b.library.clone();
        bad.node("call", "my_fn", &["x"], &[]);
        bad.node("r", "Identity", &["call:2"], &[("T", ty(Int32))]);
        assert!(matches!(err(&bad), VerifyError::PortOutOfRange { .. }));
    }

    /// A 100,000-node graph: a chain of MLP-like layers over shared weights.
    /// Built in memory; timing is the benchmark's job, not this test's.
    #[test]
    fn verifies_a_hundred_thousand_nodes() {
        let mut raw = Vec::with_capacity(100_000);
        let node = |name: String, op: &str, inputs: Vec<String>, attrs: Vec<(&str, AttrValue)>| RawNode {
            name,
            op: op.into(),
            inputs,
            attrs: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            device: String::new(),
            span: None,
        };
        let f = || ("T", ty(Float32));
        raw.push(node(
            "x".into(),
            "Placeholder",
            vec![],
            vec![("dtype", ty(Float32)), ("shape", crate::infer::testing::shape(&[-1, 16]))],
        ));
        raw.push(node(
            "w".into(),
            "VarHandleOp",
            vec![],
            vec![("dtype", ty(Float32)), ("shape", crate::infer::testing::shape(&[16, 16]))],
        ));
        raw.push(node("r".into(), "ReadVariableOp", vec!["w".into()], vec![("dtype", ty(Float32))]));
        let mut prev = "x".to_string();
        let mut i = 0;
        while raw.len() + 4 <= 100_000 {
            let (mm, add, relu, s) = (format!("mm{i}"), format!("add{i}"), format!("relu{i}"), format!("shape{i}"));
            raw.push(node(mm.clone(), "MatMul", vec![prev.clone(), "r".into()], vec![f()]));
            raw.push(node(add.clone(), "AddV2", vec![mm.clone(), prev.clone()], vec![f()]));
            raw.push(node(relu.clone(), "Relu", vec![add], vec![f()]));
            raw.push(node(s, "Shape", vec![relu.clone()], vec![f()]));
            prev = relu;
            i += 1;
        }
        while raw.len() < 100_000 {
            raw.push(node(format!("pad{}", raw.len()), "NoOp", vec![format!("^{prev}")], vec![]));
        }
        let g = Graph::from_raw(raw, Default::default(), None).unwrap();
        assert_eq!(g.len(), 100_000);
        let info = verify(&g).unwrap();
        let last = Output { node: g.find(&prev).unwrap(), port: 0 };
        assert_eq!(info.output(last).unwrap().1.to_string(), "[?,16]");
        assert_eq!(crate::infer::static_shape(&g, last).to_string(), "[?,16]");
    }
}
