//! Pure function calls, and functions equal up to their names — what lets
//! [`crate::cse`] merge two calls of the same computation (a Keras model called
//! twice in one step: two traces of each of its `While` loops, with bodies that
//! differ only in their function names).
//!
//! A call is *pure* ([`PureCalls::is_pure_call`]) when it runs exactly the
//! functions its attributes name ([`effects::RUNS_NAMED_FUNCTIONS`], or a call by
//! a library function's name), takes and gives no resource, and every node of
//! those functions, transitively, is a known non-stateful op that touches no
//! resource (no variable access, no stateful random op, no `Assert`/`Print`, no
//! unknown op) or a pure call in turn. Its outputs are then a function of its
//! inputs and the functions' bodies, like a pure op's.
//!
//! Two functions are *the same* ([`PureCalls::class_of`]) when their canonical
//! texts are equal: the signature's argument and result types (names left out),
//! each body node's op, inputs, device and attributes in body order, and the
//! results — arguments and body nodes named by position (two traces of one
//! layer name them after their own scopes), internal `_` attributes left out
//! (as [`crate::cse`] leaves them out of a node's key), and every function a
//! node names (as its op or in an attribute) replaced by that function's class.
//! Equal texts are the same program up to renaming, so a call of one computes
//! what a call of the other computes from the same inputs.

use std::collections::HashMap;

use autoclust_graph::{effects, registry, AttrValue, Attrs, DType, Library, ListValue, Node};

use crate::rewrite::attrs_handle_resource;

/// Nested function references followed before a function counts as impure (and
/// gets no class): TensorFlow's function graphs nest a few levels; a recursive
/// library never ends.
const MAX_DEPTH: usize = 32;

/// Memoised purity and classes of one library's functions (one per pass run).
pub(crate) struct PureCalls<'a> {
    library: &'a Library,
    pure: HashMap<String, bool>,
    class: HashMap<String, Option<usize>>,
    texts: HashMap<String, usize>,
}

impl<'a> PureCalls<'a> {
    pub(crate) fn new(library: &'a Library) -> PureCalls<'a> {
        PureCalls { library, pure: HashMap::new(), class: HashMap::new(), texts: HashMap::new() }
    }

    /// Whether `node` is a pure call (module doc).
    pub(crate) fn is_pure_call(&mut self, node: &Node) -> bool {
        let runs_named = effects::RUNS_NAMED_FUNCTIONS.contains(&node.op.as_str());
        if !runs_named && self.library.function(&node.op).is_none() {
            return false;
        }
        !attrs_handle_resource(&node.attrs) && self.calls_are_pure(&node.op, &node.attrs, runs_named, 0)
    }

    /// Whether the functions a node of op `op` and attributes `attrs` runs are all pure:
    /// its op when that names a function, and its function attributes (which only an op
    /// of [`effects::RUNS_NAMED_FUNCTIONS`] or a function call may have).
    fn calls_are_pure(&mut self, op: &str, attrs: &Attrs, runs_named: bool, depth: usize) -> bool {
        let op_is_function = self.library.function(op).is_some();
        if op_is_function && !self.function_is_pure(op, depth + 1) {
            return false;
        }
        let mut any = op_is_function;
        for (_, a) in attrs.iter() {
            let names: Vec<&str> = match a {
                AttrValue::Func(f) => vec![f.name.as_str()],
                AttrValue::List(ListValue::Func(fs)) => fs.iter().map(|f| f.name.as_str()).collect(),
                _ => continue,
            };
            if !runs_named && !op_is_function {
                return false;
            }
            for name in names {
                any = true;
                if !self.function_is_pure(name, depth + 1) {
                    return false;
                }
            }
        }
        any
    }

    fn function_is_pure(&mut self, name: &str, depth: usize) -> bool {
        if let Some(&p) = self.pure.get(name) {
            return p;
        }
        if depth > MAX_DEPTH {
            return false;
        }
        // A cycle through this function is not pure (it stays `false` until proved).
        self.pure.insert(name.to_string(), false);
        let library = self.library;
        let Some(f) = library.function(name) else { return false };
        let args_ok = f.signature.inputs.iter().chain(&f.signature.outputs).all(|a| a.dtype != Some(DType::Resource));
        let p = args_ok && f.nodes.iter().all(|n| self.body_node_is_pure(&n.op, &n.attrs, depth));
        self.pure.insert(name.to_string(), p);
        p
    }

    fn body_node_is_pure(&mut self, op: &str, attrs: &Attrs, depth: usize) -> bool {
        if attrs_handle_resource(attrs) || effects::table_kind(op).is_some() {
            return false;
        }
        let runs_named = effects::RUNS_NAMED_FUNCTIONS.contains(&op);
        if runs_named || self.library.function(op).is_some() {
            return self.calls_are_pure(op, attrs, runs_named, depth);
        }
        if attrs.values().any(AttrValue::is_func) {
            return false;
        }
        match op {
            // Arguments and results of autoclust's own cluster functions; a `NoOp` orders.
            "_Arg" | "_Retval" | "NoOp" => true,
            "Placeholder" | "PlaceholderWithDefault" | "VarHandleOp" | "ControlTrigger" => false,
            _ if effects::is_v1_control_flow(op) => false,
            _ => match registry::lookup(op) {
                Some(schema) => {
                    !schema.is_stateful && (schema.family != registry::OpFamily::Random || op.starts_with("Stateless"))
                }
                None => false,
            },
        }
    }

    /// The class of function `name`: equal for two functions with equal canonical texts
    /// (module doc); `None` for a function not in the library, or nested too deep.
    pub(crate) fn class_of(&mut self, name: &str) -> Option<usize> {
        self.class_at(name, 0)
    }

    fn class_at(&mut self, name: &str, depth: usize) -> Option<usize> {
        if let Some(&c) = self.class.get(name) {
            return c;
        }
        if depth > MAX_DEPTH {
            return None;
        }
        // A cycle through this function gets no class.
        self.class.insert(name.to_string(), None);
        let library = self.library;
        let f = library.function(name)?;
        use std::fmt::Write;
        let sig = &f.signature;
        // Arguments and body nodes are named by position: two traces of one computation
        // name them after their own scopes.
        let mut local: HashMap<&str, String> = HashMap::new();
        for (i, a) in sig.inputs.iter().enumerate() {
            local.insert(a.name.as_str(), format!("$a{i}"));
        }
        for (i, n) in f.nodes.iter().enumerate() {
            local.insert(n.name.as_str(), format!("$n{i}"));
        }
        // An input `arg`, `node:output_arg:index`, `node:port` or `^node`, its first part renamed.
        let rename = |input: &str| -> String {
            let (caret, rest) = match input.strip_prefix('^') {
                Some(r) => ("^", r),
                None => ("", input),
            };
            let (head, tail) = rest.split_once(':').map_or((rest, None), |(h, t)| (h, Some(t)));
            let head = local.get(head).map_or(head, String::as_str);
            match tail {
                Some(t) => format!("{caret}{head}:{t}"),
                None => format!("{caret}{head}"),
            }
        };
        let arg = |a: &autoclust_graph::ArgDef| {
            (a.dtype, a.type_attr.clone(), a.number_attr.clone(), a.type_list_attr.clone(), a.is_ref)
        };
        let mut text = String::new();
        let _ = write!(
            text,
            "{:?}|{:?}|{}|{:?}|{}",
            sig.inputs.iter().map(arg).collect::<Vec<_>>(),
            sig.outputs.iter().map(arg).collect::<Vec<_>>(),
            sig.control_outputs.len(),
            sig.attrs,
            sig.is_stateful
        );
        let mut ok = true;
        for (i, n) in f.nodes.iter().enumerate() {
            let op = if library.function(&n.op).is_some() {
                match self.class_at(&n.op, depth + 1) {
                    Some(c) => format!("#fn{c}"),
                    None => {
                        ok = false;
                        break;
                    }
                }
            } else {
                n.op.clone()
            };
            let Some(attrs) = self.canonical_attrs_at(&n.attrs, depth + 1) else {
                ok = false;
                break;
            };
            let inputs: Vec<String> = n.inputs.iter().map(|s| rename(s)).collect();
            let _ = write!(text, "\n$n{i}|{}|{:?}|{}|{:?}", op, inputs, n.device, attrs);
        }
        // Results in the signature's order; control results by their nodes.
        for o in &sig.outputs {
            let value = f.ret.iter().find(|(k, _)| *k == o.name).map(|(_, v)| rename(v));
            let _ = write!(text, "\nret {value:?}");
        }
        for c in &sig.control_outputs {
            let node = f.control_ret.iter().find(|(k, _)| k == c).map(|(_, v)| rename(v));
            let _ = write!(text, "\ncontrol_ret {node:?}");
        }
        let c = if ok {
            let next = self.texts.len();
            Some(*self.texts.entry(text).or_insert(next))
        } else {
            None
        };
        self.class.insert(name.to_string(), c);
        c
    }

    /// `attrs` without internal (`_`) attributes, every function named by its class
    /// (`#fnN`): what a call's merge key holds. `None` when a function has no class.
    pub(crate) fn canonical_attrs(&mut self, attrs: &Attrs) -> Option<Vec<(String, AttrValue)>> {
        self.canonical_attrs_at(attrs, 0)
    }

    fn canonical_attrs_at(&mut self, attrs: &Attrs, depth: usize) -> Option<Vec<(String, AttrValue)>> {
        let mut out = Vec::with_capacity(attrs.len());
        for (k, v) in attrs.iter().filter(|(k, _)| !k.starts_with('_')) {
            let mut v = v.clone();
            match &mut v {
                AttrValue::Func(f) => f.name = format!("#fn{}", self.class_at(&f.name, depth)?),
                AttrValue::List(ListValue::Func(fs)) => {
                    for f in fs {
                        f.name = format!("#fn{}", self.class_at(&f.name, depth)?);
                    }
                }
                _ => {}
            }
            out.push((k.clone(), v));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(src: &str) -> autoclust_graph::Graph {
        autoclust_graph::text::parse(src).unwrap()
    }

    const FUNCS: &str = "x = Placeholder() {dtype = float32, shape = shape[]}\n\
        function f1(p: float32) -> (r: float32) {\n  e = Exp(p) {T = float32}\n  t = Tanh(e:y:0) {T = float32}\n  return r = t:y:0\n}\n\
        function f2(q: float32) -> (s: float32) {\n  e2 = Exp(q) {T = float32}\n  t2 = Tanh(e2:y:0) {T = float32}\n  return s = t2:y:0\n}\n\
        function f3(q: float32) -> (s: float32) {\n  e3 = Tanh(q) {T = float32}\n  t3 = Exp(e3:y:0) {T = float32}\n  return s = t3:y:0\n}\n\
        function outer1(a: float32) -> (b: float32) {\n  c = f1(a) \n  return b = c:r:0\n}\n\
        function outer2(a: float32) -> (b: float32) {\n  c = f2(a) \n  return b = c:s:0\n}\n\
        function looped(a: float32) -> (b: float32) {\n  c = looped(a) \n  return b = c:b:0\n}\n";

    #[test]
    fn functions_equal_up_to_names_share_a_class() {
        let g = graph(FUNCS);
        let mut calls = PureCalls::new(&g.library);
        let (c1, c2, c3) = (calls.class_of("f1"), calls.class_of("f2"), calls.class_of("f3"));
        assert!(c1.is_some());
        assert_eq!(c1, c2);
        assert_ne!(c1, c3, "the same ops in another order are another function");
        // A nested call compares by the callee's class, not its name: the results' port
        // names differ (r, s) but name the same position.
        assert_ne!(calls.class_of("outer1"), None);
        assert_eq!(calls.class_of("missing"), None);
        // A function calling itself gets no class and is not pure, and asking ends.
        assert_eq!(calls.class_of("looped"), None);
        assert!(calls.function_is_pure("f1", 0));
        assert!(!calls.function_is_pure("looped", 0));
    }

    #[test]
    fn a_call_is_pure_only_without_effects_or_handles() {
        let g = graph(
            "x = Placeholder() {dtype = float32, shape = shape[]}\n\
             v = VarHandleOp() {dtype = float32, shape = shape[], shared_name = \"v\"}\n\
             p = PartitionedCall(x) {Tin = [float32], Tout = [float32], f = @pure}\n\
             q = PartitionedCall(x) {Tin = [float32], Tout = [float32], f = @asserts}\n\
             h = PartitionedCall(v) {Tin = [resource], Tout = [resource], f = @passes}\n\
             g = SymbolicGradient(x) {Tin = [float32], Tout = [float32], f = @pure}\n\
             function pure(a: float32) -> (b: float32) {\n  e = Exp(a) {T = float32}\n  return b = e:y:0\n}\n\
             function asserts(a: float32) -> (b: float32) stateful {\n  c = Const() {dtype = bool, value = bool[]{true}}\n  \
             k = Assert(c:output:0, a) {T = [float32], summarize = 3}\n  return b = a\n}\n\
             function passes(a: resource) -> (b: resource) {\n  return b = a\n}\n",
        );
        let mut calls = PureCalls::new(&g.library);
        let node = |name: &str| g.node(g.find(name).unwrap()).clone();
        assert!(calls.is_pure_call(&node("p")));
        assert!(!calls.is_pure_call(&node("q")), "Assert is stateful");
        assert!(!calls.is_pure_call(&node("h")), "a handle passes through");
        assert!(!calls.is_pure_call(&node("g")), "SymbolicGradient runs a gradient, not its function");
        assert!(!calls.is_pure_call(&node("x")));
    }
}
