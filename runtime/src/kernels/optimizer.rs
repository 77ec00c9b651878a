//! The optimizer kernels: TensorFlow's `ResourceApply*` and `ResourceSparseApply*` training ops.
//!
//! Each op names a parameter variable and the optimizer's slot variables
//! (accumulators, moments) by handle, takes scalar hyperparameters and a
//! gradient, and updates every variable in place. Like TensorFlow's kernels
//! with `use_locking` (and stronger than them without it), an op holds the
//! locks of all its variables, taken in `VarId` order, for the whole update,
//! and validates every operand before it changes any element, so a failed
//! op leaves its variables as they were.
//!
//! The update rules follow the CPU functors of TensorFlow's
//! `training_ops.cc` (documented on each `tf.raw_ops.ResourceApply*`):
//! every rule is an elementwise function of one element of the parameter,
//! the same element of each slot, and the gradient, so one loop serves the
//! dense ops (element `i` with gradient `i`) and the sparse ones (row
//! `indices[k]` with gradient row `k`, applied in order, so a repeated index
//! is updated twice as TensorFlow's sparse kernels do).

use std::ops::{Add, Div, Mul, Neg, Sub};

use autoclust_graph::{Node, Tensor};

use super::elementwise::Float;
use super::{arity, attr_bool_or, dispatch_float, int_values, Inputs, Outputs};
use crate::error::{KResult, KernelError};
use crate::kernels::resource::{handle_var, StatefulFn};
use crate::variables::{VarId, VariableStore};

/// A float type with operators, so the update rules read like TensorFlow's.
trait Real:
    Float + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + Neg<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

/// An optimizer's elementwise update rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    GradientDescent,
    Momentum {
        nesterov: bool,
    },
    KerasMomentum {
        nesterov: bool,
    },
    Adam {
        nesterov: bool,
    },
    /// Adam keeping the largest second moment seen (`vhat`, the fourth variable).
    AdamWithAmsgrad,
    AdaMax,
    Adagrad {
        update_slots: bool,
    },
    /// Adagrad dual averaging: the slots are the gradient sum and the squared-gradient sum.
    AdagradDa,
    AdagradV2 {
        update_slots: bool,
    },
    Adadelta,
    RmsProp,
    CenteredRmsProp,
    /// FTRL-proximal; `shrinkage`: the V2 op's `l2_shrinkage` input.
    Ftrl {
        shrinkage: bool,
        multiply_linear_by_lr: bool,
    },
    ProximalGradientDescent,
    ProximalAdagrad,
    AddSign,
    PowerSign,
}

/// Where an op's operands are: the leading `vars` inputs are variable
/// handles (parameter first, then the slots), `grad` and (sparse ops)
/// `indices` are at fixed positions, every other input is a scalar
/// hyperparameter, passed to the rule in input order (AdagradDA's int64
/// `global_step`, always last, is converted to the float type).
#[derive(Clone, Copy, Debug)]
struct Layout {
    vars: usize,
    inputs: usize,
    grad: usize,
    indices: Option<usize>,
    step: Option<usize>,
}

const fn dense(vars: usize, inputs: usize, grad: usize) -> Layout {
    Layout { vars, inputs, grad, indices: None, step: None }
}
const fn sparse(vars: usize, inputs: usize, grad: usize, indices: usize) -> Layout {
    Layout { vars, inputs, grad, indices: Some(indices), step: None }
}
const fn with_step(mut l: Layout, step: usize) -> Layout {
    l.step = Some(step);
    l
}

/// The rule and layout of an optimizer op (attributes not yet applied).
fn spec(op: &str) -> Option<(Rule, Layout)> {
    use Rule::*;
    let momentum = Momentum { nesterov: false };
    let keras = KerasMomentum { nesterov: false };
    let adagrad = Adagrad { update_slots: true };
    let adagrad_v2 = AdagradV2 { update_slots: true };
    let ftrl = Ftrl { shrinkage: false, multiply_linear_by_lr: false };
    let ftrl_v2 = Ftrl { shrinkage: true, multiply_linear_by_lr: false };
    Some(match op {
        "ResourceApplyGradientDescent" => (GradientDescent, dense(1, 3, 2)),
        "ResourceApplyMomentum" => (momentum, dense(2, 5, 3)),
        "ResourceSparseApplyMomentum" => (momentum, sparse(2, 6, 3, 4)),
        "ResourceApplyKerasMomentum" => (keras, dense(2, 5, 3)),
        "ResourceSparseApplyKerasMomentum" => (keras, sparse(2, 6, 3, 4)),
        "ResourceApplyAdam" => (Adam { nesterov: false }, dense(3, 10, 9)),
        "ResourceApplyAdamWithAmsgrad" => (AdamWithAmsgrad, dense(4, 11, 10)),
        "ResourceApplyAdaMax" => (AdaMax, dense(3, 9, 8)),
        "ResourceApplyAdagrad" => (adagrad, dense(2, 4, 3)),
        "ResourceSparseApplyAdagrad" => (adagrad, sparse(2, 5, 3, 4)),
        "ResourceApplyAdagradDA" => (AdagradDa, with_step(dense(3, 8, 3), 7)),
        "ResourceSparseApplyAdagradDA" => (AdagradDa, with_step(sparse(3, 9, 3, 4), 8)),
        "ResourceApplyAdagradV2" => (adagrad_v2, dense(2, 5, 4)),
        "ResourceSparseApplyAdagradV2" => (adagrad_v2, sparse(2, 6, 4, 5)),
        "ResourceApplyAdadelta" => (Adadelta, dense(3, 7, 6)),
        "ResourceSparseApplyAdadelta" => (Adadelta, sparse(3, 8, 6, 7)),
        "ResourceApplyRMSProp" => (RmsProp, dense(3, 8, 7)),
        "ResourceSparseApplyRMSProp" => (RmsProp, sparse(3, 9, 7, 8)),
        "ResourceApplyCenteredRMSProp" => (CenteredRmsProp, dense(4, 9, 8)),
        "ResourceSparseApplyCenteredRMSProp" => (CenteredRmsProp, sparse(4, 10, 8, 9)),
        "ResourceApplyFtrl" => (ftrl, dense(3, 8, 3)),
        "ResourceSparseApplyFtrl" => (ftrl, sparse(3, 9, 3, 4)),
        "ResourceApplyFtrlV2" => (ftrl_v2, dense(3, 9, 3)),
        "ResourceSparseApplyFtrlV2" => (ftrl_v2, sparse(3, 10, 3, 4)),
        "ResourceApplyProximalGradientDescent" => (ProximalGradientDescent, dense(1, 5, 4)),
        "ResourceSparseApplyProximalGradientDescent" => (ProximalGradientDescent, sparse(1, 6, 4, 5)),
        "ResourceApplyProximalAdagrad" => (ProximalAdagrad, dense(2, 6, 5)),
        "ResourceSparseApplyProximalAdagrad" => (ProximalAdagrad, sparse(2, 7, 5, 6)),
        "ResourceApplyAddSign" => (AddSign, dense(2, 7, 6)),
        "ResourceApplyPowerSign" => (PowerSign, dense(2, 7, 6)),
        _ => return None,
    })
}

/// Whether `op` is an optimizer op with a kernel here.
pub fn is_optimizer_op(op: &str) -> bool {
    spec(op).is_some()
}

/// TensorFlow's `sgn`: -1, 0 or 1.
fn sgn<T: Real>(x: T) -> T {
    if x == T::zero() {
        T::zero()
    } else if x < T::zero() {
        -T::one()
    } else {
        T::one()
    }
}

fn rsqrt<T: Real>(x: T) -> T {
    T::one() / x.sqrt()
}

/// `sign(v) * max(|v| - shrink, 0) / scale`, or `v / scale` without L1: the proximal step.
fn proximal<T: Real>(v: T, l1: T, shrink: T, scale: T) -> T {
    if l1 > T::zero() {
        sgn(v) * (v.abs() - shrink).maximum(T::zero()) / scale
    } else {
        v / scale
    }
}

impl Rule {
    /// Updates one element: `w[0]` the parameter, `w[1..]` the slots in
    /// input order; `h` the scalar hyperparameters in input order.
    #[inline]
    fn step<T: Real>(self, h: &[T], w: &mut [T], g: T) {
        let one = T::one();
        let two = one + one;
        match self {
            Rule::GradientDescent => w[0] = w[0] - g * h[0],
            Rule::Momentum { nesterov } => {
                let (lr, mom) = (h[0], h[1]);
                w[1] = w[1] * mom + g;
                w[0] = if nesterov { w[0] - (g * lr + w[1] * mom * lr) } else { w[0] - w[1] * lr };
            }
            Rule::KerasMomentum { nesterov } => {
                let (lr, mom) = (h[0], h[1]);
                w[1] = w[1] * mom - g * lr;
                w[0] = if nesterov { w[0] + (w[1] * mom - g * lr) } else { w[0] + w[1] };
            }
            Rule::Adam { nesterov } => {
                let [b1p, b2p, lr, b1, b2, eps] = [h[0], h[1], h[2], h[3], h[4], h[5]];
                let alpha = lr * (one - b2p).sqrt() / (one - b1p);
                w[1] = w[1] + (g - w[1]) * (one - b1);
                w[2] = w[2] + (g * g - w[2]) * (one - b2);
                let m = if nesterov { g * (one - b1) + b1 * w[1] } else { w[1] };
                w[0] = w[0] - (m * alpha) / (w[2].sqrt() + eps);
            }
            Rule::AdamWithAmsgrad => {
                let [b1p, b2p, lr, b1, b2, eps] = [h[0], h[1], h[2], h[3], h[4], h[5]];
                let alpha = lr * (one - b2p).sqrt() / (one - b1p);
                w[1] = w[1] + (g - w[1]) * (one - b1);
                w[2] = w[2] + (g * g - w[2]) * (one - b2);
                w[3] = w[3].maximum(w[2]);
                w[0] = w[0] - (w[1] * alpha) / (w[3].sqrt() + eps);
            }
            Rule::AdaMax => {
                let [b1p, lr, b1, b2, eps] = [h[0], h[1], h[2], h[3], h[4]];
                w[1] = w[1] + (g - w[1]) * (one - b1);
                w[2] = (b2 * w[2]).maximum(g.abs());
                w[0] = w[0] - lr / (one - b1p) * (w[1] / (w[2] + eps));
            }
            Rule::Adagrad { update_slots } => {
                if update_slots {
                    w[1] = w[1] + g * g;
                }
                w[0] = w[0] - g * h[0] * rsqrt(w[1]);
            }
            Rule::AdagradDa => {
                let [lr, l1, l2, step] = [h[0], h[1], h[2], h[3]];
                w[1] = w[1] + g;
                w[2] = w[2] + g * g;
                let denom = l2 * (step * lr) + w[2].sqrt();
                w[0] = if l1 > T::zero() {
                    lr * -one * sgn(w[1]) * (w[1].abs() - step * l1).maximum(T::zero()) / denom
                } else {
                    lr * w[1] * -one / denom
                };
            }
            Rule::AdagradV2 { update_slots } => {
                if update_slots {
                    w[1] = w[1] + g * g;
                }
                w[0] = w[0] - g * h[0] / (w[1].sqrt() + h[1]);
            }
            Rule::Adadelta => {
                let (lr, rho, eps) = (h[0], h[1], h[2]);
                w[1] = w[1] * rho + g * g * (one - rho);
                let update = (w[2] + eps).sqrt() * rsqrt(w[1] + eps) * g;
                w[0] = w[0] - update * lr;
                w[2] = w[2] * rho + update * update * (one - rho);
            }
            Rule::RmsProp => {
                let [lr, rho, mom, eps] = [h[0], h[1], h[2], h[3]];
                w[1] = w[1] + (g * g - w[1]) * (one - rho);
                w[2] = w[2] * mom + (g * lr) / (w[1] + eps).sqrt();
                w[0] = w[0] - w[2];
            }
            Rule::CenteredRmsProp => {
                // Slots in input order: mg, ms, mom.
                let [lr, rho, mom, eps] = [h[0], h[1], h[2], h[3]];
                w[2] = w[2] + (g * g - w[2]) * (one - rho);
                w[1] = w[1] + (g - w[1]) * (one - rho);
                let denom = (w[2] - w[1] * w[1]) + eps;
                w[3] = w[3] * mom + (g * lr) / denom.sqrt();
                w[0] = w[0] - w[3];
            }
            Rule::Ftrl { shrinkage, multiply_linear_by_lr } => {
                let (lr, l1, l2) = (h[0], h[1], h[2]);
                let (shrink, lr_power) = if shrinkage { (h[3], h[4]) } else { (T::zero(), h[3]) };
                let (var, accum, linear) = (w[0], w[1], w[2]);
                let g_shrunk = if shrinkage { g + two * shrink * var } else { g };
                let new_accum = accum + g * g;
                let half = lr_power == T::from_f64(-0.5);
                let pow = |x: T| if half { x.sqrt() } else { x.pow(-lr_power) };
                let (new_pow, old_pow) = (pow(new_accum), pow(accum));
                let (lin, l1_eff, y) = if multiply_linear_by_lr {
                    (linear + (g_shrunk * lr - (new_pow - old_pow) * var), l1 * lr, new_pow + two * l2 * lr)
                } else {
                    (linear + (g_shrunk - (new_pow - old_pow) / lr * var), l1, new_pow / lr + two * l2)
                };
                let x = l1_eff * sgn(lin) - lin;
                w[2] = lin;
                w[0] = if lin.abs() > l1_eff { x / y } else { T::zero() };
                w[1] = new_accum;
            }
            Rule::ProximalGradientDescent => {
                let (lr, l1, l2) = (h[0], h[1], h[2]);
                let prox = w[0] - g * lr;
                w[0] = proximal(prox, l1, lr * l1, one + l2 * lr);
            }
            Rule::ProximalAdagrad => {
                let (lr, l1, l2) = (h[0], h[1], h[2]);
                w[1] = w[1] + g * g;
                let rate = lr * rsqrt(w[1]);
                let prox = w[0] - g * rate;
                w[0] = proximal(prox, l1, rate * l1, one + l2 * rate);
            }
            Rule::AddSign | Rule::PowerSign => {
                let [lr, a, decay, beta] = [h[0], h[1], h[2], h[3]];
                w[1] = w[1] * beta + g * (one - beta);
                let s = sgn(g) * sgn(w[1]);
                let scale = if self == Rule::AddSign { a + decay * s } else { (a * decay * s).exp() };
                w[0] = w[0] - lr * scale * g;
            }
        }
    }
}

fn scalar_input<T: Real>(t: &Tensor, what: usize) -> KResult<T> {
    if t.rank() != 0 || t.dtype != T::DTYPE {
        return Err(KernelError::invalid(format!(
            "input {what} must be a scalar of dtype {}, got {} {:?}",
            T::DTYPE,
            t.dtype,
            t.shape
        )));
    }
    Ok(T::slice(t)[0])
}

/// Validates the operands against the variables' values and applies the
/// rule; changes nothing on error.
fn apply<T: Real>(rule: Rule, layout: Layout, vals: &mut [Tensor], inp: &Inputs) -> KResult<()> {
    let grad = &inp[layout.grad];
    for v in vals.iter() {
        if v.dtype != T::DTYPE || grad.dtype != T::DTYPE {
            return Err(KernelError::invalid(format!(
                "dtype mismatch: variable {} vs gradient {}",
                v.dtype, grad.dtype
            )));
        }
        super::check_native(v)?;
        if v.shape != vals[0].shape {
            return Err(KernelError::invalid(format!(
                "var and its slot do not have the same shape {:?} {:?}",
                vals[0].shape, v.shape
            )));
        }
    }
    super::check_native(grad)?;
    let mut hyper = Vec::new();
    for i in layout.vars..layout.inputs {
        if i != layout.grad && Some(i) != layout.indices && Some(i) != layout.step {
            hyper.push(scalar_input::<T>(&inp[i], i)?);
        }
    }
    if let Some(i) = layout.step {
        if inp[i].rank() != 0 {
            return Err(KernelError::invalid(format!("global_step must be a scalar, got {:?}", inp[i].shape)));
        }
        // TensorFlow converts the step to float before scaling by it.
        hyper.push(T::from_f64(super::int_scalar(&inp[i], "global_step")? as f32 as f64));
    }
    let shape = vals[0].shape.clone();
    // The element offsets each gradient element updates, as (row start, grad row start).
    let (rows, inner): (Vec<usize>, usize) = match layout.indices {
        None => {
            if grad.shape != shape {
                return Err(KernelError::invalid(format!(
                    "var and grad do not have the same shape {shape:?} {:?}",
                    grad.shape
                )));
            }
            (vec![0], grad.num_elements())
        }
        Some(at) => {
            let idx_t = &inp[at];
            if idx_t.rank() != 1 {
                return Err(KernelError::invalid(format!("indices must be one-dimensional, got {:?}", idx_t.shape)));
            }
            if shape.is_empty() {
                return Err(KernelError::invalid("var must be at least 1 dimensional"));
            }
            let idx = int_values(idx_t, "indices")?;
            let mut want = vec![idx.len()];
            want.extend(&shape[1..]);
            if grad.shape != want {
                return Err(KernelError::invalid(format!(
                    "grad must have shape {want:?} (indices then the variable's inner dimensions), got {:?}",
                    grad.shape
                )));
            }
            let n = shape[0];
            let rows = idx
                .iter()
                .enumerate()
                .map(|(k, &i)| {
                    usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
                        KernelError::invalid(format!("Index {i} at offset {k} in indices is out of range [0, {n})"))
                    })
                })
                .collect::<KResult<Vec<usize>>>()?;
            (rows, shape[1..].iter().product())
        }
    };
    let g = T::slice(grad);
    if rule == Rule::GradientDescent && layout.indices.is_none() {
        // The common case, as one tight loop (the executor benchmark's update).
        let alpha = hyper[0];
        for (w, &d) in T::vec_mut(&mut vals[0].data).iter_mut().zip(g) {
            *w = *w - d * alpha;
        }
        return Ok(());
    }
    let mut bufs: Vec<&mut Vec<T>> = vals.iter_mut().map(|v| T::vec_mut(&mut v.data)).collect();
    let mut w = [T::zero(); 4];
    let w = &mut w[..bufs.len()];
    for (k, &row) in rows.iter().enumerate() {
        for j in 0..inner {
            let at = row * inner + j;
            for (x, b) in w.iter_mut().zip(bufs.iter()) {
                *x = b[at];
            }
            rule.step(&hyper, w, g[k * inner + j]);
            for (x, b) in w.iter().zip(bufs.iter_mut()) {
                b[at] = *x;
            }
        }
    }
    Ok(())
}

/// The update of half-precision variables (float16, bfloat16: what `tf.compat.v1`
/// optimizers emit for a half model): the variables, gradient and hyperparameters widened to
/// float32, the rule applied there, the variables rounded back to nearest-even. TensorFlow's
/// kernels round after each operation of the rule instead, so results may differ from its by
/// an ulp of the half type. Every float operand must have the variables' dtype, as
/// TensorFlow's type constraint `T` says.
fn apply_half(rule: Rule, layout: Layout, vals: &mut [Tensor], inp: &Inputs) -> KResult<()> {
    let half = vals[0].dtype;
    let mut wide: Vec<Tensor> = Vec::with_capacity(vals.len());
    for v in vals.iter() {
        if v.dtype != half {
            return Err(KernelError::DType(v.dtype));
        }
        wide.push(super::half::widen(v)?);
    }
    let mut wide_inp = Inputs::new();
    for (i, t) in inp.iter().enumerate() {
        let float_operand = i >= layout.vars && Some(i) != layout.indices && Some(i) != layout.step;
        if float_operand && t.dtype != half {
            return Err(KernelError::DType(t.dtype));
        }
        wide_inp.push(if float_operand { super::half::widen(t)? } else { t.clone() });
    }
    apply::<f32>(rule, layout, &mut wide, &wide_inp)?;
    let narrow: Vec<Tensor> = wide.iter().map(|w| super::half::narrow(w, half)).collect::<KResult<_>>()?;
    for (v, n) in vals.iter_mut().zip(narrow) {
        *v = n;
    }
    Ok(())
}

/// Runs an optimizer op: locks its variables in id order, validates, updates.
fn run(store: &VariableStore, rule: Rule, layout: Layout, inp: Inputs) -> KResult<Outputs> {
    arity(&inp, layout.inputs)?;
    let ids: Vec<VarId> = inp[..layout.vars].iter().map(handle_var).collect::<KResult<_>>()?;
    for i in 0..ids.len() {
        if ids[..i].contains(&ids[i]) {
            return Err(KernelError::invalid("the same variable is passed twice"));
        }
    }
    let set = store.var_set(&ids);
    let mut guards = set.lock();
    if let Some(&missing) = ids.iter().find(|&&id| guards.get(id).is_none()) {
        return Err(KernelError::Uninitialized(store.get(missing).name.clone()));
    }
    // Take the values out so the update owns their buffers (in place unless
    // an earlier snapshot still shares them), then put them back: on a
    // validation error they are unchanged.
    let mut vals: Vec<Tensor> = ids.iter().map(|&id| guards.take(id).expect("checked above")).collect();
    let result = if vals[0].dtype.is_half() {
        apply_half(rule, layout, &mut vals, &inp)
    } else {
        dispatch_float!(vals[0].dtype, apply(rule, layout, &mut vals, &inp))
    };
    for (&id, v) in ids.iter().zip(vals) {
        guards.set(id, v);
    }
    result.map(|()| Outputs::new())
}

/// Prepares an optimizer op's kernel, or `None` if `node.op` is not one.
pub(crate) fn prepare(node: &Node) -> KResult<Option<StatefulFn>> {
    let Some((mut rule, layout)) = spec(&node.op) else { return Ok(None) };
    let nesterov = attr_bool_or(node, "use_nesterov", false)?;
    let update_slots = attr_bool_or(node, "update_slots", true)?;
    let by_lr = attr_bool_or(node, "multiply_linear_by_lr", false)?;
    match &mut rule {
        Rule::Momentum { nesterov: n } | Rule::KerasMomentum { nesterov: n } | Rule::Adam { nesterov: n } => {
            *n = nesterov
        }
        Rule::Adagrad { update_slots: u } | Rule::AdagradV2 { update_slots: u } => *u = update_slots,
        Rule::Ftrl { multiply_linear_by_lr, .. } => *multiply_linear_by_lr = by_lr,
        _ => {}
    }
    Ok(Some(Box::new(move |s: &VariableStore, i: Inputs| run(s, rule, layout, i))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::resource::handle_tensor;
    use crate::kernels::tests_support::node;
    use autoclust_graph::{AttrValue, DType, Shape};
    use smallvec::SmallVec;

    fn store(vals: &[(&str, Tensor)]) -> (VariableStore, Vec<VarId>) {
        let s = VariableStore::new();
        let ids = vals
            .iter()
            .map(|(n, v)| {
                let id = s.get_or_create("", n, v.dtype, Shape::unknown());
                s.get(id).write(v.clone());
                id
            })
            .collect();
        (s, ids)
    }

    fn v64(x: &[f64]) -> Tensor {
        Tensor::from_f64(vec![x.len()], x.to_vec()).unwrap()
    }
    fn s64(x: f64) -> Tensor {
        Tensor::from_f64(vec![], vec![x]).unwrap()
    }
    fn get(s: &VariableStore, id: VarId) -> Vec<f64> {
        s.get(id).read().unwrap().as_f64().unwrap().to_vec()
    }

    fn run_op(op: &str, attrs: &[(&str, AttrValue)], s: &VariableStore, inp: Vec<Tensor>) -> KResult<Outputs> {
        prepare(&node(op, attrs))?.expect("an optimizer op")(s, inp.into_iter().collect::<SmallVec<_>>())
    }

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} vs {b:?}");
        }
    }

    /// Two AMSGrad steps on float32 variables: every variable within one float32 rounding of
    /// TensorFlow 2.21's `ResourceApplyAdamWithAmsgrad` (vhat keeps its larger entries).
    #[test]
    fn adam_with_amsgrad_matches_tensorflow() {
        let f32s = |x: &[f32]| Tensor::from_f32(vec![x.len()], x.to_vec()).unwrap();
        let (s, ids) = store(&[
            ("w", f32s(&[0.5, -0.25, 1.0, -1.5, 0.75, 0.125])),
            ("m", f32s(&[0.1, -0.2, 0.0, 0.3, -0.05, 0.02])),
            ("v", f32s(&[0.01, 0.04, 0.0, 0.09, 0.5, 0.001])),
            ("vhat", f32s(&[0.02, 0.01, 0.0, 0.2, 0.1, 0.0005])),
        ]);
        let h: Vec<Tensor> = ids.iter().map(|&i| handle_tensor(i)).collect();
        let sc = |x: f32| Tensor::from_f32(vec![], vec![x]).unwrap();
        // The beta powers as TensorFlow's Python computed them: in float64, rounded once.
        for step in 1..=2 {
            let mut inp = h.clone();
            inp.extend([0.9f64.powi(step) as f32, 0.999f64.powi(step) as f32, 0.01, 0.9, 0.999, 1e-7].map(sc));
            inp.push(f32s(&[0.3, -0.7, 0.05, 1.2, -0.4, 0.9]));
            run_op("ResourceApplyAdamWithAmsgrad", &[], &s, inp).unwrap();
        }
        let want: [&[f64]; 4] = [
            &[
                0.4950205087661743,
                -0.24263666570186615,
                0.980000913143158,
                -1.505236029624939,
                0.7507681250572205,
                0.1083594411611557,
            ],
            &[
                0.1380000114440918,
                -0.29500001668930054,
                0.00950000248849392,
                0.471000075340271,
                -0.11650002002716064,
                0.18720003962516785,
            ],
            &[
                0.010159917175769806,
                0.04089953750371933,
                4.997436008125078e-06,
                0.09269861876964569,
                0.4993203580379486,
                0.002617170102894306,
            ],
            &[
                0.019999999552965164,
                0.04089953750371933,
                4.997436008125078e-06,
                0.20000000298023224,
                0.49966001510620117,
                0.002617170102894306,
            ],
        ];
        for (id, want) in ids.iter().zip(want) {
            let got = s.get(*id).read().unwrap();
            for (a, b) in got.as_f32().unwrap().iter().zip(want) {
                assert!((f64::from(*a) - b).abs() <= 2e-7 * b.abs().max(1e-3), "{got:?} vs {want:?}");
            }
        }
    }

    /// A float16 or bfloat16 tensor of `x` (each rounded to the type).
    fn half(dtype: DType, shape: Vec<usize>, x: &[f32]) -> Tensor {
        autoclust_graph::half::narrow(&Tensor::from_f32(shape, x.to_vec()).unwrap(), dtype).unwrap()
    }

    #[test]
    fn half_variables_update_in_float32_and_round_back() {
        for dtype in [DType::Float16, DType::BFloat16] {
            let (w0, m0, v0, g) =
                ([0.5f32, -1.25, 3.0], [0.1f32, 0.0, -0.2], [0.01f32, 0.5, 0.25], [0.3f32, -2.0, 0.7]);
            let (s, ids) = store(&[
                ("w", half(dtype, vec![3], &w0)),
                ("m", half(dtype, vec![3], &m0)),
                ("v", half(dtype, vec![3], &v0)),
            ]);
            let h: Vec<Tensor> = ids.iter().map(|&i| handle_tensor(i)).collect();
            let sc = |x: f32| half(dtype, vec![], &[x]);
            let (b1p, b2p, lr, b1, b2, eps) = (0.9f32, 0.999f32, 0.1f32, 0.9f32, 0.999f32, 1e-3f32);
            let inp = vec![
                h[0].clone(),
                h[1].clone(),
                h[2].clone(),
                sc(b1p),
                sc(b2p),
                sc(lr),
                sc(b1),
                sc(b2),
                sc(eps),
                half(dtype, vec![3], &g),
            ];
            run_op("ResourceApplyAdam", &[], &s, inp).unwrap();
            // Every operand as the half type holds it, the rule in float32, one rounding.
            let r = |x: f32| autoclust_graph::half::round_to(x, dtype);
            let (b1p, b2p, lr, b1, b2, eps) = (r(b1p), r(b2p), r(lr), r(b1), r(b2), r(eps));
            let alpha = lr * (1.0 - b2p).sqrt() / (1.0 - b1p);
            for i in 0..3 {
                let (w, m, v, g) = (r(w0[i]), r(m0[i]), r(v0[i]), r(g[i]));
                let m = m + (g - m) * (1.0 - b1);
                let v = v + (g * g - v) * (1.0 - b2);
                let w = w - m * alpha / (v.sqrt() + eps);
                let got: Vec<f32> =
                    ids.iter().map(|&id| s.get(id).read().unwrap().to_f64_vec().unwrap()[i] as f32).collect();
                assert_eq!(got, vec![r(w), r(m), r(v)], "{dtype} element {i}");
                assert_eq!(s.get(ids[0]).read().unwrap().dtype, dtype, "the variable keeps its type");
            }
        }
        // An operand of another float type is refused, as TensorFlow's `T` constraint does,
        // and the variable is left as it was.
        let (s, ids) = store(&[("w", half(DType::Float16, vec![1], &[1.0]))]);
        let inp = vec![handle_tensor(ids[0]), Tensor::scalar_f32(0.1), half(DType::Float16, vec![1], &[1.0])];
        assert!(run_op("ResourceApplyGradientDescent", &[], &s, inp).is_err());
        assert_eq!(s.get(ids[0]).read().unwrap().to_f64_vec().unwrap(), vec![1.0]);
    }

    #[test]
    fn rmsprop_follows_the_documented_formula() {
        let (s, ids) = store(&[("w", v64(&[1.0, -2.0])), ("ms", v64(&[0.5, 1.0])), ("mom", v64(&[0.1, 0.0]))]);
        let h: Vec<Tensor> = ids.iter().map(|&i| handle_tensor(i)).collect();
        let g = v64(&[0.3, -0.4]);
        let inp = vec![h[0].clone(), h[1].clone(), h[2].clone(), s64(0.01), s64(0.9), s64(0.5), s64(1e-6), g];
        run_op("ResourceApplyRMSProp", &[], &s, inp).unwrap();
        let (mut w, mut ms, mut mom) = ([1.0, -2.0], [0.5, 1.0], [0.1, 0.0]);
        for (i, gi) in [0.3f64, -0.4].into_iter().enumerate() {
            ms[i] = 0.9 * ms[i] + 0.1 * gi * gi;
            mom[i] = 0.5 * mom[i] + 0.01 * gi / (ms[i] + 1e-6).sqrt();
            w[i] -= mom[i];
        }
        close(&get(&s, ids[0]), &w);
        close(&get(&s, ids[1]), &ms);
        close(&get(&s, ids[2]), &mom);
    }

    #[test]
    fn ftrl_zeroes_weights_below_l1() {
        let (s, ids) = store(&[("w", v64(&[0.5, 0.5])), ("acc", v64(&[0.1, 0.1])), ("lin", v64(&[0.0, 0.0]))]);
        let h: Vec<Tensor> = ids.iter().map(|&i| handle_tensor(i)).collect();
        // l1 = 10 dwarfs |linear|: both weights become exactly 0.
        let inp = vec![h[0].clone(), h[1].clone(), h[2].clone(), v64(&[0.1, -0.2]), s64(0.1), s64(10.0), s64(0.0)];
        let mut inp = inp;
        inp.push(s64(-0.5));
        run_op("ResourceApplyFtrl", &[], &s, inp).unwrap();
        assert_eq!(get(&s, ids[0]), vec![0.0, 0.0]);
        close(&get(&s, ids[1]), &[0.11, 0.14]);
        // linear = g - (sqrt(new) - sqrt(old)) / lr * w
        let lin0 = 0.1 - (0.11f64.sqrt() - 0.1f64.sqrt()) / 0.1 * 0.5;
        close(&get(&s, ids[2])[..1], &[lin0]);
    }

    #[test]
    fn sparse_momentum_applies_repeated_rows_in_order() {
        let table = Tensor::from_f64(vec![3, 2], vec![1.0; 6]).unwrap();
        let (s, ids) = store(&[("t", table), ("acc", Tensor::from_f64(vec![3, 2], vec![0.0; 6]).unwrap())]);
        let grad = Tensor::from_f64(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let idx = Tensor::from_i32(vec![2], vec![2, 2]).unwrap();
        let inp = vec![handle_tensor(ids[0]), handle_tensor(ids[1]), s64(0.1), grad, idx, s64(0.5)];
        run_op("ResourceSparseApplyMomentum", &[], &s, inp).unwrap();
        // Row 2: accum = 1, 2 then 0.5 + 3, 1 + 4; var -= 0.1 * accum each time.
        close(&get(&s, ids[1]), &[0.0, 0.0, 0.0, 0.0, 3.5, 5.0]);
        close(&get(&s, ids[0]), &[1.0, 1.0, 1.0, 1.0, 1.0 - 0.1 - 0.35, 1.0 - 0.2 - 0.5]);
    }

    #[test]
    fn bad_operands_change_nothing() {
        let (s, ids) =
            store(&[("t", Tensor::from_f64(vec![2, 1], vec![1.0, 2.0]).unwrap()), ("acc", v64(&[1.0, 1.0]))]);
        let h = |i: usize| handle_tensor(ids[i]);
        // Slot shape differs from the parameter's.
        let g = Tensor::from_f64(vec![2, 1], vec![1.0, 1.0]).unwrap();
        assert!(run_op("ResourceApplyAdagrad", &[], &s, vec![h(0), h(1), s64(0.1), g]).is_err());
        // Index out of range.
        let (s2, ids2) = store(&[("t", v64(&[1.0, 2.0])), ("acc", v64(&[1.0, 1.0]))]);
        let idx = Tensor::from_i64(vec![2], vec![0, 2]).unwrap();
        let e = run_op(
            "ResourceSparseApplyAdagrad",
            &[],
            &s2,
            vec![handle_tensor(ids2[0]), handle_tensor(ids2[1]), s64(0.1), v64(&[1.0, 1.0]), idx],
        )
        .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        assert_eq!(get(&s2, ids2[0]), vec![1.0, 2.0]);
        assert_eq!(get(&s2, ids2[1]), vec![1.0, 1.0]);
        // Uninitialised slot names the variable.
        let s3 = VariableStore::new();
        let w = s3.get_or_create("", "w", DType::Float64, Shape::unknown());
        s3.get(w).write(v64(&[1.0]));
        let a = s3.get_or_create("", "w/Adagrad", DType::Float64, Shape::unknown());
        let e =
            run_op("ResourceApplyAdagrad", &[], &s3, vec![handle_tensor(w), handle_tensor(a), s64(0.1), v64(&[1.0])])
                .unwrap_err();
        assert_eq!(e, KernelError::Uninitialized("w/Adagrad".into()));
    }

    #[test]
    fn nesterov_attribute_is_read() {
        let run_momentum = |nesterov: bool| {
            let (s, ids) = store(&[("w", v64(&[1.0])), ("a", v64(&[0.5]))]);
            let inp = vec![handle_tensor(ids[0]), handle_tensor(ids[1]), s64(0.1), v64(&[2.0]), s64(0.9)];
            run_op("ResourceApplyMomentum", &[("use_nesterov", AttrValue::B(nesterov))], &s, inp).unwrap();
            get(&s, ids[0])[0]
        };
        let accum = 0.5 * 0.9 + 2.0;
        close(&[run_momentum(false)], &[1.0 - 0.1 * accum]);
        close(&[run_momentum(true)], &[1.0 - (2.0 * 0.1 + accum * 0.9 * 0.1)]);
    }
}
