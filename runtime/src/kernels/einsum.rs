//! The `Einsum` kernel: parses the equation for the operands' ranks and evaluates it with
//! [`autoclust_numeric::einsum`] (the same code compiled clusters run).

use autoclust_graph::einsum::Equation;
use autoclust_graph::{Node, Tensor};

use super::{one, Inputs, PureFn};
use crate::error::{KResult, KernelError};

pub(crate) fn prepare(node: &Node) -> KResult<Option<PureFn>> {
    if node.op != "Einsum" {
        return Ok(None);
    }
    let equation = node
        .attr("equation")
        .and_then(|a| a.as_str())
        .ok_or_else(|| KernelError::invalid("the 'equation' attribute is missing"))?
        .to_string();
    Ok(Some(Box::new(move |inp: Inputs| {
        let ins: Vec<&Tensor> = inp.iter().collect();
        for t in &ins {
            super::check_native(t)?;
        }
        let ranks: Vec<usize> = ins.iter().map(|t| t.rank()).collect();
        let eq = Equation::parse(&equation, &ranks).map_err(KernelError::invalid)?;
        // An outer product's output can be far larger than its operands: checked first.
        let dims: Vec<Vec<Option<i64>>> =
            ins.iter().map(|t| t.shape.iter().map(|&d| Some(d as i64)).collect()).collect();
        let dims: Vec<&[Option<i64>]> = dims.iter().map(Vec::as_slice).collect();
        let sizes = eq.sizes(&dims).map_err(KernelError::invalid)?;
        let out: Vec<i64> = eq.output_dims(&sizes).iter().map(|d| d.unwrap_or(0)).collect();
        autoclust_graph::limits::tensor_elements_i64(
            ins.first().map_or(autoclust_graph::DType::Float32, |t| t.dtype),
            &out,
        )?;
        one(autoclust_numeric::einsum::einsum(&eq, &ins).map_err(KernelError::invalid)?)
    })))
}

#[cfg(test)]
mod tests {
    use crate::kernels::tests_support::{node, run1};
    use autoclust_graph::{AttrValue, Tensor};

    fn einsum(eq: &str, ins: &[Tensor]) -> Result<Tensor, String> {
        let n = node(
            "Einsum",
            &[("equation", AttrValue::S(eq.as_bytes().to_vec())), ("N", AttrValue::I(ins.len() as i64))],
        );
        run1(&n, ins).map_err(|e| e.to_string())
    }
    fn t(shape: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_f32(shape.to_vec(), v).unwrap()
    }
    fn iota(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        t(shape, (0..n).map(|i| i as f32).collect())
    }

    /// Against a direct sum over every label (the definition).
    #[test]
    fn matches_the_definition() {
        // "bqhd,bkhd->bhqk": Keras attention scores.
        let (b, q, k, h, d) = (2, 3, 4, 2, 5);
        let x = iota(&[b, q, h, d]);
        let y = t(&[b, k, h, d], (0..b * k * h * d).map(|i| (i % 7) as f32 - 3.0).collect());
        let got = einsum("bqhd,bkhd->bhqk", &[x.clone(), y.clone()]).unwrap();
        assert_eq!(got.shape, vec![b, h, q, k]);
        let (xs, ys) = (x.as_f32().unwrap(), y.as_f32().unwrap());
        let mut want = Vec::new();
        for bi in 0..b {
            for hi in 0..h {
                for qi in 0..q {
                    for ki in 0..k {
                        let mut s = 0.0;
                        for di in 0..d {
                            s += xs[((bi * q + qi) * h + hi) * d + di] * ys[((bi * k + ki) * h + hi) * d + di];
                        }
                        want.push(s);
                    }
                }
            }
        }
        assert_eq!(got.as_f32().unwrap(), want.as_slice());
    }

    #[test]
    fn one_operand_transposes_and_sums() {
        let x = iota(&[2, 3]);
        assert_eq!(einsum("ij->ji", std::slice::from_ref(&x)).unwrap().as_f32().unwrap(), &[0., 3., 1., 4., 2., 5.]);
        assert_eq!(einsum("ij->i", std::slice::from_ref(&x)).unwrap().as_f32().unwrap(), &[3., 12.]);
        let s = einsum("ij->", &[x]).unwrap();
        assert!(s.shape.is_empty());
        assert_eq!(s.as_f32().unwrap(), &[15.]);
    }

    #[test]
    fn broadcast_ellipsis_outer_product_and_summed_free_labels() {
        // [2,1,2,3] x [4,3,2] -> [2,4,2,2] with the size-1 ellipsis axis broadcast.
        let a = iota(&[2, 1, 2, 3]);
        let b = t(&[4, 3, 2], (0..24).map(|i| (i % 5) as f32).collect());
        let c = einsum("...ij,...jk->...ik", &[a.clone(), b.clone()]).unwrap();
        assert_eq!(c.shape, vec![2, 4, 2, 2]);
        let (av, bv, cv) = (a.as_f32().unwrap(), b.as_f32().unwrap(), c.as_f32().unwrap());
        let want = |p: usize, q: usize, i: usize, k: usize| {
            (0..3).map(|j| av[(p * 2 + i) * 3 + j] * bv[(q * 3 + j) * 2 + k]).sum::<f32>()
        };
        let at = |p: usize, q: usize, i: usize, k: usize| ((p * 4 + q) * 2 + i) * 2 + k;
        for (p, q, i, k) in [(1, 3, 1, 0), (0, 2, 0, 1), (1, 0, 1, 1)] {
            assert_eq!(cv[at(p, q, i, k)], want(p, q, i, k));
        }
        // Outer product and a label summed inside one operand.
        let u = t(&[2], vec![1., 2.]);
        let v = t(&[3], vec![1., 10., 100.]);
        assert_eq!(
            einsum("i,j->ij", &[u.clone(), v.clone()]).unwrap().as_f32().unwrap(),
            &[1., 10., 100., 2., 20., 200.]
        );
        let m = iota(&[2, 3]);
        assert_eq!(einsum("ij,k->k", &[m, u]).unwrap().as_f32().unwrap(), &[15., 30.]);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = einsum("ij,jk->ik", &[iota(&[2, 3]), iota(&[4, 5])]).unwrap_err();
        assert!(e.contains("'j' has size 3"), "{e}");
        let e = einsum("ii->i", &[iota(&[2, 3])]).unwrap_err();
        assert!(e.contains("'i' has size 2"), "{e}");
    }

    /// Repeated labels, as TensorFlow 2.21 computes them: `tf.einsum('ii->i', x)` of
    /// `reshape(range(9), [3, 3])` is `[0, 4, 8]`, `'ii->'` is 12, `'bii->b'` sums each
    /// batch's diagonal, `'ib->bii'` (that sum's gradient) spreads over diagonals, a repeated
    /// label in a two-operand product (`'ii,i->i'`), and one repeated three times.
    #[test]
    fn repeated_labels_take_and_spread_diagonals() {
        let x = iota(&[3, 3]);
        assert_eq!(einsum("ii->i", std::slice::from_ref(&x)).unwrap().as_f32().unwrap(), &[0., 4., 8.]);
        let tr = einsum("ii->", std::slice::from_ref(&x)).unwrap();
        assert!(tr.shape.is_empty());
        assert_eq!(tr.as_f32().unwrap(), &[12.]);
        // Implicit mode: a letter used twice is summed (the trace).
        assert_eq!(einsum("ii", std::slice::from_ref(&x)).unwrap().as_f32().unwrap(), &[12.]);
        let b = iota(&[2, 3, 3]);
        assert_eq!(einsum("bii->b", std::slice::from_ref(&b)).unwrap().as_f32().unwrap(), &[12., 39.]);
        let g = t(&[3, 2], vec![1., 2., 1., 2., 1., 2.]);
        let spread = einsum("ib->bii", &[g]).unwrap();
        assert_eq!(spread.shape, vec![2, 3, 3]);
        assert_eq!(spread.as_f32().unwrap(), &[1., 0., 0., 0., 1., 0., 0., 0., 1., 2., 0., 0., 0., 2., 0., 0., 0., 2.]);
        let v = t(&[3], vec![1., 10., 100.]);
        assert_eq!(einsum("ii,i->i", &[x.clone(), v]).unwrap().as_f32().unwrap(), &[0., 40., 800.]);
        let cube = iota(&[2, 2, 2]);
        assert_eq!(einsum("iii->i", &[cube]).unwrap().as_f32().unwrap(), &[0., 7.]);
        // A diagonal kept in the output next to a free axis: 'ij->iij'.
        let d = einsum("ij->iij", &[iota(&[2, 2])]).unwrap();
        assert_eq!(d.as_f32().unwrap(), &[0., 1., 0., 0., 0., 0., 2., 3.]);
    }
}
