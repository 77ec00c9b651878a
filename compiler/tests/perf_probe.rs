//! Manual probe (ignored by default): nanoseconds per element of small fused chains, to
//! spot slow lowerings. Run with `cargo test --release -p autoclust-compiler --test suite -- perf_probe:: --ignored --nocapture`;
//! set `CHAIN_DUMP=<dir>` to dump chain_32's CLIF and machine code there.
use crate::common::*;
use autoclust_compiler::{Compiler, CompilerOptions};
use autoclust_graph::DType;

/// This thread's CPU time in ns (so descheduling on a loaded machine is not counted).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

#[test]
#[ignore]
fn per_element_cost() {
    let n = 1 << 20;
    let x = f32t(&[n], rand_f32(n, 1, -1.0, 1.0));
    for (op, depth) in [
        ("Mul", 8),
        ("Maximum", 8),
        ("Exp", 1),
        ("Exp", 8),
        ("Tanh", 1),
        ("Tanh", 8),
        ("Sigmoid", 1),
        ("Sigmoid", 8),
        ("Log", 8),
    ] {
        let mut nodes = vec![arg("x", 0, DType::Float32)];
        let mut prev = "x".to_string();
        for i in 0..depth {
            let name = format!("n{i}");
            let inputs: Vec<&str> = if matches!(op, "Mul" | "Maximum") { vec![&prev, "x"] } else { vec![&prev] };
            nodes.push(node(&name, op, &inputs, vec![]));
            prev = name;
        }
        nodes.push(ret("r", &prev, 0));
        let f = Compiler::new(CompilerOptions {
            dump_clif_dir: Some(std::env::temp_dir().join(format!("probe-{op}{depth}"))),
            threads: 1,
            ..Default::default()
        })
        .compile(&graph(nodes), &[(DType::Float32, vec![n])])
        .unwrap();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = cpu_ns();
            f.call(std::slice::from_ref(&x)).unwrap();
            best = best.min((cpu_ns() - t) as f64 * 1e-9);
        }
        let xs = x.as_f32().unwrap();
        let rust: fn(f32) -> f32 = match op {
            "Exp" => f32::exp,
            "Tanh" => f32::tanh,
            "Log" => f32::ln,
            "Sigmoid" => |v| 1.0 / (1.0 + (-v).exp()),
            _ => |v| -v,
        };
        let mut rbest = f64::MAX;
        for _ in 0..3 {
            let t = cpu_ns();
            let mut v = xs.to_vec();
            for _ in 0..depth {
                v = v.iter().map(|&a| rust(a)).collect();
            }
            std::hint::black_box(&v);
            rbest = rbest.min((cpu_ns() - t) as f64 * 1e-9);
        }
        eprintln!(
            "{op} x{depth}: jit {:.3} ns/element/op, rust per-op loops {:.3}",
            best * 1e9 / n as f64 / depth as f64,
            rbest * 1e9 / n as f64 / depth as f64
        );
    }
}

/// chain_32 (Mul, AddV2, Tanh, Mul by x, Exp, Sub, Maximum, Minimum, cycled) over 1M floats:
/// one fused JIT loop vs one Rust loop per op, by thread CPU time.
#[test]
#[ignore]
fn chain_32_cpu_time() {
    let n = 1_000_000;
    let mut nodes = vec![arg("x", 0, DType::Float32)];
    for (name, v) in [("c_mul", 0.9f32), ("c_add", 0.1), ("c_sub", 1.0), ("c_max", -1.0), ("c_min", 1.0)] {
        nodes.push(konst(name, autoclust_graph::Tensor::scalar_f32(v)));
    }
    let mut prev = "x".to_string();
    for i in 0..32 {
        let name = format!("op{i}");
        let (op, second) = match i % 8 {
            0 => ("Mul", Some("c_mul")),
            1 => ("AddV2", Some("c_add")),
            2 => ("Tanh", None),
            3 => ("Mul", Some("x")),
            4 => ("Exp", None),
            5 => ("Sub", Some("c_sub")),
            6 => ("Maximum", Some("c_max")),
            _ => ("Minimum", Some("c_min")),
        };
        let inputs: Vec<&str> = match second {
            Some(s) => vec![&prev, s],
            None => vec![&prev],
        };
        nodes.push(node(&name, op, &inputs, vec![]));
        prev = name;
    }
    nodes.push(ret("r", &prev, 0));
    let g = graph(nodes);
    let dump = std::env::var_os("CHAIN_DUMP").map(std::path::PathBuf::from);
    let c = Compiler::new(CompilerOptions { dump_clif_dir: dump, threads: 1, ..Default::default() });
    let mut compile = u64::MAX;
    for _ in 0..5 {
        let t = cpu_ns();
        c.compile(&g, &[(DType::Float32, vec![n])]).unwrap();
        compile = compile.min(cpu_ns() - t);
    }
    let f = c.compile(&g, &[(DType::Float32, vec![n])]).unwrap();
    let xv: Vec<f32> = (0..n).map(|i| ((i % 1000) as f32 / 500.0) - 1.0).collect();
    let x = f32t(&[n], xv.clone());
    let reps = 10;
    let t = cpu_ns();
    let mut out = Vec::new();
    for _ in 0..reps {
        out = f.call(std::slice::from_ref(&x)).unwrap();
    }
    let jit = (cpu_ns() - t) as f64 / reps as f64;
    let t = cpu_ns();
    let mut v = Vec::new();
    for _ in 0..reps {
        v = xv.clone();
        for i in 0..32 {
            v = match i % 8 {
                0 => v.iter().map(|a| a * 0.9).collect(),
                1 => v.iter().map(|a| a + 0.1).collect(),
                2 => v.iter().map(|a| a.tanh()).collect(),
                3 => v.iter().zip(&xv).map(|(a, b)| a * b).collect(),
                4 => v.iter().map(|a| a.exp()).collect(),
                5 => v.iter().map(|a| a - 1.0).collect(),
                6 => v.iter().map(|a| a.max(-1.0)).collect(),
                _ => v.iter().map(|a| a.min(1.0)).collect(),
            };
        }
    }
    let naive = (cpu_ns() - t) as f64 / reps as f64;
    assert_close(out[0].as_f32().unwrap(), &v, 1e-5, "chain_32");
    // Wall clock, all cores (best of 10; noisy on a loaded machine).
    for threads in [1, 0] {
        let fa = Compiler::new(CompilerOptions { threads, ..Default::default() })
            .compile(&g, &[(DType::Float32, vec![n])])
            .unwrap();
        let mut wall = f64::MAX;
        for _ in 0..10 {
            let t = std::time::Instant::now();
            std::hint::black_box(fa.call(std::slice::from_ref(&x)).unwrap());
            wall = wall.min(t.elapsed().as_secs_f64());
        }
        eprintln!("chain_32 wall clock, threads={threads} (0 = all cores): best {:.2} ms/call", wall * 1e3);
    }
    eprintln!(
        "chain_32 over 1M f32 (thread CPU time): compile {:.2} ms, jit {:.2} ms/call, naive per-op loops {:.2} ms/call, speed-up {:.2}x",
        compile as f64 / 1e6,
        jit / 1e6,
        naive / 1e6,
        naive / jit
    );
}

/// A training-step loop the way the runtime drives a cluster: the "variable" holds the
/// value, the call reads it and its output replaces it (so the previous value is released
/// each step, and the output pool can alternate two buffers). Reports thread CPU time per
/// call (threads = 1) for the chain_2 body (x·0.5 + 1) and for 32 cycled ops.
#[test]
#[ignore]
fn variable_step_loop() {
    let n = 1_000_000;
    for depth in [2usize, 8, 32] {
        let mut nodes = vec![arg("x", 0, DType::Float32)];
        for (name, v) in [("c_mul", 0.5f32), ("c_add", 1.0), ("c_sub", 1.25), ("c_max", -1.0), ("c_min", 1.0)] {
            nodes.push(konst(name, autoclust_graph::Tensor::scalar_f32(v)));
        }
        let mut prev = "x".to_string();
        for i in 0..depth {
            let name = format!("op{i}");
            let (op, second) = match i % 8 {
                0 => ("Mul", Some("c_mul")),
                1 => ("AddV2", Some("c_add")),
                2 => ("Tanh", None),
                3 => ("Mul", Some("x")),
                4 => ("Exp", None),
                5 => ("Sub", Some("c_sub")),
                6 => ("Maximum", Some("c_max")),
                _ => ("Minimum", Some("c_min")),
            };
            let inputs: Vec<&str> = match second {
                Some(s) => vec![&prev, s],
                None => vec![&prev],
            };
            nodes.push(node(&name, op, &inputs, vec![]));
            prev = name;
        }
        nodes.push(ret("r", &prev, 0));
        let g = graph(nodes);
        for threads in [1, 0] {
            let dump =
                std::env::var_os("CHAIN_DUMP").map(|d| std::path::PathBuf::from(d).join(format!("chain_{depth}")));
            let f = Compiler::new(CompilerOptions { dump_clif_dir: dump, threads, ..Default::default() })
                .compile(&g, &[(DType::Float32, vec![n])])
                .unwrap();
            let mut var = f32t(&[n], rand_f32(n, 3, -1.0, 1.0));
            let steps = if depth > 8 { 50 } else { 500 };
            for _ in 0..5 {
                var = f.call(std::slice::from_ref(&var)).unwrap().remove(0);
            }
            let (t, w) = (cpu_ns(), std::time::Instant::now());
            for _ in 0..steps {
                var = f.call(std::slice::from_ref(&var)).unwrap().remove(0);
            }
            eprintln!(
                "chain_{depth} threads={threads}: {:.1} us/step calling-thread CPU, {:.1} us/step wall",
                (cpu_ns() - t) as f64 / 1e3 / steps as f64,
                w.elapsed().as_secs_f64() * 1e6 / steps as f64
            );
        }
    }
}

/// Wall µs per call of an LSTM gradient body's four independent products (and the forward
/// cell's two) compiled for one thread and for two (paired steps), alternated.
#[test]
#[ignore]
fn paired_products() {
    use autoclust_graph::AttrValue;
    let (b, d, u) = (32usize, 32usize, 64usize);
    let mm = |name: &str, a: &str, bb: &str, ta: bool, tb: bool| {
        node(name, "MatMul", &[a, bb], vec![("transpose_a", AttrValue::B(ta)), ("transpose_b", AttrValue::B(tb))])
    };
    let g = graph(vec![
        arg("x", 0, DType::Float32),
        arg("h", 1, DType::Float32),
        arg("w", 2, DType::Float32),
        arg("uu", 3, DType::Float32),
        arg("dz", 4, DType::Float32),
        mm("dx", "dz", "w", false, true),
        mm("dh", "dz", "uu", false, true),
        mm("dw", "x", "dz", true, false),
        mm("du", "h", "dz", true, false),
        mm("xw", "x", "w", false, false),
        mm("hu", "h", "uu", false, false),
        ret("r0", "dx", 0),
        ret("r1", "dh", 1),
        ret("r2", "dw", 2),
        ret("r3", "du", 3),
        ret("r4", "xw", 4),
        ret("r5", "hu", 5),
    ]);
    let shapes = [vec![b, d], vec![b, u], vec![d, 4 * u], vec![u, 4 * u], vec![b, 4 * u]];
    let sig: Vec<(DType, Vec<usize>)> = shapes.iter().map(|s| (DType::Float32, s.clone())).collect();
    let ins: Vec<_> =
        shapes.iter().enumerate().map(|(i, s)| f32t(s, rand_f32(s.iter().product(), i as u64, -0.5, 0.5))).collect();
    let fs: Vec<_> = [1, 2]
        .iter()
        .map(|&t| Compiler::new(CompilerOptions { threads: t, ..Default::default() }).compile(&g, &sig).unwrap())
        .collect();
    eprintln!("{:?}", fs[1].describe());
    for round in 0..5 {
        for (k, f) in fs.iter().enumerate() {
            let start = std::time::Instant::now();
            for _ in 0..2000 {
                std::hint::black_box(f.call(&ins).unwrap());
            }
            eprintln!(
                "round {round} threads {}: {:.2} µs per call",
                k + 1,
                start.elapsed().as_secs_f64() * 1e6 / 2000.0
            );
        }
    }
}
