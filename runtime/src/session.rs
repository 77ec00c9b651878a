//! Sessions: a graph, its variables, and cached execution plans.
//!
//! `Session::run` takes `&self`: any number of threads may run steps on one
//! session at once (Hogwild-style training). Variables persist across runs;
//! each variable access is atomic (see [`crate::variables`]), so concurrent
//! runs never deadlock and never see a torn value. A failed run reports the
//! node at fault and leaves the session usable; ops that finished before the
//! failure keep their effects (as in TensorFlow), and no variable is ever
//! half-written.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use autoclust_graph::{parse_input, Graph, InputRef, NodeId, Output, Shape, Tensor};
use parking_lot::Mutex;

use crate::cluster_call::Jit;
use crate::error::RunError;
use crate::executor::{Plan, RunContext, Schedule};
use crate::variables::VariableStore;

/// How a session schedules its runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// Inter-op threads; 0 = the machine's cores. 1 = deterministic order
    /// (the lowest-numbered ready node first).
    pub threads: usize,
    /// Seeded-random schedule (single-threaded): each step picks uniformly
    /// among the ready nodes. Overrides `threads`.
    pub schedule_seed: Option<u64>,
    /// Iterations after which a `While` fails the step; `None` =
    /// [`crate::function_call::DEFAULT_MAX_LOOP_ITERATIONS`].
    pub max_loop_iterations: Option<u64>,
}

/// One step's request.
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// Values replacing node outputs (usually `Placeholder:0`).
    pub feeds: Vec<(Output, Tensor)>,
    pub fetches: Vec<Output>,
    /// Nodes to run for their effects.
    pub targets: Vec<NodeId>,
}

/// One step's results.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutputs {
    /// The fetched values, in request order.
    pub fetches: Vec<Tensor>,
}

type PlanKey = (Vec<Output>, Vec<Output>, Vec<NodeId>);

/// A graph with its variables.
pub struct Session {
    graph: Arc<Graph>,
    store: VariableStore,
    options: SessionOptions,
    threads: usize,
    plans: Mutex<HashMap<PlanKey, Arc<Plan>>>,
    pool: OnceLock<Result<rayon::ThreadPool, String>>,
    /// Compiles the cluster functions of an encapsulated graph.
    jit: Arc<Jit>,
}

impl Session {
    pub fn new(graph: Arc<Graph>, options: SessionOptions) -> Session {
        Session::with_jit(graph, options, Jit::default())
    }

    /// A session whose cluster calls use `jit` (compiler options, or the
    /// interpreter only).
    pub fn with_jit(graph: Arc<Graph>, options: SessionOptions, jit: Jit) -> Session {
        let store = VariableStore::new();
        let variables: Vec<NodeId> =
            graph.node_ids().filter(|&id| autoclust_graph::effects::names_variable(graph.node(id))).collect();
        // Captured variables (resource placeholders) are typed by their users: one index.
        let successors = variables.iter().any(|&id| graph.node(id).op == "Placeholder").then(|| graph.successors());
        for id in variables {
            store.register_node_in(&graph, successors.as_ref(), id);
        }
        crate::function_call::register_body_variables(&store, &graph.library);
        let threads = match options.threads {
            0 => std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            n => n,
        };
        Session {
            graph,
            store,
            options,
            threads,
            plans: Mutex::new(HashMap::new()),
            pool: OnceLock::new(),
            jit: Arc::new(jit),
        }
    }

    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The JIT of the cluster calls (compile statistics).
    pub fn jit(&self) -> &Jit {
        &self.jit
    }

    /// The variables, for the cluster bridge and tools.
    pub fn variable_store(&self) -> &VariableStore {
        &self.store
    }

    /// Resolves `node:port` (or `node`, port 0) to an output of the graph.
    pub fn output(&self, name: &str) -> Result<Output, RunError> {
        let bad = |m: &str| RunError::BadRequest { name: name.to_string(), message: m.to_string() };
        match parse_input(name) {
            Some(InputRef::Data { node, port }) => {
                let id = self.graph.find(node).ok_or_else(|| bad("names no node in the graph"))?;
                if let Some(n) = self.graph.output_count(id).filter(|&n| port as usize >= n) {
                    let op = &self.graph.node(id).op;
                    return Err(bad(&format!("node '{node}' ({op}) has {n} output(s)")));
                }
                Ok(Output { node: id, port })
            }
            _ => Err(bad("expected NODE or NODE:PORT")),
        }
    }

    /// Resolves a node name.
    pub fn node(&self, name: &str) -> Result<NodeId, RunError> {
        self.graph.find(name).ok_or_else(|| RunError::BadRequest {
            name: name.to_string(),
            message: "names no node in the graph".into(),
        })
    }

    /// Runs one step.
    pub fn run(&self, req: &RunRequest) -> Result<RunOutputs, RunError> {
        let mut feeds: Vec<(Output, &Tensor)> = req.feeds.iter().map(|(o, t)| (*o, t)).collect();
        feeds.sort_by_key(|(o, _)| *o);
        for w in feeds.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(RunError::BadFeed { name: self.output_name(w[0].0), message: "fed twice".into() });
            }
        }
        for (o, _) in &feeds {
            if o.node.index() >= self.graph.len() {
                return Err(RunError::BadFeed { name: format!("{}", o.node), message: "names no node".into() });
            }
        }
        for o in &req.fetches {
            if o.node.index() >= self.graph.len() {
                return Err(RunError::BadRequest { name: format!("{}", o.node), message: "names no node".into() });
            }
        }
        if let Some(t) = req.targets.iter().find(|t| t.index() >= self.graph.len()) {
            return Err(RunError::BadRequest { name: format!("{t}"), message: "names no node".into() });
        }
        let key: PlanKey = (feeds.iter().map(|(o, _)| *o).collect(), req.fetches.clone(), req.targets.clone());
        let plan = self.plan(key)?;
        // Subnormals flushed to zero while this thread runs kernels, as on TensorFlow's
        // threads (`autoclust_numeric::denormals`).
        let _flush = autoclust_numeric::denormals::FlushDenormals::new();
        let values: Vec<Tensor> = feeds.iter().map(|(_, t)| (*t).clone()).collect();
        for (spec, t) in plan.feeds.iter().zip(&values) {
            check_feed(&self.output_name(spec.output), spec.dtype, &spec.shape, t)?;
        }
        let ctx = RunContext {
            graph: &self.graph,
            store: &self.store,
            plan: &plan,
            feeds: crate::executor::feed_values(values),
        };
        let schedule = match (self.options.schedule_seed, self.threads) {
            (Some(seed), _) => Schedule::Seeded(seed),
            (None, 1) => Schedule::Deterministic,
            (None, _) if plan.sequential => Schedule::Deterministic,
            (None, n) => {
                let pool = self.pool.get_or_init(|| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(n)
                        .thread_name(|i| format!("autoclust-exec-{i}"))
                        // Kernels see subnormals as TensorFlow's pool threads do.
                        .start_handler(|_| {
                            autoclust_numeric::denormals::set_flush(true);
                        })
                        .build()
                        .map_err(|e| e.to_string())
                });
                match pool {
                    Ok(p) => Schedule::Parallel(p),
                    Err(_) => Schedule::Deterministic,
                }
            }
        };
        let _span = tracing::trace_span!("session_run", nodes = plan.nodes.len()).entered();
        match ctx.run(schedule) {
            Ok(fetches) => Ok(RunOutputs { fetches }),
            Err(e) => {
                self.store.forget_published();
                Err(e)
            }
        }
    }

    /// Builds (and keeps) the plan of `req` without running it, as the first `run` would:
    /// the clustered `run` does it while the clusters compile on other threads. An error
    /// here is the one `run` would give.
    pub fn prepare(&self, req: &RunRequest) -> Result<(), RunError> {
        let mut feeds: Vec<Output> = req.feeds.iter().map(|(o, _)| *o).collect();
        feeds.sort();
        let in_graph = |o: &Output| o.node.index() < self.graph.len();
        if !feeds.iter().chain(&req.fetches).all(in_graph) || req.targets.iter().any(|t| t.index() >= self.graph.len())
        {
            // `run` names the bad request.
            return Ok(());
        }
        self.plan((feeds, req.fetches.clone(), req.targets.clone())).map(|_| ())
    }

    fn plan(&self, key: PlanKey) -> Result<Arc<Plan>, RunError> {
        if let Some(p) = self.plans.lock().get(&key) {
            return Ok(p.clone());
        }
        let _span = tracing::debug_span!("build_plan", fetches = key.1.len(), targets = key.2.len()).entered();
        let limit = self.options.max_loop_iterations.unwrap_or(crate::function_call::DEFAULT_MAX_LOOP_ITERATIONS);
        let plan =
            Arc::new(Plan::build_limited(&self.graph, &self.store, Some(&self.jit), (&key.0, &key.1, &key.2), limit)?);
        self.plans.lock().insert(key, plan.clone());
        Ok(plan)
    }

    fn output_name(&self, o: Output) -> String {
        format!("{}:{}", self.graph.name(o.node), o.port)
    }

    /// Makes `other`'s lookup tables this session's too (the same tables): a session built
    /// from another's graph (optimized, clustered) keeps the tables its initialisation filled.
    pub fn adopt_tables(&self, other: &Session) {
        self.store.lookup_tables().adopt(other.store.lookup_tables());
        self.store.summary_writers().adopt(other.store.summary_writers());
    }

    /// Every initialised variable `(name, value)`, sorted by name. The name
    /// is the `shared_name` (or node name), prefixed `container/` when the
    /// container is not the default one.
    pub fn variables(&self) -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = self
            .store
            .all()
            .into_iter()
            .filter_map(|var| {
                let name = autoclust_graph::effects::variable_display_name(&var.container, &var.name);
                var.read().map(|t| (name, t))
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Names of every variable the graph declares, sorted.
    pub fn variable_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.store.all().iter().map(|v| v.name.clone()).collect();
        v.sort();
        v
    }

    /// What this session knows of a step's types before running it
    /// ([`autoclust_graph::infer::Seeds`]): the shapes of the values `feeds` gives and the
    /// type of each variable's current value (uninitialised ones are left out).
    pub fn seeds(&self, feeds: &[(Output, Tensor)]) -> autoclust_graph::infer::Seeds {
        let mut seeds = autoclust_graph::infer::Seeds::default();
        for (o, t) in feeds {
            seeds.outputs.insert(*o, (t.dtype, t.shape.clone()));
        }
        for id in self.graph.node_ids() {
            if autoclust_graph::effects::names_variable(self.graph.node(id)) {
                let var = self.store.register_node(&self.graph, id);
                if let Some(t) = self.store.get(var).read() {
                    seeds.variables.insert(id, (t.dtype, t.shape.clone()));
                }
            }
        }
        seeds
    }

    /// Sets a variable by name (its `shared_name`, or node name).
    pub fn set_variable(&self, name: &str, value: Tensor) -> Result<(), RunError> {
        let var = self.store.find_by_name(name).ok_or_else(|| RunError::Variable {
            name: name.to_string(),
            message: "the graph has no such variable".into(),
        })?;
        if var.typed && var.dtype != value.dtype {
            return Err(RunError::Variable {
                name: name.to_string(),
                message: format!("has dtype {} but the value has dtype {}", var.dtype, value.dtype),
            });
        }
        if !shape_fits(&var.declared_shape, &value.shape) {
            return Err(RunError::Variable {
                name: name.to_string(),
                message: format!("has shape {} but the value has shape {:?}", var.declared_shape, value.shape),
            });
        }
        var.write(value);
        Ok(())
    }
}

fn shape_fits(declared: &Shape, shape: &[usize]) -> bool {
    match &declared.dims {
        None => true,
        Some(d) => {
            d.len() == shape.len() && d.iter().zip(shape).all(|(x, &n)| x.is_none_or(|x| x < 0 || x == n as i64))
        }
    }
}

fn check_feed(name: &str, dtype: Option<autoclust_graph::DType>, shape: &Shape, t: &Tensor) -> Result<(), RunError> {
    if let Some(d) = dtype {
        if d != t.dtype {
            return Err(RunError::BadFeed {
                name: name.to_string(),
                message: format!("the placeholder has dtype {d} but the value has dtype {}", t.dtype),
            });
        }
    }
    if !shape_fits(shape, &t.shape) {
        return Err(RunError::BadFeed {
            name: name.to_string(),
            message: format!("the placeholder has shape {shape} but the value has shape {:?}", t.shape),
        });
    }
    Ok(())
}
