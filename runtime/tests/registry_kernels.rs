//! Every op the registry knows has a kernel in the reference executor, or is on
//! an explicit list of kernel-less ops with the reason. A registry op without a
//! kernel would verify and then fail at run time, so a new schema must come
//! with its kernel (or a line here saying why not).

use autoclust_graph::registry;
use autoclust_runtime::kernels;

/// Ops the executor itself handles instead of a kernel.
const EXECUTOR_OPS: &[(&str, &str)] = &[
    ("Placeholder", "outputs come from the run's feeds"),
    ("PlaceholderWithDefault", "the executor forwards its input unless fed"),
    ("VarHandleOp", "the executor registers the variable and emits its handle"),
    ("PartitionedCall", "function calls: the executor instantiates the body (function_call.rs)"),
    ("StatefulPartitionedCall", "function calls: the executor instantiates the body (function_call.rs)"),
    ("If", "functional control flow: run by function_call.rs"),
    ("StatelessIf", "functional control flow: run by function_call.rs"),
    ("Case", "functional control flow: run by function_call.rs"),
    ("StatelessCase", "functional control flow: run by function_call.rs"),
    ("While", "functional control flow: run by function_call.rs"),
    ("StatelessWhile", "functional control flow: run by function_call.rs"),
    ("Switch", "v1 control flow: run by the frame-aware executor (frames.rs)"),
    ("Merge", "v1 control flow: run by the frame-aware executor (frames.rs)"),
    ("Enter", "v1 control flow: run by the frame-aware executor (frames.rs)"),
    ("Exit", "v1 control flow: run by the frame-aware executor (frames.rs)"),
    ("NextIteration", "v1 control flow: run by the frame-aware executor (frames.rs)"),
    ("LoopCond", "v1 control flow: run by the frame-aware executor (frames.rs)"),
    ("StackV2", "per-step container: a stateful kernel in containers.rs"),
    ("StackPushV2", "per-step container: a stateful kernel in containers.rs"),
    ("StackPopV2", "per-step container: a stateful kernel in containers.rs"),
    ("StackCloseV2", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayGradV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayWriteV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayReadV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayGatherV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayScatterV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayConcatV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArraySplitV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArraySizeV3", "per-step container: a stateful kernel in containers.rs"),
    ("TensorArrayCloseV3", "per-step container: a stateful kernel in containers.rs"),
];

/// Registry ops with no kernel, and why.
const KERNEL_LESS: &[(&str, &str)] = &[];

fn has_kernel(op: &str) -> bool {
    kernels::has_pure_kernel(op)
        || kernels::resource::has_resource_kernel(op)
        || kernels::random::is_random_op(op)
        || kernels::lookup::is_lookup_op(op)
        || kernels::summary_writer::is_writer_op(op)
}

#[test]
fn every_registry_op_has_a_kernel_or_a_reason() {
    let missing: Vec<&str> = registry::all()
        .map(|s| s.name)
        .filter(|op| !has_kernel(op))
        .filter(|op| !EXECUTOR_OPS.iter().chain(KERNEL_LESS).any(|(n, _)| n == op))
        .collect();
    assert!(missing.is_empty(), "registry ops without a runtime kernel: {missing:?}");
}

#[test]
fn the_exception_lists_are_not_stale() {
    for (op, why) in EXECUTOR_OPS.iter().chain(KERNEL_LESS) {
        assert!(registry::is_known(op), "{op} is listed ({why}) but not in the registry");
        assert!(!has_kernel(op), "{op} is listed as kernel-less ({why}) but has a kernel");
    }
}

/// Ops the runtime runs whose outputs the registry does not type yet (so a graph using
/// them clusters around them, with a `note:` naming the node). Keep this list short.
const UNTYPED_WITH_KERNEL: &[&str] = &[];

/// The other direction, against TensorFlow's own op list (`testdata/tf/op_names.txt`, every
/// name in `tf.raw_ops` of the TensorFlow that made the fixtures): an op the executor runs
/// but the registry does not know has no types, so the clusterer declines it and everything
/// it feeds whose type depends on it — the IsNan and Split gaps that kept real steps apart.
#[test]
fn every_op_with_a_kernel_is_typed_by_the_registry() {
    let names = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/tf/op_names.txt")).unwrap();
    let untyped: Vec<&str> = names
        .lines()
        .filter(|op| has_kernel(op) && !registry::is_known(op) && !UNTYPED_WITH_KERNEL.contains(op))
        .collect();
    assert!(untyped.is_empty(), "ops with a kernel but no registry schema: {untyped:?}");
    assert!(names.lines().count() > 1000, "the op list looks truncated");
}
