//! Cranelift code generation: fused elementwise loop nests and GEMM calls.
//!
//! Every generated function has the signature `fn(ptrs: *const *mut u8, start: i64, end: i64)`:
//! `ptrs` lists the group's external inputs, then its outputs, then (fused loops only) the
//! loop's constant table (`ConstPool`); `[start, end)` is the range of
//! the outermost collapsed loop dimension this call covers (so the executor can split a loop
//! across threads). GEMM prologues ignore the range and call `autoclust_sgemm`, a Rust
//! wrapper around the host GEMM (`autoclust_numeric::gemm`) registered with the JIT as a symbol.

use std::cell::RefCell;
use std::path::Path;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, BlockArg, Endianness, FuncRef, InstBuilder, MemFlagsData, StackSlot, StackSlotData, StackSlotKind,
    Type, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};

use autoclust_graph::DType;

use crate::analyze::EwOp;
use crate::math::{ConstPool, FMath};
use crate::tile_routines::{self, TileTier, TILE};
use crate::CompileError;

/// The ABI of every generated function.
pub(crate) type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// An operand of a fused member.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Operand {
    /// The k-th external input.
    Input(usize),
    /// An earlier member's result.
    Member(usize),
    /// A compile-time scalar of this dtype (embedded as an immediate).
    Scalar(DType, f64),
}

/// One op in a fused group.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub op: EwOp,
    pub args: Vec<Operand>,
    pub dtype: DType,
}

/// A fused elementwise loop nest.
#[derive(Clone, Debug)]
pub(crate) struct FusedSpec {
    /// Collapsed loop dimensions (at least one).
    pub dims: Vec<usize>,
    /// External inputs: dtype and per-dimension element strides (0 = broadcast).
    pub inputs: Vec<(DType, Vec<isize>)>,
    pub members: Vec<Member>,
    /// Live outputs: member index (each written once, contiguously).
    pub outputs: Vec<usize>,
    /// f32x4 inner loop (all external values float32).
    pub vector: bool,
}

impl FusedSpec {
    /// A key equal for two specs exactly when they generate the same code (scalars by their
    /// bits), so a body's identical loops — an optimizer's update of each variable of one
    /// shape — are compiled once.
    pub fn code_key(&self) -> String {
        use std::fmt::Write;
        let mut k = format!("{:?}|{:?}|{:?}|{}", self.dims, self.inputs, self.outputs, self.vector);
        for m in &self.members {
            let _ = write!(k, "|{:?}:{}", m.op, m.dtype);
            for a in &m.args {
                let _ = match a {
                    Operand::Input(i) => write!(k, ",i{i}"),
                    Operand::Member(j) => write!(k, ",m{j}"),
                    Operand::Scalar(d, x) => write!(k, ",s{d}:{:x}", x.to_bits()),
                };
            }
        }
        k
    }
}

/// What [`CodeGen::fused`] defined.
#[derive(Clone)]
pub(crate) struct FusedCode {
    /// The function's index.
    pub func: usize,
    /// Its constant table, whose address the caller passes after the outputs in `ptrs`.
    pub consts: Vec<[u32; 4]>,
    /// The ops its tiles compute with the tile routines (empty: f32x4 code only).
    pub tile_ops: Vec<EwOp>,
    /// The tier of those routines.
    pub tile_tier: Option<TileTier>,
}

/// A GEMM: C[m,n] = op(A)·op(B) with the strides of the (possibly transposed) operands.
#[derive(Clone, Debug)]
pub(crate) struct GemmSpec {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a_strides: (isize, isize),
    pub b_strides: (isize, isize),
    /// Threads the product may be split over (see [`crate::gemm`]).
    pub threads: usize,
}

/// `C = A·B` for the JIT: a C-ABI wrapper around [`crate::gemm::gemm`] (matrixmultiply's
/// kernel, split over up to `threads` threads of the calling rayon pool).
///
/// # Safety
/// Pointers must address matrices of the given sizes and strides; `c` must be writable
/// and not alias `a` or `b`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn autoclust_sgemm(
    m: i64,
    k: i64,
    n: i64,
    a: *const f32,
    rsa: i64,
    csa: i64,
    b: *const f32,
    rsb: i64,
    csb: i64,
    c: *mut f32,
    threads: i64,
) {
    // SAFETY: the caller promises the sizes and strides describe valid buffers.
    unsafe {
        crate::gemm::gemm(
            m as usize,
            k as usize,
            n as usize,
            a,
            rsa as isize,
            csa as isize,
            b,
            rsb as isize,
            csb as isize,
            c,
            threads.max(1) as usize,
        )
    }
}

/// Owns the JIT code of one compiled function; frees it on drop.
pub(crate) struct JitCode {
    module: Option<JITModule>,
}

// SAFETY: after `finalize_definitions` the module's code is immutable and only executed;
// the module itself is never touched again until drop, which needs `&mut self`.
unsafe impl Send for JitCode {}
unsafe impl Sync for JitCode {}

impl Drop for JitCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: no function pointer from this module outlives the JitCode (they are
            // stored next to it in the same Program, which owns it).
            unsafe { m.free_memory() };
        }
    }
}

fn cg_err(e: impl std::fmt::Display) -> CompileError {
    CompileError::Codegen(e.to_string())
}

/// Builds the functions of one compiled body in a fresh JIT module.
pub(crate) struct CodeGen<'d> {
    module: JITModule,
    ctx: Context,
    fctx: FunctionBuilderContext,
    dump: Option<&'d Path>,
    prefix: String,
    funcs: Vec<FuncId>,
    sgemm: FuncId,
    /// The tile routines (`tile_routines.rs`) of the selected tier, if any.
    tile_routines: Vec<(EwOp, FuncId)>,
    tile_tier: Option<TileTier>,
}

impl<'d> CodeGen<'d> {
    /// `tier`: the tile routines fused loops may call (`tile_routines.rs`; `None`: f32x4
    /// code only). The caller picks it with [`TileTier::select`], so the host has it.
    /// `quick`: allocate registers in a single pass (small bodies; see below).
    pub fn new(
        prefix: &str,
        dump: Option<&'d Path>,
        tier: Option<TileTier>,
        quick: bool,
    ) -> Result<CodeGen<'d>, CompileError> {
        let mut flags = settings::builder();
        // Small bodies (see `plan::QUICK_REGALLOC_ELEMENTS`) take Cranelift's single-pass
        // register allocator: their loops run a few iterations, so the backtracking
        // allocator's better code cannot pay for its compile time — its share of a
        // 10^5-node graph's first clustered step (a thousand small clusters) was a fifth.
        // Values are the same either way (`tests/regalloc.rs`). `AUTOCLUST_REGALLOC=
        // backtracking|single_pass` forces one allocator (for A/B measurements).
        let quick = match std::env::var("AUTOCLUST_REGALLOC").as_deref() {
            Ok("single_pass") => true,
            Ok("backtracking") => false,
            _ => quick,
        };
        if quick {
            flags.set("regalloc_algorithm", "single_pass").map_err(cg_err)?;
        }
        flags.set("use_colocated_libcalls", "false").map_err(cg_err)?;
        flags.set("is_pic", "false").map_err(cg_err)?;
        // No e-graph optimisation: the generated loops are already in the shape we want
        // (constants are folded by the analysis, splats of constants become pool loads).
        // The e-graph's elaboration re-schedules the unrolled copies depth-first — one
        // whole 32-op chain after another — and shares every constant across them, which
        // spills; the interleaved order we emit is 2.5-3x faster on deep transcendental
        // chains (measured on chain_32), and compiles faster too.
        flags.set("opt_level", "none").map_err(cg_err)?;
        // Cranelift's IR verifier re-checks every function we generate: a tenth of the
        // compile time of a graph with a thousand small clusters. Debug builds (every
        // test) keep it; release builds trust the tested generator, as wasmtime does.
        if !cfg!(debug_assertions) {
            flags.set("enable_verifier", "false").map_err(cg_err)?;
        }
        let isa_builder = cranelift_native::builder().map_err(cg_err)?;
        let isa = isa_builder.finish(settings::Flags::new(flags)).map_err(cg_err)?;
        let mut jb = JITBuilder::with_isa(isa, default_libcall_names());
        jb.symbol("autoclust_sgemm", autoclust_sgemm as *const u8);
        if let Some(tier) = tier {
            for op in tile_routines::WIDE_OPS {
                jb.symbol(tile_routines::symbol(tier, op), tile_routines::address(tier, op));
            }
        }
        let mut module = JITModule::new(jb);
        let ptr = module.target_config().pointer_type();
        let mut sig = module.make_signature();
        for t in [
            types::I64,
            types::I64,
            types::I64,
            ptr,
            types::I64,
            types::I64,
            ptr,
            types::I64,
            types::I64,
            ptr,
            types::I64,
        ] {
            sig.params.push(AbiParam::new(t));
        }
        let sgemm = module.declare_function("autoclust_sgemm", Linkage::Import, &sig).map_err(cg_err)?;
        let mut tile_routines = Vec::new();
        if let Some(tier) = tier {
            let mut sig = module.make_signature();
            for t in [ptr, ptr, types::I64] {
                sig.params.push(AbiParam::new(t));
            }
            for op in tile_routines::WIDE_OPS {
                let id =
                    module.declare_function(tile_routines::symbol(tier, op), Linkage::Import, &sig).map_err(cg_err)?;
                tile_routines.push((op, id));
            }
        }
        let ctx = module.make_context();
        let prefix = file_stem(prefix);
        Ok(CodeGen {
            module,
            ctx,
            fctx: FunctionBuilderContext::new(),
            dump,
            prefix,
            funcs: Vec::new(),
            sgemm,
            tile_routines,
            tile_tier: tier,
        })
    }

    fn begin(&mut self) -> Result<(String, FuncId), CompileError> {
        let name = format!("{}_{}", self.prefix, self.funcs.len());
        let ptr = self.module.target_config().pointer_type();
        let mut sig = self.module.make_signature();
        sig.params.push(AbiParam::new(ptr));
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(types::I64));
        let id = self.module.declare_function(&name, Linkage::Local, &sig).map_err(cg_err)?;
        self.module.clear_context(&mut self.ctx);
        self.ctx.func.signature = sig;
        self.ctx.func.name = UserFuncName::user(0, id.as_u32());
        Ok((name, id))
    }

    fn end(&mut self, name: &str, id: FuncId) -> Result<usize, CompileError> {
        if let Some(dir) = self.dump {
            let text = self.ctx.func.display().to_string();
            std::fs::write(dir.join(format!("{name}.clif")), text)
                .map_err(|e| CompileError::Codegen(format!("writing {}: {e}", dir.join(name).display())))?;
        }
        self.ctx.set_disasm(self.dump.is_some());
        self.module.define_function(id, &mut self.ctx).map_err(|e| cg_err(format!("{e:?}")))?;
        if let (Some(dir), Some(code)) = (self.dump, self.ctx.compiled_code()) {
            if let Some(asm) = &code.vcode {
                std::fs::write(dir.join(format!("{name}.s")), asm)
                    .map_err(|e| CompileError::Codegen(format!("writing {}: {e}", dir.join(name).display())))?;
            }
        }
        self.funcs.push(id);
        Ok(self.funcs.len() - 1)
    }

    /// Defines a fused loop nest.
    pub fn fused(&mut self, spec: &FusedSpec) -> Result<FusedCode, CompileError> {
        let (name, id) = self.begin()?;
        let cfg = self.module.target_config();
        let tile_plan = if self.tile_routines.is_empty() { None } else { TilePlan::new(spec) };
        let mut tile_funcs = Vec::new();
        if let Some(tp) = &tile_plan {
            for (op, fid) in &self.tile_routines {
                if tp.calls(*op) {
                    tile_funcs.push((*op, self.module.declare_func_in_func(*fid, &mut self.ctx.func)));
                }
            }
        }
        let tile_ops = tile_plan.as_ref().map(|p| p.called.clone()).unwrap_or_default();
        let pool;
        {
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let p = b.block_params(entry).to_vec();
            let (ptrs, start, end) = (p[0], p[1], p[2]);
            let flags = MemFlagsData::new().with_notrap();
            let nin = spec.inputs.len();
            let nptr = nin + spec.outputs.len();
            let bases: Vec<Value> = (0..nptr).map(|i| b.ins().load(types::I64, flags, ptrs, (i * 8) as i32)).collect();
            let pool_base = b.ins().load(types::I64, flags, ptrs, (nptr * 8) as i32);
            // Constants are loaded once before the loops; the register allocator keeps the
            // hot ones in registers and reloads the rest from its spill slots.
            let hoist_to = Some(entry);
            let tiles = tile_plan.map(|plan| {
                let bytes = (plan.buffers * TILE * 4) as u32;
                let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 6));
                Tiles { plan, funcs: tile_funcs, slot }
            });
            let em = Emitter {
                spec,
                pool: RefCell::new(ConstPool { base: Some(pool_base), hoist_to, ..Default::default() }),
                tiles,
            };
            em.level(&mut b, &bases, 0, vec![None; nin], None, start, end);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(cfg);
            pool = em.pool.into_inner().entries;
        }
        let tile_tier = if tile_ops.is_empty() { None } else { self.tile_tier };
        Ok(FusedCode { func: self.end(&name, id)?, consts: pool, tile_ops, tile_tier })
    }

    /// Defines a GEMM call: `ptrs` = [A, B, C].
    pub fn gemm(&mut self, g: &GemmSpec) -> Result<usize, CompileError> {
        let (name, id) = self.begin()?;
        let callee = self.module.declare_func_in_func(self.sgemm, &mut self.ctx.func);
        let cfg = self.module.target_config();
        {
            let mut b = FunctionBuilder::new(&mut self.ctx.func, &mut self.fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let ptrs = b.block_params(entry)[0];
            let flags = MemFlagsData::new().with_notrap();
            let a = b.ins().load(types::I64, flags, ptrs, 0);
            let bb = b.ins().load(types::I64, flags, ptrs, 8);
            let c = b.ins().load(types::I64, flags, ptrs, 16);
            let mut args: Vec<Value> = Vec::with_capacity(11);
            for x in [g.m as i64, g.k as i64, g.n as i64] {
                args.push(b.ins().iconst(types::I64, x));
            }
            args.push(a);
            for x in [g.a_strides.0 as i64, g.a_strides.1 as i64] {
                args.push(b.ins().iconst(types::I64, x));
            }
            args.push(bb);
            for x in [g.b_strides.0 as i64, g.b_strides.1 as i64] {
                args.push(b.ins().iconst(types::I64, x));
            }
            args.push(c);
            args.push(b.ins().iconst(types::I64, g.threads as i64));
            b.ins().call(callee, &args);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(cfg);
        }
        self.end(&name, id)
    }

    /// Links everything and returns the code with one pointer per defined function.
    pub fn finish(mut self) -> Result<(JitCode, Vec<KernelFn>), CompileError> {
        self.module.finalize_definitions().map_err(cg_err)?;
        let fns = self
            .funcs
            .iter()
            .map(|&id| {
                let p = self.module.get_finalized_function(id);
                // SAFETY: every function was defined with the KernelFn signature.
                unsafe { std::mem::transmute::<*const u8, KernelFn>(p) }
            })
            .collect();
        Ok((JitCode { module: Some(self.module) }, fns))
    }
}

fn elem_size(d: DType) -> i64 {
    match d {
        DType::Float64 | DType::Int64 => 8,
        DType::Bool => 1,
        _ => 4,
    }
}

fn scalar_ty(d: DType) -> Type {
    match d {
        DType::Float32 => types::F32,
        DType::Float64 => types::F64,
        DType::Int32 => types::I32,
        DType::Int64 => types::I64,
        _ => types::I8,
    }
}

fn barg(v: Value) -> BlockArg {
    BlockArg::Value(v)
}

/// `for i in (lo..hi).step_by(step) while i + step <= hi { body(i) }`; returns the first
/// index not processed.
fn counted_loop(
    b: &mut FunctionBuilder<'_>,
    lo: Value,
    hi: Value,
    step: i64,
    mut body: impl FnMut(&mut FunctionBuilder<'_>, Value),
) -> Value {
    let header = b.create_block();
    b.append_block_param(header, types::I64);
    let body_blk = b.create_block();
    let exit = b.create_block();
    b.append_block_param(exit, types::I64);
    b.ins().jump(header, &[barg(lo)]);
    b.switch_to_block(header);
    let i = b.block_params(header)[0];
    let next = b.ins().iadd_imm_s(i, step);
    let ok = b.ins().icmp(IntCC::SignedLessThanOrEqual, next, hi);
    b.ins().brif(ok, body_blk, &[], exit, &[barg(i)]);
    b.switch_to_block(body_blk);
    body(b, i);
    b.ins().jump(header, &[barg(next)]);
    b.switch_to_block(exit);
    b.block_params(exit)[0]
}

struct Emitter<'s> {
    spec: &'s FusedSpec,
    pool: RefCell<ConstPool>,
    /// Set when the innermost loop runs in tiles calling the tile routines.
    tiles: Option<Tiles>,
}

/// Where a member's value lives for the rest of its tile.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Home {
    /// The k-th tile buffer of the function's stack slot.
    Buffer(usize),
    /// The j-th output row (the member is a live output).
    Output(usize),
    /// The k-th input's row: the member copies that input (a variable read, say), so
    /// later segments read the input again instead of a buffered copy of it.
    Input(usize),
}

/// One step of a tile.
#[derive(Debug)]
enum Segment {
    /// An f32x4 loop over the tile computing these members (in order); members of other
    /// segments they use are loaded from their homes, and members used later are stored.
    Loop(Vec<usize>),
    /// One tile-routine call computing this member from its operand's home (or input row)
    /// into its own home.
    Call(usize),
}

/// How one fused loop is cut into tiles: the members in order, split at every member with
/// a tile routine; values crossing a cut live in per-tile stack buffers (reused once dead)
/// or in the output rows they are written to anyway.
#[derive(Debug)]
struct TilePlan {
    segments: Vec<Segment>,
    home: Vec<Option<Home>>,
    buffers: usize,
    /// The ops whose routines the tiles call.
    called: Vec<EwOp>,
}

impl TilePlan {
    /// A plan when tiling pays: a vector loop whose rows hold at least one tile, with a
    /// member the tile routines compute.
    fn new(spec: &FusedSpec) -> Option<TilePlan> {
        if !spec.vector || *spec.dims.last()? < TILE {
            return None;
        }
        // A routine writes one home; a member written to two outputs keeps the plain loop.
        if spec.outputs.iter().enumerate().any(|(j, m)| spec.outputs[..j].contains(m)) {
            return None;
        }
        let n = spec.members.len();
        let routine = |m: &Member| {
            tile_routines::WIDE_OPS.contains(&m.op)
                && m.dtype == DType::Float32
                && match m.args[..] {
                    [Operand::Member(j)] => spec.members[j].dtype == DType::Float32,
                    [Operand::Input(k)] => {
                        let (dt, st) = &spec.inputs[k];
                        *dt == DType::Float32 && *st.last().expect("rank >= 1") != 0
                    }
                    _ => false,
                }
        };
        if !spec.members.iter().any(routine) {
            return None;
        }
        let mut segments: Vec<Segment> = Vec::new();
        let mut seg_of = vec![0usize; n];
        for (i, m) in spec.members.iter().enumerate() {
            if routine(m) {
                segments.push(Segment::Call(i));
            } else if let Some(Segment::Loop(ms)) = segments.last_mut() {
                ms.push(i);
            } else {
                segments.push(Segment::Loop(vec![i]));
            }
            seg_of[i] = segments.len() - 1;
        }
        // The last segment using each member (a routine's result always needs a home).
        let mut last_use: Vec<Option<usize>> = vec![None; n];
        for (i, m) in spec.members.iter().enumerate() {
            for a in &m.args {
                if let Operand::Member(j) = a {
                    if seg_of[*j] != seg_of[i] || matches!(segments[seg_of[i]], Segment::Call(_)) {
                        last_use[*j] = Some(last_use[*j].map_or(seg_of[i], |s: usize| s.max(seg_of[i])));
                    }
                }
            }
        }
        // Homes are rows of four-byte elements read as vectors: a bool output row (bytes)
        // or input row is never one; a bool value later segments read gets a mask buffer.
        let mut home: Vec<Option<Home>> = vec![None; n];
        for (j, &m) in spec.outputs.iter().enumerate() {
            if home[m].is_none() && spec.members[m].dtype == DType::Float32 {
                home[m] = Some(Home::Output(j));
            }
        }
        for (m, member) in spec.members.iter().enumerate() {
            if let (None, EwOp::Copy, [Operand::Input(k)]) = (home[m], member.op, &member.args[..]) {
                let (dt, st) = &spec.inputs[*k];
                if *dt == member.dtype && *dt == DType::Float32 && *st.last().expect("rank >= 1") != 0 {
                    home[m] = Some(Home::Input(*k));
                }
            }
        }
        // Buffers, reused once their value's last user has run.
        let mut free: Vec<usize> = Vec::new();
        let mut busy: Vec<(usize, usize)> = Vec::new(); // (buffer, last segment)
        let mut buffers = 0;
        for (s, seg) in segments.iter().enumerate() {
            busy.retain(|&(k, last)| {
                if last < s {
                    free.push(k);
                    false
                } else {
                    true
                }
            });
            let defs: Vec<usize> = match seg {
                Segment::Loop(ms) => ms.clone(),
                Segment::Call(m) => vec![*m],
            };
            for m in defs {
                let needed = last_use[m].is_some() || matches!(seg, Segment::Call(_));
                if home[m].is_none() && needed {
                    let k = free.pop().unwrap_or_else(|| {
                        buffers += 1;
                        buffers - 1
                    });
                    busy.push((k, last_use[m].unwrap_or(s)));
                    home[m] = Some(Home::Buffer(k));
                }
            }
        }
        let mut called: Vec<EwOp> = Vec::new();
        for seg in &segments {
            if let Segment::Call(m) = seg {
                if !called.contains(&spec.members[*m].op) {
                    called.push(spec.members[*m].op);
                }
            }
        }
        Some(TilePlan { segments, home, buffers, called })
    }

    fn calls(&self, op: EwOp) -> bool {
        self.called.contains(&op)
    }
}

/// A tile plan with what its code needs.
struct Tiles {
    plan: TilePlan,
    funcs: Vec<(EwOp, FuncRef)>,
    slot: StackSlot,
}

impl Emitter<'_> {
    /// Emits loop level `d`; `offs` are element offsets of the inputs (None = 0) and
    /// `oo` the output element offset at this point of the nest.
    #[allow(clippy::too_many_arguments)]
    fn level(
        &self,
        b: &mut FunctionBuilder<'_>,
        bases: &[Value],
        d: usize,
        offs: Vec<Option<Value>>,
        oo: Option<Value>,
        lo: Value,
        hi: Value,
    ) {
        let r = self.spec.dims.len();
        if d + 1 == r {
            self.inner(b, bases, &offs, oo, lo, hi);
            return;
        }
        let ostride: i64 = self.spec.dims[d + 1..].iter().product::<usize>() as i64;
        counted_loop(b, lo, hi, 1, |b, i| {
            let offs2: Vec<Option<Value>> = offs
                .iter()
                .zip(&self.spec.inputs)
                .map(|(o, (_, st))| {
                    if st[d] == 0 {
                        return *o;
                    }
                    let t = b.ins().imul_imm_s(i, st[d] as i64);
                    Some(match o {
                        Some(o) => b.ins().iadd(*o, t),
                        None => t,
                    })
                })
                .collect();
            let t = b.ins().imul_imm_s(i, ostride);
            let oo2 = Some(match oo {
                Some(o) => b.ins().iadd(o, t),
                None => t,
            });
            let lo2 = b.ins().iconst(types::I64, 0);
            let hi2 = b.ins().iconst(types::I64, self.spec.dims[d + 1] as i64);
            self.level(b, bases, d + 1, offs2, oo2, lo2, hi2);
        });
    }

    fn inner(
        &self,
        b: &mut FunctionBuilder<'_>,
        bases: &[Value],
        offs: &[Option<Value>],
        oo: Option<Value>,
        lo: Value,
        hi: Value,
    ) {
        let spec = self.spec;
        let r = spec.dims.len();
        let nin = spec.inputs.len();
        let flags = MemFlagsData::new().with_notrap();
        let byte_base = |b: &mut FunctionBuilder<'_>, base: Value, off: Option<Value>, es: i64| match off {
            None => base,
            Some(o) => {
                let t = b.ins().imul_imm_s(o, es);
                b.ins().iadd(base, t)
            }
        };
        // Row bases for contiguous inputs; hoisted loads for broadcast ones.
        let mut row: Vec<Value> = Vec::with_capacity(nin);
        let mut hoisted: Vec<Option<(Value, Option<Value>)>> = Vec::with_capacity(nin);
        for k in 0..nin {
            let (dt, st) = &spec.inputs[k];
            let es = elem_size(*dt);
            let rb = byte_base(b, bases[k], offs[k], es);
            row.push(rb);
            if st[r - 1] == 0 {
                let s = b.ins().load(scalar_ty(*dt), flags, rb, 0);
                let v = spec.vector.then(|| {
                    if *dt == DType::Bool {
                        // Booleans live as i32x4 lane masks in the vector loops.
                        let t = b.ins().icmp_imm_u(IntCC::NotEqual, s, 0);
                        let w = b.ins().uextend(types::I32, t);
                        let m = b.ins().ineg(w);
                        b.ins().splat(types::I32X4, m)
                    } else {
                        b.ins().splat(types::F32X4, s)
                    }
                });
                hoisted.push(Some((s, v)));
            } else {
                hoisted.push(None);
            }
        }
        let orow: Vec<Value> = spec
            .outputs
            .iter()
            .enumerate()
            .map(|(j, &m)| byte_base(b, bases[nin + j], oo, elem_size(spec.members[m].dtype)))
            .collect();
        let body = |b: &mut FunctionBuilder<'_>, i: Value, vector: bool, unroll: usize| {
            // Load all unrolled copies, evaluate op by op across the copies (so the
            // independent copies sit next to each other in the instruction stream and
            // overlap in the out-of-order window), then store.
            // Byte offsets of element i, one per element size, shared by every load and
            // store of the iteration (opt_level=none does no CSE for us).
            let mut byte_offs: Vec<(i64, Value)> = Vec::new();
            let ins: Vec<Vec<Value>> = (0..unroll)
                .map(|u| {
                    (0..nin)
                        .map(|k| match hoisted[k] {
                            Some((s, v)) => {
                                if vector {
                                    v.expect("vector splat")
                                } else {
                                    s
                                }
                            }
                            None => {
                                let dt = spec.inputs[k].0;
                                let es = elem_size(dt);
                                let bo = byte_offset(b, i, es, &mut byte_offs);
                                let addr = b.ins().iadd(row[k], bo);
                                let off = (u as i64 * 4 * es) as i32;
                                match (vector, dt) {
                                    (true, DType::Bool) => load_bool4(b, addr, off, &mut self.pool.borrow_mut()),
                                    (true, _) => b.ins().load(types::F32X4, flags, addr, off),
                                    (false, _) => b.ins().load(scalar_ty(dt), flags, addr, off),
                                }
                            }
                        })
                        .collect()
                })
                .collect();
            let vals = eval_members(b, spec, &ins, vector, &mut self.pool.borrow_mut());
            for (u, vals) in vals.iter().enumerate() {
                for (j, &m) in spec.outputs.iter().enumerate() {
                    let dt = spec.members[m].dtype;
                    let es = elem_size(dt);
                    let bo = byte_offset(b, i, es, &mut byte_offs);
                    let addr = b.ins().iadd(orow[j], bo);
                    let off = (u as i64 * 4 * es) as i32;
                    if vector && dt == DType::Bool {
                        store_bool4(b, vals[m], addr, off, &mut self.pool.borrow_mut());
                    } else {
                        b.ins().store(flags, vals[m], addr, off);
                    }
                }
            }
        };
        let mut i = lo;
        if let Some(tiles) = &self.tiles {
            i = counted_loop(b, i, hi, TILE as i64, |b, i| self.tile(b, tiles, i, &row, &hoisted, &orow));
        }
        // The range is the whole innermost extent, or (a rank-1 nest split across threads,
        // `plan.rs`) a chunk that starts and ends at multiples of `TILE` — a multiple of every
        // vector step — except that the last chunk ends at the extent. So each loop below
        // starts at a multiple of its step, and what is left for it is either nothing or
        // the extent's remainder modulo the step before: a loop that could never run is not
        // emitted. A training step's many tiny tensors then compile one f32x4 body, not the
        // ×8 unrolled copies too (a third of the code, and of regalloc's time), and a
        // multiple of 4 elements no scalar tail (the other half of a small body's code).
        let extent = spec.dims[r - 1];
        // After the tile loop (when there is one), what the last chunk leaves.
        let mut left = if self.tiles.is_some() { extent % TILE } else { extent };
        if spec.vector {
            let u = vector_unroll(spec);
            if left >= 4 * u {
                i = counted_loop(b, i, hi, 4 * u as i64, |b, i| body(b, i, true, u));
                left %= 4 * u;
            }
            if left >= 4 {
                i = counted_loop(b, i, hi, 4, |b, i| body(b, i, true, 1));
                left %= 4;
            }
        }
        if left > 0 {
            counted_loop(b, i, hi, 1, |b, i| body(b, i, false, 1));
        }
    }

    /// One tile `[t, t + TILE)` of the innermost loop: the plan's segments in order (see
    /// [`TilePlan`]). Every member is computed by the same operations as in the f32x4 loop
    /// (the routines' invariant), so a row's results do not depend on where tiles end.
    fn tile(
        &self,
        b: &mut FunctionBuilder<'_>,
        tiles: &Tiles,
        t: Value,
        row: &[Value],
        hoisted: &[Option<(Value, Option<Value>)>],
        orow: &[Value],
    ) {
        const UNROLL: usize = 8;
        let spec = self.spec;
        let plan = &tiles.plan;
        let flags = MemFlagsData::new().with_notrap();
        let tile_bytes = (TILE * 4) as i64;
        // The address of element `e` (a Value, relative to the tile start when `in_tile`)
        // of member m's home.
        let home_addr = |b: &mut FunctionBuilder<'_>, m: usize, j: Value| -> Value {
            match plan.home[m].expect("a home for every value crossing a segment") {
                Home::Buffer(k) => {
                    let base = b.ins().stack_addr(types::I64, tiles.slot, (k as i64 * tile_bytes) as i32);
                    let off = b.ins().ishl_imm_s(j, 2);
                    b.ins().iadd(base, off)
                }
                Home::Output(o) => {
                    let e = b.ins().iadd(t, j);
                    let off = b.ins().ishl_imm_s(e, 2);
                    b.ins().iadd(orow[o], off)
                }
                Home::Input(k) => {
                    let e = b.ins().iadd(t, j);
                    let off = b.ins().ishl_imm_s(e, 2);
                    b.ins().iadd(row[k], off)
                }
            }
        };
        for seg in &plan.segments {
            match seg {
                Segment::Call(m) => {
                    let member = &spec.members[*m];
                    let zero = b.ins().iconst(types::I64, 0);
                    let src = match member.args[0] {
                        Operand::Member(j) => home_addr(b, j, zero),
                        Operand::Input(k) => {
                            let off = b.ins().ishl_imm_s(t, 2);
                            b.ins().iadd(row[k], off)
                        }
                        Operand::Scalar(..) => unreachable!("TilePlan::new routes only member or row operands"),
                    };
                    let dst = home_addr(b, *m, zero);
                    let n = b.ins().iconst(types::I64, TILE as i64);
                    let f = tiles.funcs.iter().find(|f| f.0 == member.op).expect("declared for the plan").1;
                    b.ins().call(f, &[src, dst, n]);
                }
                Segment::Loop(ms) => {
                    // Operands from outside the segment: inputs and earlier members.
                    let mut inputs: Vec<usize> = Vec::new();
                    let mut loads: Vec<usize> = Vec::new();
                    for &mi in ms {
                        for a in &spec.members[mi].args {
                            match a {
                                Operand::Input(k) if !inputs.contains(k) => inputs.push(*k),
                                Operand::Member(j) if !ms.contains(j) && !loads.contains(j) => loads.push(*j),
                                _ => {}
                            }
                        }
                    }
                    let lo = b.ins().iconst(types::I64, 0);
                    let hi = b.ins().iconst(types::I64, TILE as i64);
                    counted_loop(b, lo, hi, (4 * UNROLL) as i64, |b, j| {
                        let e = b.ins().iadd(t, j);
                        let eoff = b.ins().ishl_imm_s(e, 2);
                        let ins: Vec<Vec<Value>> = (0..UNROLL)
                            .map(|u| {
                                (0..spec.inputs.len())
                                    .map(|k| {
                                        if !inputs.contains(&k) {
                                            // Unused here; any value of the right type.
                                            return lo;
                                        }
                                        match hoisted[k] {
                                            Some((_, v)) => v.expect("vector splat"),
                                            None if spec.inputs[k].0 == DType::Bool => {
                                                let addr = b.ins().iadd(row[k], e);
                                                load_bool4(b, addr, (u * 4) as i32, &mut self.pool.borrow_mut())
                                            }
                                            None => {
                                                let addr = b.ins().iadd(row[k], eoff);
                                                b.ins().load(types::F32X4, flags, addr, (u * 16) as i32)
                                            }
                                        }
                                    })
                                    .collect()
                            })
                            .collect();
                        let mut vals = vec![vec![None; spec.members.len()]; UNROLL];
                        for &m in &loads {
                            let addr = home_addr(b, m, j);
                            // Booleans live as i32x4 lane masks in the vector loops.
                            let ty = if spec.members[m].dtype == DType::Bool { types::I32X4 } else { types::F32X4 };
                            for (u, copy) in vals.iter_mut().enumerate() {
                                copy[m] = Some(b.ins().load(ty, flags, addr, (u * 16) as i32));
                            }
                        }
                        eval_some_members(b, spec, ms, &ins, &mut vals, true, &mut self.pool.borrow_mut());
                        for &m in ms {
                            // Outputs, then values later segments read from a buffer.
                            let mut dests: Vec<Value> = Vec::new();
                            for (o, &om) in spec.outputs.iter().enumerate() {
                                if om == m && spec.members[m].dtype == DType::Bool {
                                    // A bool output row holds bytes; its home, if a later
                                    // segment reads it, is a mask buffer (`TilePlan::new`).
                                    let addr = b.ins().iadd(orow[o], e);
                                    for (u, copy) in vals.iter().enumerate() {
                                        let v = copy[m].expect("evaluated");
                                        store_bool4(b, v, addr, (u * 4) as i32, &mut self.pool.borrow_mut());
                                    }
                                } else if om == m {
                                    dests.push(b.ins().iadd(orow[o], eoff));
                                }
                            }
                            // A buffer home is only given to a value a later segment reads.
                            if let Some(Home::Buffer(_)) = plan.home[m] {
                                dests.push(home_addr(b, m, j));
                            }
                            for d in dests {
                                for (u, copy) in vals.iter().enumerate() {
                                    let v = copy[m].expect("evaluated");
                                    b.ins().store(flags, v, d, (u * 16) as i32);
                                }
                            }
                        }
                    });
                }
            }
        }
    }
}

/// Four bools (bytes, nonzero true) at `addr + off` as an i32x4 lane mask, the vector
/// loops' form of a bool.
fn load_bool4(b: &mut FunctionBuilder<'_>, addr: Value, off: i32, pool: &mut ConstPool) -> Value {
    let w = b.ins().load(types::I32, MemFlagsData::new().with_notrap(), addr, off);
    let v = b.ins().scalar_to_vector(types::I32X4, w);
    let bytes = b.ins().bitcast(types::I8X16, MemFlagsData::new().with_endianness(Endianness::Little), v);
    let halves = b.ins().uwiden_low(bytes);
    let words = b.ins().uwiden_low(halves);
    let zero = FMath { b, ty: types::I32X4, pool: Some(pool) }.pooled(0, types::I32X4);
    b.ins().icmp(IntCC::NotEqual, words, zero)
}

/// An i32x4 lane mask stored as four bools (bytes 0 or 1) at `addr + off`.
fn store_bool4(b: &mut FunctionBuilder<'_>, mask: Value, addr: Value, off: i32, pool: &mut ConstPool) {
    let one = FMath { b, ty: types::I32X4, pool: Some(pool) }.pooled(1, types::I32X4);
    let bits = b.ins().band(mask, one);
    let halves = b.ins().snarrow(bits, bits);
    let bytes = b.ins().snarrow(halves, halves);
    let words = b.ins().bitcast(types::I32X4, MemFlagsData::new().with_endianness(Endianness::Little), bytes);
    let four = b.ins().extractlane(words, 0);
    b.ins().store(MemFlagsData::new().with_notrap(), four, addr, off);
}

/// `i · es` (a shift), emitted once per element size per loop iteration.
fn byte_offset(b: &mut FunctionBuilder<'_>, i: Value, es: i64, cache: &mut Vec<(i64, Value)>) -> Value {
    if let Some(&(_, v)) = cache.iter().find(|c| c.0 == es) {
        return v;
    }
    let v = if es == 1 { i } else { b.ins().ishl_imm_s(i, i64::from(es.trailing_zeros())) };
    cache.push((es, v));
    v
}

/// How many f32x4 copies the main vector loop computes per iteration. Deep chains are
/// latency-bound (each copy is one long dependency chain), so more independent copies
/// in flight pay off: 8 copies ran chain_32 ~25% faster than 4 (6.4 vs 8.3 ms); 16
/// spill too much. Small groups are memory-bound and huge ones would bloat the code.
pub(crate) fn vector_unroll(spec: &FusedSpec) -> usize {
    if (4..=256).contains(&spec.members.len()) {
        8
    } else {
        4
    }
}

/// Computes every member for each unrolled copy (`ins[u]` are copy u's input values), one
/// element (scalar) or four (vector) per copy; member-major so copies interleave.
fn eval_members(
    b: &mut FunctionBuilder<'_>,
    spec: &FusedSpec,
    ins: &[Vec<Value>],
    vector: bool,
    pool: &mut ConstPool,
) -> Vec<Vec<Value>> {
    let all: Vec<usize> = (0..spec.members.len()).collect();
    let mut vals = vec![vec![None; spec.members.len()]; ins.len()];
    eval_some_members(b, spec, &all, ins, &mut vals, vector, pool);
    vals.into_iter().map(|copy| copy.into_iter().map(|v| v.expect("every member evaluated")).collect()).collect()
}

/// Computes the members `which` (in order) for each unrolled copy into `vals[u][member]`;
/// their operands are copy u's inputs `ins[u]` and members already in `vals[u]`.
fn eval_some_members(
    b: &mut FunctionBuilder<'_>,
    spec: &FusedSpec,
    which: &[usize],
    ins: &[Vec<Value>],
    vals: &mut [Vec<Option<Value>>],
    vector: bool,
    pool: &mut ConstPool,
) {
    for &mi in which {
        let m = &spec.members[mi];
        for (u, copy_ins) in ins.iter().enumerate() {
            let mut args = Vec::with_capacity(m.args.len());
            let mut arg_dt = Vec::with_capacity(m.args.len());
            for a in &m.args {
                let (v, dt) = match a {
                    Operand::Input(k) => (copy_ins[*k], spec.inputs[*k].0),
                    Operand::Member(j) => {
                        (vals[u][*j].expect("operand computed before its user"), spec.members[*j].dtype)
                    }
                    Operand::Scalar(dt, x) => (scalar_const(b, *dt, *x, vector, pool), *dt),
                };
                args.push(v);
                arg_dt.push(dt);
            }
            let v = match (m.op, &m.args[..]) {
                // max/min with a non-NaN, non-zero float32 constant: one maxps/minps, NaN x
                // passes (a zero constant takes the general path, which picks the second
                // operand on a ±0 tie as TensorFlow does).
                (
                    EwOp::Maximum | EwOp::Minimum,
                    [_x, Operand::Scalar(DType::Float32, c)] | [Operand::Scalar(DType::Float32, c), _x],
                ) if !c.is_nan() && *c != 0.0 && m.dtype == DType::Float32 && !matches!(_x, Operand::Scalar(..)) => {
                    // The non-constant operand (two constants were folded at compile time).
                    let xv = if matches!(m.args[0], Operand::Scalar(..)) { args[1] } else { args[0] };
                    let ty = if vector { types::F32X4 } else { types::F32 };
                    let mut f = FMath { b, ty, pool: Some(&mut *pool) };
                    if m.op == EwOp::Maximum {
                        f.max_const(xv, *c as f32)
                    } else {
                        f.min_const(xv, *c as f32)
                    }
                }
                _ if vector => vec_op(b, m, &args, &arg_dt, pool),
                _ => scalar_op(b, m, &args, &arg_dt),
            };
            vals[u][mi] = Some(v);
        }
    }
}

fn scalar_const(b: &mut FunctionBuilder<'_>, dt: DType, x: f64, vector: bool, pool: &mut ConstPool) -> Value {
    if vector {
        let mut f = FMath { b, ty: types::F32X4, pool: Some(pool) };
        return match dt {
            DType::Bool => f.pooled(if x != 0.0 { u32::MAX } else { 0 }, types::I32X4),
            _ => f.c(x as f32),
        };
    }
    match dt {
        DType::Float32 => b.ins().f32const(x as f32),
        DType::Float64 => b.ins().f64const(x),
        DType::Int32 => b.ins().iconst(types::I32, x as i32 as i64),
        DType::Int64 => b.ins().iconst(types::I64, x as i64),
        _ => b.ins().iconst(types::I8, (x != 0.0) as i64),
    }
}

/// Vector (f32x4 data, i32x4 masks for bool) lowering of one member.
fn vec_op(b: &mut FunctionBuilder<'_>, m: &Member, a: &[Value], adt: &[DType], pool: &mut ConstPool) -> Value {
    let mut f = FMath { b, ty: types::F32X4, pool: Some(pool) };
    float_op(&mut f, m, a, adt, true)
}

fn float_op(f: &mut FMath<'_, '_>, m: &Member, a: &[Value], adt: &[DType], vector: bool) -> Value {
    let cmp = |f: &mut FMath<'_, '_>, cc: FloatCC| f.b.ins().fcmp(cc, a[0], a[1]);
    match m.op {
        EwOp::Add => f.b.ins().fadd(a[0], a[1]),
        EwOp::AddN => {
            let mut s = a[0];
            for &x in &a[1..] {
                s = f.b.ins().fadd(s, x);
            }
            s
        }
        EwOp::Sub => f.b.ins().fsub(a[0], a[1]),
        EwOp::Mul => f.b.ins().fmul(a[0], a[1]),
        EwOp::Div => f.b.ins().fdiv(a[0], a[1]),
        EwOp::DivNoNan => {
            let q = f.b.ins().fdiv(a[0], a[1]);
            let z = f.c(0.0);
            let zero = f.b.ins().fcmp(FloatCC::Equal, a[1], z);
            f.sel(zero, z, q)
        }
        EwOp::MulNoNan => {
            let q = f.b.ins().fmul(a[0], a[1]);
            let z = f.c(0.0);
            let zero = f.b.ins().fcmp(FloatCC::Equal, a[1], z);
            f.sel(zero, z, q)
        }
        EwOp::Neg => f.neg(a[0]),
        EwOp::Abs => f.abs(a[0]),
        EwOp::Sqrt => f.b.ins().sqrt(a[0]),
        EwOp::Rsqrt => {
            let s = f.b.ins().sqrt(a[0]);
            let one = f.c(1.0);
            f.b.ins().fdiv(one, s)
        }
        EwOp::Reciprocal => {
            let one = f.c(1.0);
            f.b.ins().fdiv(one, a[0])
        }
        EwOp::Square => f.b.ins().fmul(a[0], a[0]),
        EwOp::Exp => f.exp(a[0]),
        EwOp::Log => f.log(a[0]),
        EwOp::Tanh => f.tanh(a[0]),
        EwOp::Sigmoid => f.sigmoid(a[0]),
        EwOp::Pow => f.pow(a[0], a[1]),
        EwOp::Erf => f.erf(a[0]),
        EwOp::Erfc => f.erfc(a[0]),
        EwOp::Sin => f.sin_cos(a[0], false),
        EwOp::Cos => f.sin_cos(a[0], true),
        EwOp::Log1p => f.log1p(a[0]),
        EwOp::Softplus => f.softplus(a[0]),
        EwOp::IsNan => f.b.ins().fcmp(FloatCC::Unordered, a[0], a[0]),
        // No constant, so the float64 lowering shares it.
        EwOp::IsFinite => {
            let d = f.b.ins().fsub(a[0], a[0]);
            f.b.ins().fcmp(FloatCC::Ordered, d, d)
        }
        EwOp::Expm1 => f.expm1(a[0]),
        EwOp::Elu => {
            let e = f.expm1(a[0]);
            let z = f.c(0.0);
            let neg = f.b.ins().fcmp(FloatCC::LessThan, a[0], z);
            f.sel(neg, e, a[0])
        }
        EwOp::Selu => {
            // The interpreter's (and TensorFlow's) form: e^x − 1, not expm1.
            let e = f.exp(a[0]);
            let one = f.c(1.0);
            let em1 = f.b.ins().fsub(e, one);
            let sa = f.c(SELU_SCALE_ALPHA);
            let below = f.b.ins().fmul(sa, em1);
            let sc = f.c(SELU_SCALE);
            let above = f.b.ins().fmul(sc, a[0]);
            let z = f.c(0.0);
            let neg = f.b.ins().fcmp(FloatCC::LessThan, a[0], z);
            f.sel(neg, below, above)
        }
        EwOp::Relu6 => {
            let r = f.max_const(a[0], 0.0);
            let r = f.min_const(r, 6.0);
            let z = f.c(0.0);
            f.b.ins().fadd(r, z)
        }
        EwOp::EluGrad => {
            let one = f.c(1.0);
            let y1 = f.b.ins().fadd(a[1], one);
            let d = f.b.ins().fmul(a[0], y1);
            let z = f.c(0.0);
            let neg = f.b.ins().fcmp(FloatCC::LessThan, a[1], z);
            f.sel(neg, d, a[0])
        }
        EwOp::SeluGrad => {
            let sa = f.c(SELU_SCALE_ALPHA);
            let ysa = f.b.ins().fadd(a[1], sa);
            let below = f.b.ins().fmul(a[0], ysa);
            let sc = f.c(SELU_SCALE);
            let above = f.b.ins().fmul(a[0], sc);
            let z = f.c(0.0);
            let neg = f.b.ins().fcmp(FloatCC::LessThan, a[1], z);
            f.sel(neg, below, above)
        }
        EwOp::LeakyRelu(alpha) => {
            let al = f.c(f32::from_bits(alpha));
            let scaled = f.b.ins().fmul(a[0], al);
            let z = f.c(0.0);
            let neg = f.b.ins().fcmp(FloatCC::LessThan, a[0], z);
            f.sel(neg, scaled, a[0])
        }
        EwOp::LeakyReluGrad(alpha) => {
            let al = f.c(f32::from_bits(alpha));
            let scaled = f.b.ins().fmul(a[0], al);
            let z = f.c(0.0);
            let pos = f.b.ins().fcmp(FloatCC::GreaterThan, a[1], z);
            f.sel(pos, a[0], scaled)
        }
        EwOp::FakeQuant { min, max, scale, inv_scale } => {
            // Clamped to the range by compare-and-select (a NaN stays NaN, as in TensorFlow:
            // `autoclust_graph::fake_quant::Nudged::quantize`), then TensorFlow's arithmetic
            // in its order.
            let (mn, mx) = (f.c(f32::from_bits(min)), f.c(f32::from_bits(max)));
            let over = f.b.ins().fcmp(FloatCC::GreaterThan, a[0], mx);
            let c = f.sel(over, mx, a[0]);
            let under = f.b.ins().fcmp(FloatCC::LessThan, c, mn);
            let c = f.sel(under, mn, c);
            let shifted = f.b.ins().fsub(c, mn);
            let inv = f.c(f32::from_bits(inv_scale));
            let t = f.b.ins().fmul(shifted, inv);
            let half = f.c(0.5);
            let t = f.b.ins().fadd(t, half);
            let q = f.b.ins().floor(t);
            let sc = f.c(f32::from_bits(scale));
            let r = f.b.ins().fmul(q, sc);
            f.b.ins().fadd(r, mn)
        }
        EwOp::FakeQuantVars { qmin, qmax } => {
            // `autoclust_graph::fake_quant::nudge` on the run-time range, then as above.
            let (qminf, qmaxf) = (f.c(qmin as f32), f.c(qmax as f32));
            let steps = f.b.ins().fsub(qmaxf, qminf);
            let width = f.b.ins().fsub(a[2], a[1]);
            let scale = f.b.ins().fdiv(width, steps);
            let inv = f.b.ins().fdiv(steps, width);
            let m_s = f.b.ins().fdiv(a[1], scale);
            let zfm = f.b.ins().fsub(qminf, m_s);
            // Rounded half away from zero (`f32::round`; the value is ≥ 0 when not clamped).
            let t = f.b.ins().trunc(zfm);
            let frac = f.b.ins().fsub(zfm, t);
            let half = f.c(0.5);
            let up = f.b.ins().fcmp(FloatCC::GreaterThanOrEqual, frac, half);
            let one = f.c(1.0);
            let t1 = f.b.ins().fadd(t, one);
            let rounded = f.sel(up, t1, t);
            // A NaN zero point becomes 0 (Rust's saturating `as u16`).
            let z = f.c(0.0);
            let nan = f.b.ins().fcmp(FloatCC::Unordered, zfm, zfm);
            let rounded = f.sel(nan, z, rounded);
            let below = f.b.ins().fcmp(FloatCC::LessThan, zfm, qminf);
            let zero = f.sel(below, qminf, rounded);
            let above = f.b.ins().fcmp(FloatCC::GreaterThan, zfm, qmaxf);
            let zero = f.sel(above, qmaxf, zero);
            let lo = f.b.ins().fsub(qminf, zero);
            let mn = f.b.ins().fmul(lo, scale);
            let hi = f.b.ins().fsub(qmaxf, zero);
            let mx = f.b.ins().fmul(hi, scale);
            let over = f.b.ins().fcmp(FloatCC::GreaterThan, a[0], mx);
            let c = f.sel(over, mx, a[0]);
            let under = f.b.ins().fcmp(FloatCC::LessThan, c, mn);
            let c = f.sel(under, mn, c);
            let shifted = f.b.ins().fsub(c, mn);
            let t = f.b.ins().fmul(shifted, inv);
            let t = f.b.ins().fadd(t, half);
            let q = f.b.ins().floor(t);
            let r = f.b.ins().fmul(q, scale);
            f.b.ins().fadd(r, mn)
        }
        EwOp::FakeQuantGrad { min, max } => {
            let (mn, mx) = (f.c(f32::from_bits(min)), f.c(f32::from_bits(max)));
            let lo = f.b.ins().fcmp(FloatCC::GreaterThanOrEqual, a[1], mn);
            let hi = f.b.ins().fcmp(FloatCC::LessThanOrEqual, a[1], mx);
            let inside = f.b.ins().band(lo, hi);
            let z = f.c(0.0);
            f.sel(inside, a[0], z)
        }
        // TensorFlow multiplies the gradient by the mask (`dy · (0 < x < 6)`), so a NaN or
        // infinite gradient where the mask is 0 stays NaN (a select would hide it).
        EwOp::Relu6Grad => {
            let (z, one) = (f.c(0.0), f.c(1.0));
            let six = f.c(6.0);
            let pos = f.b.ins().fcmp(FloatCC::GreaterThan, a[1], z);
            let below = f.b.ins().fcmp(FloatCC::LessThan, a[1], six);
            let inside = f.b.ins().band(pos, below);
            let mask = f.sel(inside, one, z);
            f.b.ins().fmul(a[0], mask)
        }
        // `x < 0 ? 0 : x` (one maxps; NaN passes through), then + 0 turns −0 into +0 as
        // TensorFlow's vectorised max(x, 0) does.
        EwOp::Relu => {
            let r = f.max_const(a[0], 0.0);
            let z = f.c(0.0);
            f.b.ins().fadd(r, z)
        }
        EwOp::Maximum => f.max_nan(a[0], a[1]),
        EwOp::Minimum => f.min_nan(a[0], a[1]),
        EwOp::SquaredDifference => {
            let d = f.b.ins().fsub(a[0], a[1]);
            f.b.ins().fmul(d, d)
        }
        // `dy · (x > 0)`, TensorFlow's product (see `Relu6Grad`).
        EwOp::ReluGrad => {
            let (z, one) = (f.c(0.0), f.c(1.0));
            let pos = f.b.ins().fcmp(FloatCC::GreaterThan, a[1], z);
            let mask = f.sel(pos, one, z);
            f.b.ins().fmul(a[0], mask)
        }
        EwOp::TanhGrad => {
            let one = f.c(1.0);
            let yy = f.b.ins().fmul(a[0], a[0]);
            let t = f.b.ins().fsub(one, yy);
            f.b.ins().fmul(a[1], t)
        }
        EwOp::SigmoidGrad => {
            let one = f.c(1.0);
            let t = f.b.ins().fsub(one, a[0]);
            let t = f.b.ins().fmul(a[0], t);
            f.b.ins().fmul(a[1], t)
        }
        EwOp::RsqrtGrad => {
            let half = f.c(0.5);
            let t = f.b.ins().fmul(a[0], a[0]);
            let t = f.b.ins().fmul(t, a[0]);
            let t = f.b.ins().fmul(t, a[1]);
            let t = f.b.ins().fmul(t, half);
            f.b.ins().fneg(t)
        }
        EwOp::SqrtGrad => {
            let half = f.c(0.5);
            let t = f.b.ins().fmul(a[1], half);
            f.b.ins().fdiv(t, a[0])
        }
        EwOp::ReciprocalGrad => {
            let t = f.b.ins().fmul(a[1], a[0]);
            let t = f.b.ins().fmul(t, a[0]);
            f.b.ins().fneg(t)
        }
        EwOp::Floor => f.b.ins().floor(a[0]),
        EwOp::Ceil => f.b.ins().ceil(a[0]),
        EwOp::Round => f.b.ins().nearest(a[0]),
        EwOp::Softsign | EwOp::SoftsignGrad => {
            // The interpreter's order: `1 + |x|`, then `x / d` or `dy / (d · d)`.
            let x = a[a.len() - 1];
            let ax = f.abs(x);
            let one = f.c(1.0);
            let d = f.b.ins().fadd(one, ax);
            if m.op == EwOp::Softsign {
                f.b.ins().fdiv(a[0], d)
            } else {
                let dd = f.b.ins().fmul(d, d);
                f.b.ins().fdiv(a[0], dd)
            }
        }
        EwOp::RoundHalf { bf16: false } => f.round_f16(a[0]),
        EwOp::RoundHalf { bf16: true } => f.round_bf16(a[0]),
        EwOp::FloorDiv | EwOp::FloorMod => unreachable!("scalar_ok and vector_ok exclude {:?}", m.op),
        EwOp::Sign => {
            let z = f.c(0.0);
            let one = f.c(1.0);
            let mone = f.c(-1.0);
            let gt = f.b.ins().fcmp(FloatCC::GreaterThan, a[0], z);
            let lt = f.b.ins().fcmp(FloatCC::LessThan, a[0], z);
            let t = f.sel(lt, mone, a[0]);
            f.sel(gt, one, t)
        }
        EwOp::Less => cmp(f, FloatCC::LessThan),
        EwOp::LessEqual => cmp(f, FloatCC::LessThanOrEqual),
        EwOp::Greater => cmp(f, FloatCC::GreaterThan),
        EwOp::GreaterEqual => cmp(f, FloatCC::GreaterThanOrEqual),
        EwOp::Equal => cmp(f, FloatCC::Equal),
        EwOp::NotEqual => cmp(f, FloatCC::NotEqual),
        EwOp::LogicalAnd => f.b.ins().band(a[0], a[1]),
        EwOp::LogicalOr => f.b.ins().bor(a[0], a[1]),
        EwOp::LogicalNot => {
            if vector {
                f.b.ins().bnot(a[0])
            } else {
                f.b.ins().bxor_imm_s(a[0], 1)
            }
        }
        EwOp::Select => {
            if adt[1] == DType::Bool {
                // Selecting between masks.
                if vector {
                    f.b.ins().bitselect(a[0], a[1], a[2])
                } else {
                    f.b.ins().select(a[0], a[1], a[2])
                }
            } else {
                f.sel(a[0], a[1], a[2])
            }
        }
        EwOp::Copy => a[0],
        EwOp::Cast => {
            // Vector mode only sees float32 <-> bool/float32 casts (checked by the planner).
            match (adt[0], m.dtype) {
                (DType::Bool, DType::Float32) => {
                    let mf = f.b.ins().bitcast(types::F32X4, MemFlagsData::new(), a[0]);
                    let one = f.c(1.0);
                    f.b.ins().band(mf, one)
                }
                (DType::Float32, DType::Bool) => {
                    let z = f.c(0.0);
                    f.b.ins().fcmp(FloatCC::NotEqual, a[0], z)
                }
                _ => a[0],
            }
        }
    }
}

/// Whether an op with these operand dtypes and result can run in the vector loop.
pub(crate) fn vector_ok(m: &Member, adt: &[DType]) -> bool {
    if matches!(m.op, EwOp::FloorDiv | EwOp::FloorMod) {
        return false;
    }
    let fb = |d: DType| matches!(d, DType::Float32 | DType::Bool);
    if !fb(m.dtype) || !adt.iter().all(|&d| fb(d)) {
        return false;
    }
    match m.op {
        EwOp::Cast | EwOp::Copy | EwOp::LogicalAnd | EwOp::LogicalOr | EwOp::LogicalNot => true,
        EwOp::Select => adt[0] == DType::Bool,
        _ if m.op.is_predicate() => adt.iter().all(|&d| d == DType::Float32),
        _ => m.dtype == DType::Float32 && adt.iter().all(|&d| d == DType::Float32),
    }
}

/// Whether the scalar lowering handles this op at these dtypes.
pub(crate) fn scalar_ok(m: &Member, adt: &[DType]) -> bool {
    if matches!(m.op, EwOp::FloorDiv | EwOp::FloorMod) {
        return false; // folded when constant, otherwise the interpreter's
    }
    let data = if matches!(m.op, EwOp::Select) { adt[1] } else { adt[0] };
    match data {
        DType::Float32 => true,
        // f64 lowering builds only the constants 0, ±1 and 0.5 (see `f64_op`).
        DType::Float64 => {
            !m.op.is_transcendental()
                && !matches!(
                    m.op,
                    EwOp::Relu6
                        | EwOp::Relu6Grad
                        | EwOp::EluGrad
                        | EwOp::SeluGrad
                        | EwOp::LeakyRelu(_)
                        | EwOp::LeakyReluGrad(_)
                        | EwOp::FakeQuant { .. }
                        | EwOp::FakeQuantGrad { .. }
                        | EwOp::FakeQuantVars { .. }
                )
        }
        DType::Int32 | DType::Int64 => matches!(
            m.op,
            EwOp::Add
                | EwOp::AddN
                | EwOp::Sub
                | EwOp::Mul
                | EwOp::Neg
                | EwOp::Abs
                | EwOp::Square
                | EwOp::Maximum
                | EwOp::Minimum
                | EwOp::Relu
                | EwOp::Sign
                | EwOp::Select
                | EwOp::Cast
                | EwOp::Copy
                | EwOp::Less
                | EwOp::LessEqual
                | EwOp::Greater
                | EwOp::GreaterEqual
                | EwOp::Equal
                | EwOp::NotEqual
        ),
        DType::Bool => matches!(
            m.op,
            EwOp::LogicalAnd
                | EwOp::LogicalOr
                | EwOp::LogicalNot
                | EwOp::Cast
                | EwOp::Copy
                | EwOp::Select
                | EwOp::Equal
                | EwOp::NotEqual
        ),
        _ => false,
    }
}

fn scalar_op(b: &mut FunctionBuilder<'_>, m: &Member, a: &[Value], adt: &[DType]) -> Value {
    let data = if matches!(m.op, EwOp::Select) { adt[1] } else { adt[0] };
    match data {
        DType::Float32 | DType::Float64 if !matches!(m.op, EwOp::Cast) => {
            let mut f = FMath { b, ty: scalar_ty(data), pool: None };
            if data == DType::Float64 {
                // FMath's constants are f32; f64 only reaches non-transcendental ops, whose
                // constants (0, ±1, 0.5) are exact, so build them in f64 here.
                return f64_op(f.b, m, a, adt);
            }
            float_op(&mut f, m, a, adt, false)
        }
        _ if matches!(m.op, EwOp::Cast) => cast(b, adt[0], m.dtype, a[0]),
        DType::Bool => match m.op {
            EwOp::LogicalAnd => b.ins().band(a[0], a[1]),
            EwOp::LogicalOr => b.ins().bor(a[0], a[1]),
            EwOp::LogicalNot => b.ins().bxor_imm_s(a[0], 1),
            EwOp::Select => b.ins().select(a[0], a[1], a[2]),
            EwOp::Equal => b.ins().icmp(IntCC::Equal, a[0], a[1]),
            EwOp::NotEqual => b.ins().icmp(IntCC::NotEqual, a[0], a[1]),
            _ => a[0],
        },
        _ => int_op(b, m, a, scalar_ty(data)),
    }
}

fn f64_op(b: &mut FunctionBuilder<'_>, m: &Member, a: &[Value], adt: &[DType]) -> Value {
    let c = |b: &mut FunctionBuilder<'_>, x: f64| b.ins().f64const(x);
    match m.op {
        EwOp::Rsqrt => {
            let s = b.ins().sqrt(a[0]);
            let one = c(b, 1.0);
            b.ins().fdiv(one, s)
        }
        EwOp::Reciprocal => {
            let one = c(b, 1.0);
            b.ins().fdiv(one, a[0])
        }
        EwOp::Softsign | EwOp::SoftsignGrad => {
            let x = a[a.len() - 1];
            let ax = b.ins().fabs(x);
            let one = c(b, 1.0);
            let d = b.ins().fadd(one, ax);
            if m.op == EwOp::Softsign {
                b.ins().fdiv(a[0], d)
            } else {
                let dd = b.ins().fmul(d, d);
                b.ins().fdiv(a[0], dd)
            }
        }
        EwOp::DivNoNan => {
            let z = c(b, 0.0);
            let q = b.ins().fdiv(a[0], a[1]);
            let zero = b.ins().fcmp(FloatCC::Equal, a[1], z);
            b.ins().select(zero, z, q)
        }
        EwOp::MulNoNan => {
            let z = c(b, 0.0);
            let q = b.ins().fmul(a[0], a[1]);
            let zero = b.ins().fcmp(FloatCC::Equal, a[1], z);
            b.ins().select(zero, z, q)
        }
        EwOp::Relu => {
            let z = c(b, 0.0);
            b.ins().fmax(a[0], z)
        }
        EwOp::ReluGrad => {
            let (z, one) = (c(b, 0.0), c(b, 1.0));
            let pos = b.ins().fcmp(FloatCC::GreaterThan, a[1], z);
            let mask = b.ins().select(pos, one, z);
            b.ins().fmul(a[0], mask)
        }
        EwOp::TanhGrad => {
            let one = c(b, 1.0);
            let yy = b.ins().fmul(a[0], a[0]);
            let t = b.ins().fsub(one, yy);
            b.ins().fmul(a[1], t)
        }
        EwOp::SigmoidGrad => {
            let one = c(b, 1.0);
            let t = b.ins().fsub(one, a[0]);
            let t = b.ins().fmul(a[0], t);
            b.ins().fmul(a[1], t)
        }
        EwOp::RsqrtGrad => {
            let half = c(b, 0.5);
            let t = b.ins().fmul(a[0], a[0]);
            let t = b.ins().fmul(t, a[0]);
            let t = b.ins().fmul(t, a[1]);
            let t = b.ins().fmul(t, half);
            b.ins().fneg(t)
        }
        EwOp::SqrtGrad => {
            let half = c(b, 0.5);
            let t = b.ins().fmul(a[1], half);
            b.ins().fdiv(t, a[0])
        }
        EwOp::ReciprocalGrad => {
            let t = b.ins().fmul(a[1], a[0]);
            let t = b.ins().fmul(t, a[0]);
            b.ins().fneg(t)
        }
        EwOp::Sign => {
            let z = c(b, 0.0);
            let one = c(b, 1.0);
            let mone = c(b, -1.0);
            let gt = b.ins().fcmp(FloatCC::GreaterThan, a[0], z);
            let lt = b.ins().fcmp(FloatCC::LessThan, a[0], z);
            let t = b.ins().select(lt, mone, a[0]);
            b.ins().select(gt, one, t)
        }
        _ => {
            // The remaining ops build no constants.
            let mut f = FMath { b, ty: types::F64, pool: None };
            float_op(&mut f, m, a, adt, false)
        }
    }
}

fn int_op(b: &mut FunctionBuilder<'_>, m: &Member, a: &[Value], ty: Type) -> Value {
    let cmp = |b: &mut FunctionBuilder<'_>, cc: IntCC| b.ins().icmp(cc, a[0], a[1]);
    match m.op {
        EwOp::Add => b.ins().iadd(a[0], a[1]),
        EwOp::AddN => {
            let mut s = a[0];
            for &x in &a[1..] {
                s = b.ins().iadd(s, x);
            }
            s
        }
        EwOp::Sub => b.ins().isub(a[0], a[1]),
        EwOp::Mul => b.ins().imul(a[0], a[1]),
        EwOp::Neg => b.ins().ineg(a[0]),
        EwOp::Abs => b.ins().iabs(a[0]),
        EwOp::Square => b.ins().imul(a[0], a[0]),
        EwOp::Maximum => b.ins().smax(a[0], a[1]),
        EwOp::Minimum => b.ins().smin(a[0], a[1]),
        EwOp::Relu => {
            let z = b.ins().iconst(ty, 0);
            b.ins().smax(a[0], z)
        }
        EwOp::Sign => {
            let z = b.ins().iconst(ty, 0);
            let gt = b.ins().icmp(IntCC::SignedGreaterThan, a[0], z);
            let lt = b.ins().icmp(IntCC::SignedLessThan, a[0], z);
            let gt = b.ins().uextend(ty, gt);
            let lt = b.ins().uextend(ty, lt);
            b.ins().isub(gt, lt)
        }
        EwOp::Select => b.ins().select(a[0], a[1], a[2]),
        EwOp::Less => cmp(b, IntCC::SignedLessThan),
        EwOp::LessEqual => cmp(b, IntCC::SignedLessThanOrEqual),
        EwOp::Greater => cmp(b, IntCC::SignedGreaterThan),
        EwOp::GreaterEqual => cmp(b, IntCC::SignedGreaterThanOrEqual),
        EwOp::Equal => cmp(b, IntCC::Equal),
        EwOp::NotEqual => cmp(b, IntCC::NotEqual),
        _ => a[0],
    }
}

fn cast(b: &mut FunctionBuilder<'_>, from: DType, to: DType, x: Value) -> Value {
    let is_f = |d: DType| matches!(d, DType::Float32 | DType::Float64);
    let tt = scalar_ty(to);
    if from == to {
        return x;
    }
    match (from, to) {
        (DType::Float32, DType::Float64) => b.ins().fpromote(types::F64, x),
        (DType::Float64, DType::Float32) => b.ins().fdemote(types::F32, x),
        (f, DType::Bool) if is_f(f) => {
            let z = if f == DType::Float32 { b.ins().f32const(0.0) } else { b.ins().f64const(0.0) };
            b.ins().fcmp(FloatCC::NotEqual, x, z)
        }
        (_, DType::Bool) => b.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
        (f, _) if is_f(f) => {
            // TensorFlow's x86 Cast: NaN and values past the maximum give the integer
            // "indefinite" MIN, as `cvttss2si` does (saturation already gives MIN below).
            let sat = b.ins().fcvt_to_sint_sat(tt, x);
            let bits = if to == DType::Int64 { 63 } else { 31 };
            let limit = 2f64.powi(bits);
            let limit = if f == DType::Float32 { b.ins().f32const(limit as f32) } else { b.ins().f64const(limit) };
            let bad = b.ins().fcmp(FloatCC::UnorderedOrGreaterThanOrEqual, x, limit);
            let min = b.ins().iconst(tt, if to == DType::Int64 { i64::MIN } else { i64::from(i32::MIN as u32) });
            b.ins().select(bad, min, sat)
        }
        (DType::Bool, t) if is_f(t) => {
            let w = b.ins().uextend(types::I32, x);
            b.ins().fcvt_from_sint(tt, w)
        }
        (DType::Bool, _) => b.ins().uextend(tt, x),
        (_, t) if is_f(t) => b.ins().fcvt_from_sint(tt, x),
        (DType::Int32, DType::Int64) => b.ins().sextend(types::I64, x),
        (DType::Int64, DType::Int32) => b.ins().ireduce(types::I32, x),
        _ => x,
    }
}

/// `name` as a file-name stem and symbol prefix: every character other than an ASCII
/// letter, digit or `_` becomes `_`.
pub(crate) fn file_stem(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

/// TensorFlow's SELU constants rounded to float32 as its `static_cast<float>` rounds them
/// (scale·alpha 0x3fe10966).
const SELU_SCALE: f32 = autoclust_graph::arith::SELU_SCALE as f32;
const SELU_SCALE_ALPHA: f32 = autoclust_graph::arith::SELU_SCALE_ALPHA as f32;
