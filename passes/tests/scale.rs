//! Issue 19: the work of the default graph-optimization pipeline (`opt --passes default`)
//! as the graph grows, counted (not timed) as heap allocations and bytes allocated by
//! a counting global allocator. Ten times the graph must cost less than fifteen times
//! the allocations, and a pipeline over a graph it no longer changes allocates far
//! less than one block per node per pass (passes edit in place; an unchanged node is
//! never rebuilt).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write as _;

use autoclust_graph::Graph;
use autoclust_passes::pass::{PassContext, Pipeline, DEFAULT_PIPELINE};

struct Counting;

thread_local! {
    /// Allocations and bytes on this thread (tests run on their own threads).
    static COUNT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

// SAFETY: every call is forwarded to `System`; the count touches no allocation.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + layout.size() as u64));
        });
        // SAFETY: forwarded unchanged to the system allocator, under the caller's guarantees.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| {
            let (n, b) = c.get();
            c.set((n + 1, b + new_size as u64));
        });
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn counted<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    let before = COUNT.with(Cell::get);
    let out = f();
    let after = COUNT.with(Cell::get);
    (out, after.0 - before.0, after.1 - before.1)
}

/// A typed training step of about `n` nodes shaped like `benches/scale/gen_graph.py`'s
/// (without its string ops): `n/100` float32[4] variables, blocks of read → 5–10
/// elementwise ops (with a constant or the block's earlier values) → write, blocks
/// sharing a variable ordered by a control edge, 5% extra control edges from an
/// earlier node of the blocks to a later one, a final `NoOp` waiting on every write.
/// A node as (name, op, data inputs, control inputs, attributes).
type Spec = (String, &'static str, Vec<String>, Vec<String>, &'static str);

fn training_step(n: usize) -> Graph {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut below = |k: usize| {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) % k as u64) as usize
    };
    let n_vars = (n / 100).max(10);
    let mut nodes: Vec<Spec> = Vec::new();
    let var_attrs = "{dtype = float32, shape = shape[4]}";
    for i in 0..n_vars {
        nodes.push((format!("v{i}"), "VarHandleOp", vec![], vec![], var_attrs));
    }
    nodes.push(("half".into(), "Const", vec![], vec![], "{dtype = float32, value = float32[]{0.5}}"));
    let first = nodes.len();
    let mut last_write: Vec<Option<String>> = vec![None; n_vars];
    let mut sinks = Vec::new();
    let mut b = 0;
    while nodes.len() + 1 < n {
        let var = b % n_vars;
        let read = format!("b{b}_read");
        let gate = last_write[var].iter().cloned().collect();
        nodes.push((read.clone(), "ReadVariableOp", vec![format!("v{var}")], gate, "{dtype = float32}"));
        let mut vals = vec![read];
        for j in 0..5 + below(6) {
            let name = format!("b{b}_e{j}");
            let last = vals.last().unwrap().clone();
            let op = ["AddV2", "Mul", "Sub", "Tanh", "Neg", "Sigmoid", "AddV2"][below(7)];
            let other = vals.get(below(vals.len() + 1)).cloned().unwrap_or_else(|| "half".into());
            let inputs = if matches!(op, "Tanh" | "Neg" | "Sigmoid") { vec![last] } else { vec![last, other] };
            nodes.push((name.clone(), op, inputs, vec![], "{T = float32}"));
            vals.push(name);
        }
        let op = if below(2) == 0 { "AssignVariableOp" } else { "AssignAddVariableOp" };
        let write = format!("b{b}_write");
        let value = vals.last().unwrap().clone();
        nodes.push((write.clone(), op, vec![format!("v{var}"), value], vec![], "{dtype = float32}"));
        last_write[var] = Some(write.clone());
        sinks.push(write);
        b += 1;
    }
    for _ in 0..nodes.len() / 20 {
        let i = first + 1 + below(nodes.len() - first - 1);
        let j = first + below(i - first);
        let from = nodes[j].0.clone();
        if !nodes[i].3.contains(&from) && !nodes[i].2.contains(&from) {
            nodes[i].3.push(from);
        }
    }
    nodes.push(("step".into(), "NoOp", vec![], sinks, "{}"));
    let mut text = String::new();
    for (name, op, data, control, attrs) in &nodes {
        let inputs: Vec<String> = data.iter().cloned().chain(control.iter().map(|c| format!("^{c}"))).collect();
        writeln!(text, "{name} = {op}({}) {attrs}", inputs.join(", ")).unwrap();
    }
    autoclust_graph::text::parse(&text).unwrap()
}

fn context() -> PassContext {
    PassContext { preserve: Some(["step".to_string()].into_iter().collect()), ..PassContext::default() }
}

#[test]
fn default_pipeline_work_grows_near_linearly() {
    let pipeline = Pipeline::parse("default").unwrap();
    let work = |n: usize| {
        let g = training_step(n);
        let (out, allocations, bytes) = counted(|| pipeline.run(g, &context()).unwrap());
        assert!(out.len() > n / 2, "{n} nodes: the pipeline left {}", out.len());
        (allocations, bytes, out)
    };
    let (small, small_bytes, _) = work(2_000);
    let (large, large_bytes, optimized) = work(20_000);
    assert!(large < 15 * small, "{small} allocations at 2,000 nodes, {large} at 20,000: superlinear");
    assert!(large_bytes < 15 * small_bytes, "{small_bytes} bytes at 2,000 nodes, {large_bytes} at 20,000");
    // Over its own output no pass changes anything, and none rebuilds a node: what is
    // left per node is the typing (`infer`) the folding and simplifying passes read and
    // the successor lists, about two allocations per node (a rebuild cost over seven).
    let n = optimized.len() as u64;
    for &name in DEFAULT_PIPELINE {
        let pass = autoclust_passes::pass::lookup(name).unwrap();
        let input = optimized.clone();
        let (out, allocations, _) = counted(|| pass.run(input, &context()).unwrap());
        assert_eq!(out, optimized, "{name} changed a graph the pipeline had optimized");
        assert!(allocations < 4 * n, "{name}: {allocations} allocations over {n} unchanged nodes");
    }
}
