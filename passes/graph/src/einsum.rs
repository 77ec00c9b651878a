//! `Einsum` equations, parsed once for the shape function and the kernel alike.
//!
//! An equation names each axis of each operand with a letter (`"bqhd,bkhd->bhqk"`);
//! `...` stands for the leading axes of an operand not named otherwise, aligned from the
//! right and broadcast between operands as in NumPy. Without `->` (implicit mode) the
//! output is the ellipsis axes followed by the letters used exactly once, alphabetically.
//! Letters missing from the output are summed over. As in TensorFlow, one or two
//! operands. A letter repeated within one operand takes its diagonal (`"ii->i"`, the trace
//! `"ii->"`); repeated in the output, it spreads the result over a diagonal, zero elsewhere
//! (`"ib->bii"`, the gradient TensorFlow writes for `"bii->b"`).

/// An axis label: a letter, or the `j`-th ellipsis axis counted from the right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Label {
    Ellipsis(usize),
    Letter(u8),
}

/// An equation resolved against the operands' ranks: the label of every axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Equation {
    pub inputs: Vec<Vec<Label>>,
    pub output: Vec<Label>,
}

/// One side of the equation before the ellipsis is expanded.
struct Term {
    before: Vec<u8>,
    /// Letters after `...`, when there is one.
    after: Option<Vec<u8>>,
}

fn term(s: &str) -> Result<Term, String> {
    let letters = |t: &str| -> Result<Vec<u8>, String> {
        t.bytes()
            .map(
                |c| if c.is_ascii_alphabetic() { Ok(c) } else { Err(format!("'{}' is not an axis letter", c as char)) },
            )
            .collect()
    };
    match s.find("...") {
        Some(at) => {
            let (a, b) = (&s[..at], &s[at + 3..]);
            if b.contains("...") {
                return Err(format!("'{s}' has more than one ellipsis"));
            }
            Ok(Term { before: letters(a)?, after: Some(letters(b)?) })
        }
        None => Ok(Term { before: letters(s)?, after: None }),
    }
}

impl Term {
    fn letters(&self) -> usize {
        self.before.len() + self.after.as_ref().map_or(0, Vec::len)
    }
    /// Labels for an operand of rank `rank` (the ellipsis takes the remaining axes).
    fn labels(&self, rank: usize, what: &str) -> Result<Vec<Label>, String> {
        let named = self.letters();
        match &self.after {
            None if rank != named => Err(format!("{what} has rank {rank} but the equation names {named} axes")),
            None => Ok(self.before.iter().map(|&c| Label::Letter(c)).collect()),
            Some(_) if rank < named => {
                Err(format!("{what} has rank {rank}, fewer than the {named} axes the equation names"))
            }
            Some(after) => {
                let e = rank - named;
                let mut v: Vec<Label> = self.before.iter().map(|&c| Label::Letter(c)).collect();
                v.extend((0..e).rev().map(Label::Ellipsis));
                v.extend(after.iter().map(|&c| Label::Letter(c)));
                Ok(v)
            }
        }
    }
}

impl Equation {
    /// Parses `equation` for operands of the given ranks.
    pub fn parse(equation: &str, ranks: &[usize]) -> Result<Equation, String> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq.as_str(), None),
        };
        let terms: Vec<Term> = lhs.split(',').map(term).collect::<Result<_, _>>()?;
        if terms.len() != ranks.len() {
            return Err(format!(
                "the equation '{equation}' names {} operands, the node has {}",
                terms.len(),
                ranks.len()
            ));
        }
        if !(1..=2).contains(&terms.len()) {
            return Err(format!("'{equation}': Einsum takes one or two operands"));
        }
        let inputs: Vec<Vec<Label>> = terms
            .iter()
            .zip(ranks)
            .enumerate()
            .map(|(k, (t, &r))| t.labels(r, &format!("operand {k}")))
            .collect::<Result<_, _>>()?;
        let ellipsis =
            inputs.iter().flatten().filter_map(|l| if let Label::Ellipsis(j) = l { Some(j + 1) } else { None });
        let ellipsis = ellipsis.max().unwrap_or(0);
        let output = match rhs {
            Some(r) => {
                let t = term(r)?;
                if t.after.is_none() && ellipsis > 0 && terms.iter().any(|t| t.after.is_some()) {
                    // TensorFlow requires the output to keep broadcast axes.
                    return Err(format!("'{equation}': the output must contain '...' when an operand does"));
                }
                let out = t.labels(t.letters() + if t.after.is_some() { ellipsis } else { 0 }, "the output")?;
                for l in &out {
                    if !inputs.iter().flatten().any(|x| x == l) {
                        return Err(format!("'{equation}': output axis {l:?} appears in no operand"));
                    }
                }
                out
            }
            None => {
                let mut out: Vec<Label> = (0..ellipsis).rev().map(Label::Ellipsis).collect();
                let mut once: Vec<u8> = Vec::new();
                for l in inputs.iter().flatten() {
                    if let Label::Letter(c) = l {
                        if inputs.iter().flatten().filter(|x| *x == l).count() == 1 {
                            once.push(*c);
                        }
                    }
                }
                once.sort_unstable();
                out.extend(once.into_iter().map(Label::Letter));
                out
            }
        };
        Ok(Equation { inputs, output })
    }

    /// The size of every label from the operands' dimensions (`None`: unknown), with
    /// NumPy broadcasting of size-1 ellipsis axes; an error for two different sizes.
    pub fn sizes(&self, dims: &[&[Option<i64>]]) -> Result<Vec<(Label, Option<i64>)>, String> {
        let mut sizes: Vec<(Label, Option<i64>)> = Vec::new();
        for (k, (labels, ds)) in self.inputs.iter().zip(dims).enumerate() {
            for (&l, &d) in labels.iter().zip(ds.iter()) {
                match sizes.iter_mut().find(|(x, _)| *x == l) {
                    None => sizes.push((l, d)),
                    Some((_, have)) => match (*have, d) {
                        (Some(a), Some(b)) if a == b => {}
                        (Some(1), Some(b)) if matches!(l, Label::Ellipsis(_)) => *have = Some(b),
                        (Some(_), Some(1)) if matches!(l, Label::Ellipsis(_)) => {}
                        (Some(a), Some(b)) => {
                            return Err(format!(
                                "axis {} has size {a} in one operand and {b} in operand {k}",
                                match l {
                                    Label::Letter(c) => format!("'{}'", c as char),
                                    Label::Ellipsis(_) => "of '...'".into(),
                                }
                            ))
                        }
                        (None, Some(b)) if !matches!(l, Label::Ellipsis(_)) || b != 1 => *have = Some(b),
                        _ => {}
                    },
                }
            }
        }
        Ok(sizes)
    }

    /// Whether a label repeats within an operand or within the output (a diagonal).
    pub fn has_diagonals(&self) -> bool {
        self.inputs.iter().chain(std::iter::once(&self.output)).any(|ls| distinct(ls).len() < ls.len())
    }

    /// The output dimensions given the label sizes from [`Equation::sizes`].
    pub fn output_dims(&self, sizes: &[(Label, Option<i64>)]) -> Vec<Option<i64>> {
        self.output.iter().map(|l| sizes.iter().find(|(x, _)| x == l).and_then(|(_, d)| *d)).collect()
    }
}

/// `labels` without repeats, in order of first appearance.
pub fn distinct(labels: &[Label]) -> Vec<Label> {
    let mut v: Vec<Label> = Vec::with_capacity(labels.len());
    for &l in labels {
        if !v.contains(&l) {
            v.push(l);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::Label::{Ellipsis as E, Letter as L};
    use super::*;

    #[test]
    fn explicit_and_implicit_forms() {
        let e = Equation::parse("ij,jk->ik", &[2, 2]).unwrap();
        assert_eq!(e.inputs, vec![vec![L(b'i'), L(b'j')], vec![L(b'j'), L(b'k')]]);
        assert_eq!(e.output, vec![L(b'i'), L(b'k')]);
        // Implicit: letters used once, alphabetically.
        let e = Equation::parse("ba,ac", &[2, 2]).unwrap();
        assert_eq!(e.output, vec![L(b'b'), L(b'c')]);
        let e = Equation::parse("ij->", &[2]).unwrap();
        assert!(e.output.is_empty());
    }

    #[test]
    fn ellipsis_takes_the_remaining_axes_and_broadcasts() {
        let e = Equation::parse("...ij,...jk->...ik", &[4, 3]).unwrap();
        assert_eq!(e.inputs[0], vec![E(1), E(0), L(b'i'), L(b'j')]);
        assert_eq!(e.inputs[1], vec![E(0), L(b'j'), L(b'k')]);
        assert_eq!(e.output, vec![E(1), E(0), L(b'i'), L(b'k')]);
        let a = [Some(2), Some(1), Some(3), Some(4)];
        let b = [Some(5), Some(4), Some(6)];
        let s = e.sizes(&[&a, &b]).unwrap();
        assert_eq!(e.output_dims(&s), vec![Some(2), Some(5), Some(3), Some(6)]);
    }

    #[test]
    fn bad_equations_say_why() {
        assert!(Equation::parse("ij,jk->ik", &[2]).unwrap_err().contains("names 2 operands"));
        assert!(Equation::parse("ij->i", &[3]).unwrap_err().contains("rank 3"));
        // Repeated labels parse (diagonals), and the shape function checks their sizes agree.
        let d = Equation::parse("ii->i", &[2]).unwrap();
        assert!(d.has_diagonals() && !Equation::parse("ij->i", &[2]).unwrap().has_diagonals());
        assert!(Equation::parse("ib->bii", &[2]).unwrap().has_diagonals());
        assert!(d.sizes(&[&[Some(2), Some(3)]]).unwrap_err().contains("'i' has size 2"));
        assert!(Equation::parse("ij->ik", &[2]).unwrap_err().contains("appears in no operand"));
        assert!(Equation::parse("i1->i", &[2]).unwrap_err().contains("not an axis letter"));
        let e = Equation::parse("ij,jk->ik", &[2, 2]).unwrap();
        let err = e.sizes(&[&[Some(2), Some(3)], &[Some(4), Some(5)]]).unwrap_err();
        assert!(err.contains("'j' has size 3"), "{err}");
    }
}
