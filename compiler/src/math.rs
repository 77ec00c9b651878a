//! exp, log, tanh, sigmoid and pow for float32 as inline Cranelift IR, for scalars (`f32`)
//! and vectors (`f32x4`) alike — no libm calls in the generated loops.
//!
//! - `exp`: n = round(x·log2 e) (by adding 1.5·2^23), Cody–Waite reduction r = x − n·ln2
//!   with ln2 split into an exactly-representable high part (so n·ln2_hi is exact) and a
//!   low correction, a degree-6 minimax polynomial for e^r on |r| ≤ ln2/2 (fitted for this
//!   crate; relative error 1.8e-8), and 2^n applied by adding n to the exponent field (two
//!   integer ops instead of building 2^n and multiplying). Then +inf above ln(f32::MAX),
//!   0 below the smallest normal result — subnormal results flush to zero, as under the
//!   FTZ mode TensorFlow's and XLA's CPU code run in — and NaN passes through. Measured
//!   worst error over the whole range: 1 ulp.
//! - `log`: subnormals are pre-scaled by 2^23; x = m·2^e with m ∈ [√½, √2), a degree-9
//!   polynomial in f = m − 1 (Cephes' `logf`), e·ln2 added in two parts; then log(0) = −inf,
//!   log(x<0) = NaN, log(+inf) = +inf, NaN stays NaN.
//! - `tanh`: a rational x·P(x²)/Q(x²) fitted for this crate (`compiler/tools/fit_tanh.py`)
//!   on x clamped to ±9.2, the result clamped to [−1, 1] (±inf → ±1, ±0 → ±0, NaN → NaN).
//!   Worst error 5 ulp, like TensorFlow's (6) and jax's (5) kernels; half the operations of
//!   the 1 − 2/(e^{2x} + 1) form this crate used before.
//! - `sigmoid`: with e = e^{−|x|}: 1/(1+e) for x ≥ 0, e/(1+e) otherwise (no cancellation;
//!   results below the normal range flush to zero). Worst error 3 ulp.
//! - `pow`: e^{y·ln|x|} in float64 (two halves of a vector widened, the result narrowed
//!   once), so it is correctly rounded but for about one result in a thousand, with
//!   TensorFlow's special cases (x^0 = 1, 1^y = 1, negative bases with integral exponents
//!   get the sign of (−1)^y, other negative bases NaN).
//!
//! Polynomials use fused multiply-adds (the host has FMA). Vector constants come from a
//! per-function table (`ConstPool`) loaded once before the loops, not from splats of
//! immediates inside them.
//!
//! Tests in `tests/math.rs` compare against Rust's `f32::exp/ln/tanh` over the whole range.

#![allow(clippy::excessive_precision)] // Cephes' published coefficients, kept as printed.

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{types, Block, Endianness, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;

/// e^r on |r| ≤ ln2/2, highest degree first (minimax, relative error 1.8e-8). Shared with
/// the tile routines (`tile_routines.rs`), which must compute bit for bit the same.
/// `log`'s polynomial in `f = m − 1` (Cephes' `logf`), highest degree first; the tile
/// routines evaluate the same.
pub(crate) const LOG_POLY: [f32; 9] = [
    7.037_683_6e-2,
    -1.151_461e-1,
    1.167_699_9e-1,
    -1.242_014_1e-1,
    1.424_932_3e-1,
    -1.666_805_8e-1,
    2.000_071_4e-1,
    -2.499_999_4e-1,
    3.333_333e-1,
];

pub(crate) const EXP_POLY: [f32; 7] =
    [0.001_384_360_5, 0.008_374_197, 0.041_668_005, 0.166_664_3, 0.499_999_94, 1.0, 1.0];

/// tanh(x) = x·P(x²)/Q(x²): P (degree 6 in x²) and Q (degree 3), highest degree first,
/// fitted by `compiler/tools/fit_tanh.py`. Shared with `tile_routines.rs`.
pub(crate) const TANH_P: [f32; 7] = [
    -9.174_849_465_234_947e-14,
    5.551_923_851_210_283e-11,
    -2.079_898_209_217_39e-8,
    1.129_583_870_351_780_2e-5,
    3.117_481_013_759_970_7e-3,
    1.309_612_244_367_599_5e-1,
    1.0,
];
pub(crate) const TANH_Q: [f32; 4] =
    [2.565_843_169_577_42e-4, 2.454_904_466_867_447e-2, 4.642_945_230_007_171_6e-1, 1.0];

/// The vector constants of one generated function, read through a pointer the caller
/// passes as the last entry of `ptrs`. Each use is a separate single-use load, which x64
/// folds into the consuming instruction as a memory operand: constants then cost neither
/// a register nor an instruction (a splat of an immediate costs one or three).
#[derive(Default)]
pub(crate) struct ConstPool {
    /// The table's address inside the function (loaded once in the entry block).
    pub base: Option<Value>,
    /// 16-byte entries, four copies of one 32-bit pattern each.
    pub entries: Vec<[u32; 4]>,
    /// When set, every constant is loaded once at the end of this block (the function's
    /// entry, before the loops) and reused.
    pub hoist_to: Option<Block>,
    pub hoisted: Vec<(([u32; 4], Type), Value)>,
}

impl ConstPool {
    /// Byte offset of the entry holding `lanes` (added on first use).
    fn offset(&mut self, lanes: [u32; 4]) -> i32 {
        let k = match self.entries.iter().position(|e| *e == lanes) {
            Some(k) => k,
            None => {
                self.entries.push(lanes);
                self.entries.len() - 1
            }
        };
        (k * 16) as i32
    }
}

/// Emits float32 math on `ty` (F32 or F32X4).
pub(crate) struct FMath<'a, 'b> {
    pub b: &'a mut FunctionBuilder<'b>,
    pub ty: Type,
    /// Where vector constants live (None: build them with splats).
    pub pool: Option<&'a mut ConstPool>,
}

impl FMath<'_, '_> {
    fn vector(&self) -> bool {
        self.ty.is_vector()
    }
    fn ity(&self) -> Type {
        if self.vector() {
            types::I32X4
        } else {
            types::I32
        }
    }
    /// A float constant of this type.
    pub fn c(&mut self, x: f32) -> Value {
        if self.vector() {
            return self.pooled(x.to_bits(), self.ty);
        }
        self.b.ins().f32const(x)
    }
    /// A vector with `bits` in every 32-bit lane, of vector type `vty`.
    pub fn pooled(&mut self, bits: u32, vty: Type) -> Value {
        self.pooled_lanes([bits; 4], vty)
    }
    /// A vector with `bits` in every 64-bit lane, of vector type `vty` (`F64X2`, `I64X2`).
    fn pooled64(&mut self, bits: u64, vty: Type) -> Value {
        let (lo, hi) = (bits as u32, (bits >> 32) as u32);
        self.pooled_lanes([lo, hi, lo, hi], vty)
    }
    /// A 16-byte vector of the four 32-bit `lanes` (little-endian), of vector type `vty`.
    fn pooled_lanes(&mut self, lanes: [u32; 4], vty: Type) -> Value {
        let bits = lanes;
        match self.pool.as_deref_mut() {
            Some(pool @ ConstPool { base: Some(_), .. }) => {
                let base = pool.base.expect("matched");
                if let Some(&(_, v)) = pool.hoisted.iter().find(|(k, _)| *k == (bits, vty)) {
                    return v;
                }
                let off = pool.offset(bits);
                let flags = MemFlagsData::trusted().with_readonly();
                match pool.hoist_to {
                    Some(entry) if self.b.current_block() != Some(entry) => {
                        let term = self.b.func.layout.last_inst(entry).expect("the entry block jumps to the loops");
                        let mut pos = FuncCursor::new(self.b.func).at_inst(term);
                        let v = pos.ins().load(vty, flags, base, off);
                        pool.hoisted.push(((bits, vty), v));
                        v
                    }
                    Some(_) => {
                        let v = self.b.ins().load(vty, flags, base, off);
                        pool.hoisted.push(((bits, vty), v));
                        v
                    }
                    None => self.b.ins().load(vty, flags, base, off),
                }
            }
            _ if lanes[0] != lanes[1] => {
                let wide = u64::from(lanes[0]) | (u64::from(lanes[1]) << 32);
                let s = self.b.ins().iconst(types::I64, wide as i64);
                let v = self.b.ins().splat(types::I64X2, s);
                if vty == types::I64X2 {
                    v
                } else {
                    self.b.ins().bitcast(vty, MemFlagsData::new().with_endianness(Endianness::Little), v)
                }
            }
            _ => {
                let s = self.b.ins().iconst(types::I32, i64::from(lanes[0] as i32));
                let v = self.b.ins().splat(types::I32X4, s);
                if vty == types::I32X4 {
                    v
                } else {
                    self.b.ins().bitcast(vty, MemFlagsData::new().with_endianness(Endianness::Little), v)
                }
            }
        }
    }
    /// An int32 constant of the matching integer type.
    fn ci(&mut self, x: i32) -> Value {
        if self.vector() {
            return self.pooled(x as u32, types::I32X4);
        }
        self.b.ins().iconst(types::I32, x as i64)
    }
    /// `|x|` by clearing the sign bit.
    pub fn abs(&mut self, x: Value) -> Value {
        if !self.vector() {
            return self.b.ins().fabs(x);
        }
        let m = self.pooled(0x7fff_ffff, self.ty);
        self.b.ins().band(x, m)
    }
    /// `-x` by flipping the sign bit.
    pub fn neg(&mut self, x: Value) -> Value {
        if !self.vector() {
            return self.b.ins().fneg(x);
        }
        let m = self.pooled(0x8000_0000, self.ty);
        self.b.ins().bxor(x, m)
    }
    fn int_bits_of(&mut self, x: Value) -> Value {
        let ity = self.ity();
        self.b.ins().bitcast(ity, MemFlagsData::new(), x)
    }
    fn float_of_bits(&mut self, x: Value) -> Value {
        let ty = self.ty;
        self.b.ins().bitcast(ty, MemFlagsData::new(), x)
    }
    /// `cond ? a : b` where `cond` is an fcmp result of this type's shape.
    pub fn sel(&mut self, cond: Value, a: Value, b: Value) -> Value {
        if self.vector() {
            let m = self.b.ins().bitcast(self.ty, MemFlagsData::new(), cond);
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(cond, a, b)
        }
    }
    fn mul(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fmul(a, b)
    }
    fn add(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fadd(a, b)
    }
    fn sub(&mut self, a: Value, b: Value) -> Value {
        self.b.ins().fsub(a, b)
    }
    /// `p(x)` by Horner (fused multiply-adds) with coefficients from the highest degree down.
    fn horner(&mut self, x: Value, coeffs: &[f32]) -> Value {
        let mut p = self.c(coeffs[0]);
        for &k in &coeffs[1..] {
            let kc = self.c(k);
            p = self.b.ins().fma(p, x, kc);
        }
        p
    }
    /// `min(x, c)` for a constant c, NaN passing through: `c < x ? c : x`, the shape x64
    /// lowers to one `minps` (a NaN x fails the compare and is returned).
    pub fn min_const(&mut self, x: Value, c: f32) -> Value {
        let c = self.c(c);
        let lt = self.b.ins().fcmp(FloatCC::LessThan, c, x);
        self.sel(lt, c, x)
    }
    /// NaN-propagating `max(a, b)`: `b < a ? a : b` is one maxps (a NaN b is returned),
    /// then a NaN `a` is passed through with one compare and blend.
    pub fn max_nan(&mut self, a: Value, b: Value) -> Value {
        let lt = self.b.ins().fcmp(FloatCC::LessThan, b, a);
        let m = self.sel(lt, a, b);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, a, a);
        self.sel(nan, a, m)
    }
    /// NaN-propagating `min(a, b)`: `a < b ? a : b` (one minps), then a NaN `a` passed through.
    pub fn min_nan(&mut self, a: Value, b: Value) -> Value {
        let lt = self.b.ins().fcmp(FloatCC::LessThan, a, b);
        let m = self.sel(lt, a, b);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, a, a);
        self.sel(nan, a, m)
    }
    /// `max(x, c)` for a constant c, NaN passing through: `x < c ? c : x` (one `maxps`).
    pub fn max_const(&mut self, x: Value, c: f32) -> Value {
        let c = self.c(c);
        let lt = self.b.ins().fcmp(FloatCC::LessThan, x, c);
        self.sel(lt, c, x)
    }
    /// `x` rounded to the nearest IEEE binary16 value (ties to even), kept as float32 — bit
    /// for bit `f16_to_f32(f32_to_f16(x))` (`autoclust_graph::half`) but for a NaN's payload.
    /// On |x|'s bits: normal results round at bit 13 (add `0xfff` plus the kept last bit,
    /// clear the 13 bits; a carry moves into the exponent), results from 65520 on are
    /// infinite, and below 2^-14 (binary16 subnormals) `(|x| + 0.5) − 0.5` rounds to a
    /// multiple of 2^-24, the ulp of 0.5; then x's sign is put back.
    pub fn round_f16(&mut self, x: Value) -> Value {
        let ax = self.abs(x);
        let bits = self.int_bits_of(ax);
        let last = self.b.ins().ushr_imm_u(bits, 13);
        let one = self.ci(1);
        let last = self.b.ins().band(last, one);
        let bias = self.ci(0xfff);
        let step = self.b.ins().iadd(last, bias);
        let r = self.b.ins().iadd(bits, step);
        let keep = self.ci(!0x1fff);
        let r = self.b.ins().band(r, keep);
        let normal = self.float_of_bits(r);
        let limit = self.c(65536.0);
        let over = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, normal, limit);
        let inf = self.c(f32::INFINITY);
        let normal = self.sel(over, inf, normal);
        let half = self.c(0.5);
        let t = self.add(ax, half);
        let half = self.c(0.5);
        let sub = self.sub(t, half);
        let min_normal = self.c(1.0 / 16384.0);
        let tiny = self.b.ins().fcmp(FloatCC::LessThan, ax, min_normal);
        let m = self.sel(tiny, sub, normal);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let m = self.sel(nan, ax, m);
        let mb = self.int_bits_of(m);
        let xb = self.int_bits_of(x);
        let sign = self.ci(i32::MIN);
        let sb = self.b.ins().band(xb, sign);
        let r = self.b.ins().bor(mb, sb);
        self.float_of_bits(r)
    }

    /// `x` rounded to the nearest bfloat16 value (ties to even), kept as float32: the bits
    /// plus `0x7fff` plus the kept last bit, low 16 bits cleared (a carry moves into the
    /// exponent, up to infinity); a NaN passes through.
    pub fn round_bf16(&mut self, x: Value) -> Value {
        let bits = self.int_bits_of(x);
        let last = self.b.ins().ushr_imm_u(bits, 16);
        let one = self.ci(1);
        let last = self.b.ins().band(last, one);
        let bias = self.ci(0x7fff);
        let step = self.b.ins().iadd(last, bias);
        let r = self.b.ins().iadd(bits, step);
        let keep = self.ci(!0xffff);
        let r = self.b.ins().band(r, keep);
        let rounded = self.float_of_bits(r);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.sel(nan, x, rounded)
    }

    /// e^x for `x` in [−87.3365, 88.7229] (where the result is normal): n = round(x·log2 e)
    /// with the 1.5·2^23 trick (after adding the magic number the float's low mantissa bits
    /// hold n, so n as a float is t − magic and `bits(t) << 23` is n << 23 modulo 2^32 —
    /// the magic's own bits shift out), r = x − n·ln2, a minimax polynomial for e^r on
    /// |r| ≤ ln2/2, and `bits(p) + (n << 23)`: an integer add on the exponent field
    /// instead of multiplying by 2^n, exact while the result stays normal.
    fn exp_core(&mut self, x: Value) -> Value {
        let log2e = self.c(std::f32::consts::LOG2_E);
        let magic = self.c(12_582_912.0);
        let t = self.b.ins().fma(x, log2e, magic);
        let magic = self.c(12_582_912.0);
        let n = self.sub(t, magic);
        // Cody–Waite with an exact high part of ln2; degree-6 polynomial (relative 1.8e-8).
        let mln2_hi = self.c(-0.693_359_4);
        let r = self.b.ins().fma(n, mln2_hi, x);
        let mln2_lo = self.c(2.121_944_4e-4);
        let r = self.b.ins().fma(n, mln2_lo, r);
        let p = self.horner(r, &EXP_POLY);
        let tb = self.int_bits_of(t);
        let scale = self.b.ins().ishl_imm_u(tb, 23);
        let pb = self.int_bits_of(p);
        let rb = self.b.ins().iadd(pb, scale);
        self.float_of_bits(rb)
    }

    /// e^x: the core, then +inf above ln(f32::MAX), 0 below the smallest normal result
    /// (flushing subnormal results to zero, as TensorFlow's and XLA's CPU code run with
    /// FTZ), NaN passed through. No input clamps: outside the core's range its result is
    /// garbage that the selects discard.
    pub fn exp(&mut self, x: Value) -> Value {
        let e = self.exp_core(x);
        let hi = self.c(88.722_83);
        let big = self.b.ins().fcmp(FloatCC::GreaterThan, x, hi);
        let inf = self.c(f32::INFINITY);
        let e = self.sel(big, inf, e);
        let lo = self.c(-87.336_5);
        let ok = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, lo);
        // `ok` is false for NaN too; NaN is restored below.
        let zero = self.c(0.0);
        let e = self.sel(ok, e, zero);
        let uno = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.sel(uno, x, e)
    }

    pub fn log(&mut self, x: Value) -> Value {
        let min_normal = self.c(f32::MIN_POSITIVE);
        let small = self.b.ins().fcmp(FloatCC::LessThan, x, min_normal);
        let scale = self.c(8_388_608.0); // 2^23
        let xs = self.mul(x, scale);
        let xs = self.sel(small, xs, x);
        let m23 = self.c(-23.0);
        let zero = self.c(0.0);
        let eadj = self.sel(small, m23, zero);
        let bits = self.int_bits_of(xs);
        let e = self.b.ins().ushr_imm_u(bits, 23);
        let ff = self.ci(0xff);
        let e = self.b.ins().band(e, ff);
        let bias = self.ci(127);
        let e = self.b.ins().isub(e, bias);
        let mant_mask = self.ci(0x007f_ffff);
        let mb = self.b.ins().band(bits, mant_mask);
        let one_bits = self.ci(0x3f80_0000);
        let mb = self.b.ins().bor(mb, one_bits);
        let m = self.float_of_bits(mb);
        let ty = self.ty;
        let ef = self.b.ins().fcvt_from_sint(ty, e);
        let ef = self.add(ef, eadj);
        let sqrt2 = self.c(std::f32::consts::SQRT_2);
        let big = self.b.ins().fcmp(FloatCC::GreaterThan, m, sqrt2);
        let half = self.c(0.5);
        let mh = self.mul(m, half);
        let m = self.sel(big, mh, m);
        let one = self.c(1.0);
        let ef1 = self.add(ef, one);
        let ef = self.sel(big, ef1, ef);
        let f = self.sub(m, one);
        let z = self.mul(f, f);
        let p = self.horner(f, &LOG_POLY);
        let y = self.mul(f, z);
        let y = self.mul(y, p);
        let c2 = self.c(-2.121_944_4e-4);
        let t = self.mul(ef, c2);
        let y = self.add(y, t);
        let mhalf = self.c(-0.5);
        let t = self.mul(z, mhalf);
        let y = self.add(y, t);
        let r = self.add(f, y);
        let c1 = self.c(0.693_359_4);
        let t = self.mul(ef, c1);
        let r = self.add(r, t);
        // Special values.
        let inf = self.c(f32::INFINITY);
        let is_inf = self.b.ins().fcmp(FloatCC::Equal, x, inf);
        let r = self.sel(is_inf, inf, r);
        let ninf = self.c(f32::NEG_INFINITY);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let r = self.sel(is_zero, ninf, r);
        let nan = self.c(f32::NAN);
        let neg = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
        let r = self.sel(neg, nan, r);
        let uno = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.sel(uno, x, r)
    }

    /// tanh(x) = x·P(x²)/Q(x²) on x clamped to ±9.2, then clamped to [−1, 1]: 16 vector
    /// operations, one of them a division. P (degree 6 in x²) and Q (degree 3, Q(0) = 1) were
    /// fitted for this crate on [0, 7.9] by `compiler/tools/fit_tanh.py` (minimax relative
    /// error by differential correction, coefficients rounded to float32 one at a time with
    /// the others refitted); beyond 7.9 the ratio still tracks tanh, reaching 1 near 8.4, so
    /// the input clamp at 9.2 and the output clamp give exactly ±1 where tanh rounds to ±1.
    /// Worst error 5 ulp (measured over every float in [0.5, 10], both signs) — TensorFlow's
    /// own kernel is within 6 ulp, jax.jit's within 5. The ratio is odd, so ±0 → ±0; NaN
    /// passes the clamps and the arithmetic.
    pub fn tanh(&mut self, x: Value) -> Value {
        let xc = self.min_const(x, 9.2);
        let xc = self.max_const(xc, -9.2);
        let z = self.mul(xc, xc);
        let p = self.horner(z, &TANH_P);
        let q = self.horner(z, &TANH_Q);
        let num = self.mul(xc, p);
        let r = self.b.ins().fdiv(num, q);
        let r = self.min_const(r, 1.0);
        self.max_const(r, -1.0)
    }

    pub fn sigmoid(&mut self, x: Value) -> Value {
        // e = e^{−|x|} ∈ (0, 1]: only the lower range check and NaN matter.
        let ax = self.abs(x);
        let nax = self.neg(ax);
        let e = self.exp(nax);
        let one = self.c(1.0);
        let d = self.add(one, e);
        let one = self.c(1.0);
        let pos = self.b.ins().fdiv(one, d);
        let neg = self.mul(e, pos);
        let zero = self.c(0.0);
        let nonneg = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, zero);
        self.sel(nonneg, pos, neg)
    }

    /// x^y, correctly rounded but for about one result in a thousand (then 1 ulp off), as
    /// TensorFlow's `std::pow` gives it: |x|^y = e^{y·ln|x|} evaluated in float64
    /// ([`FMath::pow_abs_f64`]), so neither the product y·ln|x| (whose float32 rounding alone
    /// costs up to |y·ln|x|| ulps, ~90 near overflow) nor the polynomials lose the result's
    /// bits; then TensorFlow's special cases: x^0 = 1, 1^y = 1, (−1)^±inf = 1, a negative base
    /// with an integral exponent (−0 included) gets the sign of (−1)^y, −inf and −0 with any
    /// other |x|^y, any other negative base NaN, and results
    /// below the normal range flush to zero like `exp`'s.
    pub fn pow(&mut self, x: Value, y: Value) -> Value {
        let ax = self.b.ins().fabs(x);
        let r = if self.vector() {
            // Two float64 halves: lanes 0–1, then lanes 2–3 moved down.
            let lo_x = self.b.ins().fvpromote_low(ax);
            let lo_y = self.b.ins().fvpromote_low(y);
            let hi_x = self.upper_half(ax);
            let hi_x = self.b.ins().fvpromote_low(hi_x);
            let hi_y = self.upper_half(y);
            let hi_y = self.b.ins().fvpromote_low(hi_y);
            let lo = self.pow_abs_f64(lo_x, lo_y);
            let hi = self.pow_abs_f64(hi_x, hi_y);
            let lo = self.b.ins().fvdemote(lo);
            let hi = self.b.ins().fvdemote(hi);
            // [lo0, lo1, hi0, hi1]: bytes 0–7 of `lo`, then bytes 0–7 of `hi` (16–23).
            let mask: Vec<u8> = (0..8).chain(16..24).collect();
            self.shuffle_bytes(lo, hi, &mask)
        } else {
            let xd = self.b.ins().fpromote(types::F64, ax);
            let yd = self.b.ins().fpromote(types::F64, y);
            let r = self.pow_abs_f64(xd, yd);
            self.b.ins().fdemote(types::F32, r)
        };
        // Results below the smallest normal float flush to zero (r ≥ 0 or NaN here).
        let min_normal = self.c(f32::MIN_POSITIVE);
        let tiny = self.b.ins().fcmp(FloatCC::LessThan, r, min_normal);
        let zero = self.c(0.0);
        let r = self.sel(tiny, zero, r);
        // Negative base: integral y gives (−1)^y · |x|^y, otherwise NaN.
        let yt = self.b.ins().trunc(y);
        let integral = self.b.ins().fcmp(FloatCC::Equal, yt, y);
        let half = self.c(0.5);
        let yh = self.mul(y, half);
        let yht = self.b.ins().trunc(yh);
        let even = self.b.ins().fcmp(FloatCC::Equal, yht, yh);
        let nr = self.b.ins().fneg(r);
        let signed = self.sel(even, r, nr);
        // −inf and −0 to a non-integral power are +inf or +0 (|x|^y), as C's pow gives them.
        let nan = self.c(f32::NAN);
        let inf = self.c(f32::INFINITY);
        let x_inf = self.b.ins().fcmp(FloatCC::Equal, ax, inf);
        let zero = self.c(0.0);
        let x_zero = self.b.ins().fcmp(FloatCC::Equal, ax, zero);
        let x_edge = self.b.ins().bor(x_inf, x_zero);
        let fractional = self.sel(x_edge, r, nan);
        let negval = self.sel(integral, signed, fractional);
        // The sign bit, −0 included (1/−0 = −inf): (−0)^−3 = −inf and (−0)^3 = −0.
        let below = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
        let one = self.c(1.0);
        let recip = self.b.ins().fdiv(one, x);
        let recip_neg = self.b.ins().fcmp(FloatCC::LessThan, recip, zero);
        let neg = self.b.ins().bor(below, recip_neg);
        let r = self.sel(neg, negval, r);
        let one = self.c(1.0);
        let y0 = self.b.ins().fcmp(FloatCC::Equal, y, zero);
        let r = self.sel(y0, one, r);
        // 1^y = 1 for every y, NaN included, and (−1)^±inf = 1.
        let x1 = self.b.ins().fcmp(FloatCC::Equal, x, one);
        let r = self.sel(x1, one, r);
        let ay = self.b.ins().fabs(y);
        let inf = self.c(f32::INFINITY);
        let y_inf = self.b.ins().fcmp(FloatCC::Equal, ay, inf);
        let one = self.c(1.0);
        let ax1 = self.b.ins().fcmp(FloatCC::Equal, ax, one);
        let m1_inf = self.b.ins().band(y_inf, ax1);
        self.sel(m1_inf, one, r)
    }

    /// Lanes 2–3 of a 4-lane float32 vector moved to lanes 0–1.
    fn upper_half(&mut self, v: Value) -> Value {
        let mask: Vec<u8> = (8..16).chain(8..16).collect();
        self.shuffle_bytes(v, v, &mask)
    }

    /// The bytes of `a` (indices 0–15) and `b` (16–31) picked by `mask`, as `a`'s type.
    fn shuffle_bytes(&mut self, a: Value, b: Value, mask: &[u8]) -> Value {
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        let ty = self.b.func.dfg.value_type(a);
        let ab = self.b.ins().bitcast(types::I8X16, flags, a);
        let bb = self.b.ins().bitcast(types::I8X16, flags, b);
        let imm = self.b.func.dfg.immediates.push(mask.to_vec().into());
        let r = self.b.ins().shuffle(ab, bb, imm);
        self.b.ins().bitcast(ty, flags, r)
    }

    /// A float64 constant of the type matching this float32 type (`F64`, or `F64X2`).
    fn cd(&mut self, x: f64) -> Value {
        if self.vector() {
            return self.pooled64(x.to_bits(), types::F64X2);
        }
        self.b.ins().f64const(x)
    }
    /// An int64 constant of the type matching this float32 type (`I64`, or `I64X2`).
    fn cdi(&mut self, x: i64) -> Value {
        if self.vector() {
            return self.pooled64(x as u64, types::I64X2);
        }
        self.b.ins().iconst(types::I64, x)
    }
    /// `cond ? a : b` for float64 values and an fcmp of them.
    fn seld(&mut self, cond: Value, a: Value, b: Value) -> Value {
        if self.vector() {
            let m = self.b.ins().bitcast(types::F64X2, MemFlagsData::new(), cond);
            self.b.ins().bitselect(m, a, b)
        } else {
            self.b.ins().select(cond, a, b)
        }
    }
    fn horner_f64(&mut self, x: Value, coeffs: &[f64]) -> Value {
        let mut p = self.cd(coeffs[0]);
        for &k in &coeffs[1..] {
            let kc = self.cd(k);
            p = self.b.ins().fma(p, x, kc);
        }
        p
    }

    /// |x|^y in float64 for `ax` = |x| and `y` widened from float32 (so `ax` is never a
    /// float64 subnormal): ln ax = e·ln2 + 2·atanh(s), s = (m − 1)/(m + 1) for ax = m·2^e,
    /// m ∈ [√½, √2) (|s| ≤ 0.172: the series to s^15 errs below 1e-12 relative); t = y·ln ax
    /// clamped to [−110, 100] (every float32 result, and NaN passes); e^t by Cody–Waite
    /// (fdlibm's ln2 split) and Taylor to degree 10 on |r| ≤ ln2/2 (2e-13), 2^n added to the
    /// exponent field. Relative error ~1e-10 before the final rounding to float32. ax = 0
    /// and +inf take ln = ∓inf, NaN stays NaN.
    fn pow_abs_f64(&mut self, ax: Value, y: Value) -> Value {
        let (fty, ity) = if self.vector() { (types::F64X2, types::I64X2) } else { (types::F64, types::I64) };
        let flags = MemFlagsData::new();
        // ---- ln ax
        let bits = self.b.ins().bitcast(ity, flags, ax);
        let biased = self.b.ins().ushr_imm_u(bits, 52);
        let mant_mask = self.cdi(0x000f_ffff_ffff_ffff);
        let mant = self.b.ins().band(bits, mant_mask);
        let one_bits = self.cdi(0x3ff0_0000_0000_0000);
        let mbits = self.b.ins().bor(mant, one_bits);
        let m = self.b.ins().bitcast(fty, flags, mbits);
        // The biased exponent as a float: 2^52 + e_biased, read as a double, minus 2^52 + 1023.
        let magic_bits = self.cdi(0x4330_0000_0000_0000);
        let eb = self.b.ins().iadd(biased, magic_bits);
        let ef = self.b.ins().bitcast(fty, flags, eb);
        let unbias = self.cd(4_503_599_627_370_496.0 + 1023.0);
        let ef = self.b.ins().fsub(ef, unbias);
        let sqrt2 = self.cd(std::f64::consts::SQRT_2);
        let big = self.b.ins().fcmp(FloatCC::GreaterThan, m, sqrt2);
        let halfd = self.cd(0.5);
        let mh = self.b.ins().fmul(m, halfd);
        let m = self.seld(big, mh, m);
        let oned = self.cd(1.0);
        let ef1 = self.b.ins().fadd(ef, oned);
        let ef = self.seld(big, ef1, ef);
        let oned = self.cd(1.0);
        let num = self.b.ins().fsub(m, oned);
        let oned = self.cd(1.0);
        let den = self.b.ins().fadd(m, oned);
        let sv = self.b.ins().fdiv(num, den);
        let z = self.b.ins().fmul(sv, sv);
        let series: [f64; 8] = [1.0 / 15.0, 1.0 / 13.0, 1.0 / 11.0, 1.0 / 9.0, 1.0 / 7.0, 1.0 / 5.0, 1.0 / 3.0, 1.0];
        let p = self.horner_f64(z, &series);
        let two_s = self.b.ins().fadd(sv, sv);
        let lnm = self.b.ins().fmul(two_s, p);
        let ln2 = self.cd(std::f64::consts::LN_2);
        let ln = self.b.ins().fma(ef, ln2, lnm);
        let zerod = self.cd(0.0);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, ax, zerod);
        let ninf = self.cd(f64::NEG_INFINITY);
        let ln = self.seld(is_zero, ninf, ln);
        let pinf = self.cd(f64::INFINITY);
        let is_inf = self.b.ins().fcmp(FloatCC::Equal, ax, pinf);
        let pinf = self.cd(f64::INFINITY);
        let ln = self.seld(is_inf, pinf, ln);
        let is_nan = self.b.ins().fcmp(FloatCC::Unordered, ax, ax);
        let ln = self.seld(is_nan, ax, ln);
        // ---- e^(y·ln), clamped where every float32 result is 0 or inf anyway.
        let t = self.b.ins().fmul(y, ln);
        let lo = self.cd(-110.0);
        let below = self.b.ins().fcmp(FloatCC::LessThan, t, lo);
        let t = self.seld(below, lo, t);
        let hi = self.cd(100.0);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, t, hi);
        let t = self.seld(above, hi, t);
        let log2e = self.cd(std::f64::consts::LOG2_E);
        let magic = self.cd(6_755_399_441_055_744.0); // 1.5·2^52: n in the low mantissa bits
        let k = self.b.ins().fma(t, log2e, magic);
        let magic = self.cd(6_755_399_441_055_744.0);
        let n = self.b.ins().fsub(k, magic);
        let mln2_hi = self.cd(-6.931_471_803_691_238_164_90e-1);
        let r = self.b.ins().fma(n, mln2_hi, t);
        let mln2_lo = self.cd(-1.908_214_929_270_587_700_02e-10);
        let r = self.b.ins().fma(n, mln2_lo, r);
        let taylor: [f64; 11] = [
            1.0 / 3_628_800.0,
            1.0 / 362_880.0,
            1.0 / 40_320.0,
            1.0 / 5_040.0,
            1.0 / 720.0,
            1.0 / 120.0,
            1.0 / 24.0,
            1.0 / 6.0,
            0.5,
            1.0,
            1.0,
        ];
        let p = self.horner_f64(r, &taylor);
        let kb = self.b.ins().bitcast(ity, flags, k);
        let scale = self.b.ins().ishl_imm_u(kb, 52);
        let pb = self.b.ins().bitcast(ity, flags, p);
        let rb = self.b.ins().iadd(pb, scale);
        self.b.ins().bitcast(fty, flags, rb)
    }

    /// erfc(x): with z = |x| and t = 1/(1 + z/2), t·e^{−z² + P(t)} (the Chebyshev fit of
    /// Numerical Recipes' `erfcc`, relative error below 1.2e-7 over the whole line, so the
    /// tail keeps its precision: no 1 − erf cancellation); 2 − that for x < 0. ±inf give 0
    /// and 2, NaN stays NaN.
    pub fn erfc(&mut self, x: Value) -> Value {
        let z = self.abs(x);
        let half = self.c(0.5);
        let one = self.c(1.0);
        let d = self.b.ins().fma(z, half, one);
        let one = self.c(1.0);
        let t = self.b.ins().fdiv(one, d);
        let p = self.horner(t, &ERFC_P);
        let nz = self.neg(z);
        let arg = self.b.ins().fma(nz, z, p);
        let e = self.exp(arg);
        let r = self.mul(t, e);
        let two = self.c(2.0);
        let flipped = self.sub(two, r);
        let zero = self.c(0.0);
        let neg = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
        let r = self.sel(neg, flipped, r);
        // NaN gives x itself: which NaN the products above pass on depends on the operand
        // order the instruction selector picks, which the tile routines cannot mirror.
        let uno = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.sel(uno, x, r)
    }

    /// erf(x) (`Erf`, exact GELU): the odd Taylor series x·(2/√π)·Σ (−x²)^k / (k!(2k+1)) to k = 5 below |x| = ½
    /// (truncation 3e-8 relative there), sign(x)·(1 − erfc(|x|)) above it (where
    /// erf ≥ 0.52, so the subtraction loses nothing).
    pub fn erf(&mut self, x: Value) -> Value {
        let z = self.mul(x, x);
        let p = self.horner(z, &ERF_TAYLOR);
        let small = self.mul(x, p);
        let ax = self.abs(x);
        let c = self.erfc(ax);
        let one = self.c(1.0);
        let big = self.sub(one, c);
        // Copy x's sign onto 1 − erfc(|x|) (NaN passes: erfc(NaN) is NaN).
        let sign = if self.vector() {
            let sign_mask = self.pooled(0x8000_0000, self.ty);
            self.b.ins().band(x, sign_mask)
        } else {
            let xb = self.int_bits_of(x);
            let m = self.ci(0x8000_0000u32 as i32);
            let sb = self.b.ins().band(xb, m);
            self.float_of_bits(sb)
        };
        let big = if self.vector() {
            self.b.ins().bor(big, sign)
        } else {
            let bb = self.int_bits_of(big);
            let sb = self.int_bits_of(sign);
            let r = self.b.ins().bor(bb, sb);
            self.float_of_bits(r)
        };
        let lim = self.c(0.5);
        let is_small = self.b.ins().fcmp(FloatCC::LessThan, ax, lim);
        let r = self.sel(is_small, small, big);
        // NaN gives x itself (as `erfc`).
        let uno = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        self.sel(uno, x, r)
    }

    /// log(1 + x) without losing x's low bits: with u = 1 + x (rounded),
    /// log(u)·x/(u − 1) corrects the rounding of u exactly to first order (Goldberg's
    /// method); u = 1 gives x itself, u = +inf gives +inf; −1 gives −inf, below −1 NaN.
    pub fn log1p(&mut self, x: Value) -> Value {
        let one = self.c(1.0);
        let u = self.add(one, x);
        let l = self.log(u);
        let one = self.c(1.0);
        let um1 = self.sub(u, one);
        let q = self.b.ins().fdiv(x, um1);
        let r = self.mul(l, q);
        let one = self.c(1.0);
        let exact = self.b.ins().fcmp(FloatCC::Equal, u, one);
        let r = self.sel(exact, x, r);
        let inf = self.c(f32::INFINITY);
        let top = self.b.ins().fcmp(FloatCC::Equal, u, inf);
        self.sel(top, u, r)
    }

    /// e^x − 1 without cancellation near 0 (Kahan's method): with u = e^x (rounded),
    /// (u − 1)·x / log(u) corrects u's rounding to first order; u = 1 gives x itself,
    /// u − 1 = −1 (x below about −17) gives −1, u = +inf gives +inf.
    pub fn expm1(&mut self, x: Value) -> Value {
        let u = self.exp(x);
        let one = self.c(1.0);
        let um1 = self.sub(u, one);
        let l = self.log(u);
        let q = self.b.ins().fdiv(x, l);
        let r = self.mul(um1, q);
        let one = self.c(1.0);
        let exact = self.b.ins().fcmp(FloatCC::Equal, u, one);
        let r = self.sel(exact, x, r);
        let mone = self.c(-1.0);
        let floor = self.b.ins().fcmp(FloatCC::Equal, um1, mone);
        let r = self.sel(floor, mone, r);
        let inf = self.c(f32::INFINITY);
        let top = self.b.ins().fcmp(FloatCC::Equal, u, inf);
        self.sel(top, u, r)
    }

    /// softplus(x) = log(1 + e^x) as TensorFlow computes it: x itself above
    /// −(log ε + 2) ≈ 13.94, e^x below log ε + 2 ≈ −13.94, log1p(e^x) between.
    pub fn softplus(&mut self, x: Value) -> Value {
        let e = self.exp(x);
        let mid = self.log1p(e);
        let hi = self.c(SOFTPLUS_THRESHOLD);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, hi);
        let r = self.sel(above, x, mid);
        let lo = self.c(-SOFTPLUS_THRESHOLD);
        let below = self.b.ins().fcmp(FloatCC::LessThan, x, lo);
        self.sel(below, e, r)
    }

    /// sin(x) (`cosine` false) or cos(x): j = round(x·2/π) by the 1.5·2^23 trick (the
    /// float's low mantissa bits then hold j mod 2^22), r = x − j·π/2 by four fused
    /// multiply-adds with π/2 split in four (Cody–Waite; each product exact inside the
    /// FMA), Cephes' `sinf`/`cosf` polynomials on |r| ≤ π/4, and the quadrant j mod 4 (plus
    /// one for the cosine) picking the polynomial (odd: the other one) and the sign (bit 1).
    /// Accurate (see `tests/math.rs` for the measured ulps) for |x| below 2^17; past that
    /// the reduction loses bits, and from 2^22 (where j no longer fits the trick) the result
    /// is only some value in [−1, 1] — unlike TensorFlow's Eigen kernel, which reduces
    /// exactly there; the angles and positions models feed sin and cos are far smaller.
    /// ±inf and NaN give NaN; sin(±0) = ±0.
    pub fn sin_cos(&mut self, x: Value, cosine: bool) -> Value {
        let two_over_pi = self.c(std::f32::consts::FRAC_2_PI);
        let magic = self.c(12_582_912.0);
        let t = self.b.ins().fma(x, two_over_pi, magic);
        let magic = self.c(12_582_912.0);
        let j = self.sub(t, magic);
        let mut r = x;
        for part in SIN_PIO2 {
            let c = self.c(-part);
            r = self.b.ins().fma(j, c, r);
        }
        let z = self.mul(r, r);
        // sin r = r + r·z·S(z); cos r = 1 − z/2 + z²·C(z).
        let ps = self.horner(z, &SIN_POLY);
        let rz = self.mul(r, z);
        let sin_r = self.b.ins().fma(rz, ps, r);
        let pc = self.horner(z, &COS_POLY);
        let zz = self.mul(z, z);
        let mhalf = self.c(-0.5);
        let one = self.c(1.0);
        let c0 = self.b.ins().fma(z, mhalf, one);
        let cos_r = self.b.ins().fma(zz, pc, c0);
        let tb = self.int_bits_of(t);
        let q = if cosine {
            let one = self.ci(1);
            self.b.ins().iadd(tb, one)
        } else {
            tb
        };
        let one = self.ci(1);
        let odd_bit = self.b.ins().band(q, one);
        let zero = self.ci(0);
        let odd = self.b.ins().icmp(cranelift_codegen::ir::condcodes::IntCC::NotEqual, odd_bit, zero);
        let v = self.sel(odd, cos_r, sin_r);
        let two = self.ci(2);
        let neg_bit = self.b.ins().band(q, two);
        let sign = self.b.ins().ishl_imm_u(neg_bit, 30);
        let vb = self.int_bits_of(v);
        let flipped = self.b.ins().bxor(vb, sign);
        let v = self.float_of_bits(flipped);
        // Past 2^22 the reduction means nothing: keep the result in [−1, 1] (NaN passing
        // through the clamps), and a NaN of a finite x (an overflowed reduction) at 0.
        let v = self.max_const(v, -1.0);
        let v = self.min_const(v, 1.0);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, v, v);
        let ax = self.abs(x);
        let inf = self.c(f32::INFINITY);
        let finite = self.b.ins().fcmp(FloatCC::LessThan, ax, inf);
        let lost = self.b.ins().band(nan, finite);
        let zero = self.c(0.0);
        let v = self.sel(lost, zero, v);
        if cosine {
            return v;
        }
        // sin(−0) = −0 (the polynomial's last addition rounds it to +0).
        let zero = self.c(0.0);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        self.sel(is_zero, x, v)
    }
}

/// π/2 in four float32 parts (Cody–Waite; halves of SLEEF's `PI_A…PI_D`), the first three
/// with trailing zero bits so the early steps of the reduction stay exact.
const SIN_PIO2: [f32; 4] =
    [1.570_312_5, 4.835_128_784_179_687_5e-4, 3.138_557_076_454_162_6e-7, 6.077_100_628_276_710_4e-11];

/// sin r = r + r³·S(r²) on |r| ≤ π/4, highest degree first (Cephes' `sinf`).
const SIN_POLY: [f32; 3] = [-1.951_529_589_1e-4, 8.332_160_873_6e-3, -1.666_665_461_1e-1];

/// cos r = 1 − r²/2 + r⁴·C(r²) on |r| ≤ π/4, highest degree first (Cephes' `cosf`).
const COS_POLY: [f32; 3] = [2.443_315_711_809_948e-5, -1.388_731_625_493_765e-3, 4.166_664_568_298_827e-2];

/// `−(log ε + 2)` for float32 (ε = 2^−23), TensorFlow's softplus cut-off.
pub(crate) const SOFTPLUS_THRESHOLD: f32 = 13.942_385;

/// P(t) of [`FMath::erfc`], highest degree first (Numerical Recipes' `erfcc` coefficients).
pub(crate) const ERFC_P: [f32; 10] = [
    0.170_872_77,
    -0.822_152_23,
    1.488_515_87,
    -1.135_203_98,
    0.278_868_07,
    -0.186_288_06,
    0.096_784_18,
    0.374_091_96,
    1.000_023_68,
    -1.265_512_23,
];

/// erf(x)/x as a polynomial in x², highest degree first: (2/√π)·(−1)^k/(k!(2k+1)), k = 5…0.
pub(crate) const ERF_TAYLOR: [f32; 6] = {
    use std::f32::consts::FRAC_2_SQRT_PI as C;
    [-C / 1320.0, C / 216.0, -C / 42.0, C / 10.0, -C / 3.0, C]
};
