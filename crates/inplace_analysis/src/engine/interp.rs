//! Statement-by-statement abstract interpretation of Python scopes.

use super::model::*;
use crate::finding::{Finding, TextRange};
use crate::registry::Rule;
use crate::rules::Ctx;
use crate::syntax::NodeExt;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::smallvec;
use std::rc::Rc;
use tree_sitter::Node;

/// Deepest expression or statement nesting that is walked; deeper code is treated as unknown.
const MAX_DEPTH: usize = 200;
/// Deepest chain of inlined calls.
const MAX_INLINE: usize = 6;
/// Loop bodies run this many times (enough for a write in one iteration to meet a backward in
/// the next; saves are fresh each iteration, so more runs find nothing new).
const LOOP_RUNS: usize = 2;
/// Most values a container slot keeps.
const MAX_SEQ: usize = 32;
/// Most alternatives an expression's value set keeps (a module's parameters, a list's
/// elements); a larger set is unknown.
const MAX_VALUES: usize = 256;

pub(crate) struct Frame {
    /// A function analysed on its own (its arguments unknown): a returned graph flows out.
    pub standalone: bool,
    pub returns: Vals,
    pub ret_state: State,
    pub loops: Vec<(State, State)>,
}

impl Frame {
    fn new(standalone: bool) -> Frame {
        Frame {
            standalone,
            returns: Vals::new(),
            ret_state: State::dead(),
            loops: Vec::new(),
        }
    }
}

pub(crate) struct Interp<'t> {
    pub ctx: Ctx<'t>,
    pub heap: Vec<Obj<'t>>,
    pub graph: Vec<GraphNode>,
    pub saves: Vec<Save>,
    pub writes: Vec<Write>,
    pub state: State,
    /// Module environments of the functions being inlined (the first is the module's).
    pub outer_envs: Vec<Env>,
    /// The module's final environment, for functions analysed on their own.
    pub globals: Rc<Env>,
    pub grad_enabled: bool,
    pub frames: Vec<Frame>,
    pub inlining: Vec<usize>,
    pub call_site: Option<TextRange>,
    pub findings: FxHashMap<(Rule, TextRange), Finding>,
    pub steps: u64,
    pub budget: u64,
    /// Steps of the scopes already finished (`steps` counts the current one).
    pub total_steps: u64,
    /// Whether a function (by node id) is a generator: a walk of its body, done once.
    pub generators: FxHashMap<usize, bool>,
    pub depth: usize,
    /// Every in-place write: its range and the names sharing the written version counter.
    pub sites: FxHashMap<TextRange, std::collections::BTreeSet<String>>,
    /// `.data` reads: range -> whether the alias was written through.
    pub data_reads: FxHashMap<TextRange, bool>,
    /// Attributes of objects that are not modelled (`self.h` of an unknown `self`).
    pub loose_attrs: FxHashMap<(ObjId, Name), ObjId>,
    pub instances: FxHashMap<usize, ObjId>,
    /// The right-hand side of the plain assignment being evaluated and its target name.
    pub assign_rhs: Option<(TextRange, Name)>,
    pub unknown: ObjId,
    pub other: ObjId,
    /// The values of the literals `True` and `False`.
    pub true_obj: ObjId,
    pub false_obj: ObjId,
    pub none_obj: ObjId,
}

impl<'t> Interp<'t> {
    pub fn new(ctx: Ctx<'t>) -> Self {
        let budget = budget_for(ctx.lines.line_count());
        let mut it = Interp {
            ctx,
            heap: Vec::new(),
            graph: Vec::new(),
            saves: Vec::new(),
            writes: Vec::new(),
            state: State::default(),
            outer_envs: Vec::new(),
            globals: Rc::new(Env::default()),
            grad_enabled: true,
            frames: vec![Frame::new(false)],
            inlining: Vec::new(),
            call_site: None,
            findings: FxHashMap::default(),
            steps: 0,
            budget,
            total_steps: 0,
            generators: FxHashMap::default(),
            depth: 0,
            data_reads: FxHashMap::default(),
            sites: FxHashMap::default(),
            loose_attrs: FxHashMap::default(),
            instances: FxHashMap::default(),
            assign_rhs: None,
            unknown: 0,
            other: 1,
            true_obj: 2,
            false_obj: 3,
            none_obj: 4,
        };
        it.unknown = it.alloc(Obj::Unknown);
        debug_assert_eq!(it.unknown, super::model::UNKNOWN);
        it.other = it.alloc(Obj::Other);
        it.true_obj = it.alloc(Obj::Other);
        it.false_obj = it.alloc(Obj::Other);
        it.none_obj = it.alloc(Obj::Other);
        it
    }

    pub fn alloc(&mut self, obj: Obj<'t>) -> ObjId {
        // Every object is charged to the budget: containers read element by element can
        // otherwise allocate without bound inside one statement.
        self.steps += 1;
        self.heap.push(obj);
        (self.heap.len() - 1) as ObjId
    }

    pub fn text(&self, node: Node<'_>) -> &'t str {
        &self.ctx.src[node.start_byte()..node.end_byte()]
    }

    pub fn exhausted(&self) -> bool {
        self.steps > self.budget
    }

    /// Collect the work joins did into the step count; true once the budget is spent, after
    /// which the scope's analysis stops (what it found so far is kept).
    pub fn out_of_budget(&mut self) -> bool {
        self.steps += take_join_work();
        self.exhausted()
    }

    /// Add values to slot `slot` of a container. Only what can matter (tensors, modules,
    /// parameters, containers) is kept, and at most `MAX_SEQ` values per slot.
    pub fn seq_insert(&mut self, seq: ObjId, slot: usize, vals: &Vals) {
        let keep: Vals = vals
            .iter()
            .copied()
            .filter(|v| {
                matches!(
                    self.heap[*v as usize],
                    Obj::Tensor(_)
                        | Obj::Module(_)
                        | Obj::Params { .. }
                        | Obj::Seq(_)
                        | Obj::Optimizer { .. }
                )
            })
            .collect();
        if let Obj::Seq(items) = &mut self.heap[seq as usize] {
            while items.len() <= slot {
                items.push(Vals::new());
            }
            for v in keep {
                if items[slot].len() >= MAX_SEQ {
                    break;
                }
                if !items[slot].contains(&v) {
                    items[slot].push(v);
                }
            }
        }
    }

    /// A copy of the state for another path, charged to the budget by its size.
    pub fn fork(&mut self) -> State {
        self.steps += 1
            + (self.state.env.len() + self.state.live.len() + self.state.clobbered.len()) as u64
                / 16;
        self.state.clone()
    }

    pub fn report(&mut self, finding: Finding) {
        self.findings
            .entry((finding.rule, finding.range))
            .or_insert(finding);
    }

    // ----------------------------------------------------------------- analysis entry points

    /// Run the module body, then every function and method on its own.
    pub fn run_module(&mut self, root: Node<'t>) {
        self.exec_block(root);
        self.globals = Rc::new(std::mem::take(&mut self.state.env));
        let mut defs = Vec::new();
        collect_functions(root, &mut defs);
        for def in defs {
            self.analyse_standalone(def);
        }
    }

    fn analyse_standalone(&mut self, def: Node<'t>) {
        // Each function gets a budget of its own, in proportion to its size.
        self.steps += take_join_work();
        self.total_steps += self.steps;
        self.steps = 0;
        self.budget = budget_for(def.end_position().row - def.start_position().row + 1);
        self.state = State::default();
        self.outer_envs.clear();
        self.frames = vec![Frame::new(true)];
        self.inlining = vec![def.id()];
        self.call_site = None;
        self.grad_enabled = !runs_without_grad(self, def);
        let class = enclosing_class(def);
        let name = def.field("name").map(|n| self.text(n)).unwrap_or("");
        let self_obj = class.map(|c| self.instance_for(c));
        let is_forward = self_obj.is_some_and(|o| self.is_module(o))
            && matches!(name, "forward" | "__call__" | "_forward" | "_forward_impl");
        let is_static = has_decorator(self, def, "staticmethod");
        let mut bound_self = false;
        if let Some(params) = def.field("parameters") {
            for p in named_children(params) {
                let Some((pname, default)) = param_name(self, p) else {
                    continue;
                };
                let obj = if let Some(s) = self_obj.filter(|_| !bound_self && !is_static) {
                    bound_self = true;
                    s
                } else if default.is_some_and(is_literal) || annotated_non_tensor(self, p) {
                    // `n=3`, `n: int`, `config: BertConfig`: not a tensor.
                    self.other
                } else if p.k() == "list_splat_pattern" || p.k() == "dictionary_splat_pattern" {
                    self.alloc(Obj::Unknown)
                } else {
                    let t = self.param_tensor(p, is_forward || annotated_tensor(self, p));
                    // Arguments of plain functions carry no grad unless a caller passes it.
                    if !self_obj.is_some_and(|o| self.is_module(o)) {
                        if let Obj::Tensor(tt) = &mut self.heap[t as usize] {
                            tt.grad = Tri::No;
                        }
                    }
                    t
                };
                self.state.env.insert(pname, smallvec![obj]);
            }
        }
        if let Some(body) = def.field("body") {
            self.exec_block(body);
        }
    }

    /// A function argument: a tensor that may require grad (a `forward` argument is one).
    pub fn param_tensor(&mut self, p: Node<'_>, known: bool) -> ObjId {
        let id = self.heap.len() as ObjId;
        self.alloc(Obj::Tensor(TensorObj::fresh(
            id,
            Tri::Maybe,
            known,
            TextRange::of(p),
        )))
    }

    /// One instance per class for analysing its methods on their own (`__init__` has run).
    fn instance_for(&mut self, class: Node<'t>) -> ObjId {
        if let Some(&o) = self.instances.get(&class.id()) {
            return o;
        }
        let cref = self.class_ref(class);
        let saved_state = std::mem::take(&mut self.state);
        let saved_frames = std::mem::replace(&mut self.frames, vec![Frame::new(false)]);
        let saved_inlining = std::mem::take(&mut self.inlining);
        let obj = self.instantiate(cref, &Args::default(), TextRange::of(class));
        self.state = saved_state;
        self.frames = saved_frames;
        self.inlining = saved_inlining;
        self.instances.insert(class.id(), obj);
        obj
    }

    // ----------------------------------------------------------------------------- statements

    pub fn exec_block(&mut self, block: Node<'t>) {
        if self.depth > MAX_DEPTH {
            return;
        }
        self.depth += 1;
        let mut cursor = block.walk();
        for stmt in block.named_children(&mut cursor) {
            if self.state.dead || self.out_of_budget() {
                break;
            }
            self.exec_stmt(stmt);
        }
        self.depth -= 1;
    }

    fn exec_stmt(&mut self, stmt: Node<'t>) {
        self.steps += 1;
        match stmt.k() {
            "expression_statement" => {
                for child in named_children(stmt) {
                    match child.k() {
                        "assignment" => self.exec_assign(child),
                        "augmented_assignment" => self.exec_aug_assign(child),
                        _ => {
                            let vals = self.eval(child);
                            // `torch.set_grad_enabled(False)` as a statement switches the mode.
                            for v in vals {
                                if let Obj::GradCtx(GradCtx::Set(on)) = self.heap[v as usize] {
                                    self.grad_enabled = on;
                                }
                            }
                        }
                    }
                }
            }
            "return_statement" => {
                let vals = match stmt.named_child(0) {
                    Some(e) => self.eval(e),
                    None => smallvec![self.other],
                };
                let standalone = self.frames.len() == 1 && self.frames[0].standalone;
                if standalone && self.grad_enabled {
                    self.check_graph(&vals, TextRange::of(stmt), true, false);
                }
                let frame = self.frames.last_mut().unwrap();
                for v in &vals {
                    if !frame.returns.contains(v) {
                        frame.returns.push(*v);
                    }
                }
                frame.ret_state.join(&self.state);
                self.state.dead = true;
            }
            "if_statement" => self.exec_if(stmt),
            "for_statement" => self.exec_for(stmt),
            "while_statement" => self.exec_while(stmt),
            "try_statement" => self.exec_try(stmt),
            "with_statement" => self.exec_with(stmt),
            "function_definition" => {
                if let Some(name) = stmt.field("name") {
                    let f = self.alloc(Obj::Func(stmt));
                    self.bind_name(name, smallvec![f], None);
                }
            }
            "class_definition" => {
                if let Some(name) = stmt.field("name") {
                    let cref = self.class_ref(stmt);
                    let c = self.alloc(Obj::Class(cref));
                    self.bind_name(name, smallvec![c], None);
                }
            }
            "decorated_definition" => {
                if let Some(def) = stmt.field("definition") {
                    self.exec_stmt(def);
                }
            }
            "import_statement" | "import_from_statement" => self.exec_import(stmt),
            "break_statement" | "continue_statement" => {
                let is_break = stmt.k() == "break_statement";
                if let Some(frame) = self.frames.last_mut() {
                    if let Some((breaks, conts)) = frame.loops.last_mut() {
                        if is_break {
                            breaks.join(&self.state);
                        } else {
                            conts.join(&self.state);
                        }
                    }
                }
                self.state.dead = true;
            }
            "raise_statement" => {
                for c in named_children(stmt) {
                    self.eval(c);
                }
                self.state.dead = true;
            }
            "match_statement" => {
                if let Some(subject) = stmt.field("subject") {
                    self.eval(subject);
                }
                let before = self.state.clone();
                let mut out = State::dead();
                if let Some(body) = stmt.field("body") {
                    for case in named_children(body) {
                        self.state = before.clone();
                        if let Some(cons) = case.field("consequence") {
                            self.exec_block(cons);
                        }
                        out.join(&self.state);
                    }
                }
                out.join(&before);
                self.state = out;
            }
            "block" => self.exec_block(stmt),
            "pass_statement"
            | "global_statement"
            | "nonlocal_statement"
            | "comment"
            | "future_import_statement" => {}
            _ => {
                for c in named_children(stmt) {
                    if c.k() != "block" {
                        self.eval(c);
                    }
                }
            }
        }
    }

    fn exec_if(&mut self, stmt: Node<'t>) {
        let cond = stmt
            .field("condition")
            .map(|c| self.eval(c))
            .unwrap_or_default();
        // A condition known to be true or false takes one branch only.
        if cond.as_slice() == [self.true_obj] {
            if let Some(cons) = stmt.field("consequence") {
                self.exec_block(cons);
            }
            return;
        }
        if cond.as_slice() == [self.false_obj] {
            let mut cursor = stmt.walk();
            let alts: Vec<Node<'t>> = stmt
                .children_by_field_name("alternative", &mut cursor)
                .collect();
            self.exec_alternatives(&alts);
            return;
        }
        let before = self.fork();
        if let Some(cons) = stmt.field("consequence") {
            self.exec_block(cons);
        }
        let mut out = std::mem::take(&mut self.state);
        let mut has_else = false;
        let mut cursor = stmt.walk();
        let mut running = before;
        for alt in stmt.children_by_field_name("alternative", &mut cursor) {
            self.steps += 1;
            self.state = running.clone();
            match alt.k() {
                "elif_clause" => {
                    if let Some(cond) = alt.field("condition") {
                        self.eval(cond);
                    }
                    running = self.state.clone();
                    if let Some(cons) = alt.field("consequence") {
                        self.exec_block(cons);
                    }
                }
                _ => {
                    has_else = true;
                    if let Some(body) = alt.field("body") {
                        self.exec_block(body);
                    }
                }
            }
            out.join(&self.state);
        }
        if !has_else {
            out.join(&running);
        }
        self.state = out;
    }

    /// The `elif`/`else` clauses of an `if` whose own condition is false.
    fn exec_alternatives(&mut self, alts: &[Node<'t>]) {
        let Some((first, rest)) = alts.split_first() else {
            return;
        };
        if first.k() != "elif_clause" {
            if let Some(b) = first.field("body") {
                self.exec_block(b);
            }
            return;
        }
        let cond = first
            .field("condition")
            .map(|c| self.eval(c))
            .unwrap_or_default();
        if cond.as_slice() == [self.false_obj] {
            return self.exec_alternatives(rest);
        }
        let before = self.fork();
        if let Some(cons) = first.field("consequence") {
            self.exec_block(cons);
        }
        if cond.as_slice() == [self.true_obj] {
            return;
        }
        let taken = std::mem::replace(&mut self.state, before);
        self.exec_alternatives(rest);
        self.state.join(&taken);
    }

    fn run_loop(&mut self, mut body: impl FnMut(&mut Self)) {
        let entry = self.fork();
        let mut exit = entry.clone();
        let runs = if self.exhausted() { 1 } else { LOOP_RUNS };
        for _ in 0..runs {
            self.frames
                .last_mut()
                .unwrap()
                .loops
                .push((State::dead(), State::dead()));
            body(self);
            let (breaks, conts) = self.frames.last_mut().unwrap().loops.pop().unwrap();
            self.state.join(&conts);
            exit.join(&self.state);
            exit.join(&breaks);
            // The next iteration runs after this one (not after zero iterations).
            if self.state.dead {
                break;
            }
        }
        self.state = exit;
    }

    fn exec_for(&mut self, stmt: Node<'t>) {
        let iter = match stmt.field("right") {
            Some(r) => self.eval(r),
            None => smallvec![self.unknown],
        };
        let left = stmt.field("left");
        let body = stmt.field("body");
        if let Some(children) = self.unrollable(&iter) {
            // `for layer in self.layers:` runs each child in order.
            let mut exit = self.fork();
            self.frames
                .last_mut()
                .unwrap()
                .loops
                .push((State::dead(), State::dead()));
            for child in children {
                if self.state.dead {
                    break;
                }
                if let Some(l) = left {
                    self.bind_target(l, smallvec![child], None);
                }
                if let Some(b) = body {
                    self.exec_block(b);
                }
                let frame = self.frames.last_mut().unwrap();
                let conts =
                    std::mem::replace(&mut frame.loops.last_mut().unwrap().1, State::dead());
                self.state.join(&conts);
            }
            let (breaks, _) = self.frames.last_mut().unwrap().loops.pop().unwrap();
            exit.join(&self.state);
            exit.join(&breaks);
            self.state = exit;
            return;
        }
        let elems = self.elements(&iter);
        self.run_loop(|it| {
            if let Some(l) = left {
                it.bind_target(l, elems.clone(), None);
            }
            if let Some(b) = body {
                it.exec_block(b);
            }
        });
        if let Some(alt) = stmt.field("alternative") {
            if let Some(b) = alt.field("body") {
                self.exec_block(b);
            }
        }
    }

    fn exec_while(&mut self, stmt: Node<'t>) {
        let cond = stmt.field("condition");
        let body = stmt.field("body");
        self.run_loop(|it| {
            if let Some(c) = cond {
                it.eval(c);
            }
            if let Some(b) = body {
                it.exec_block(b);
            }
        });
        if let Some(alt) = stmt.field("alternative") {
            if let Some(b) = alt.field("body") {
                self.exec_block(b);
            }
        }
    }

    fn exec_try(&mut self, stmt: Node<'t>) {
        let before = self.fork();
        if let Some(body) = stmt.field("body") {
            self.exec_block(body);
        }
        let after_body = self.fork();
        let mut out = State::dead();
        let mut finally = None;
        for clause in named_children(stmt) {
            match clause.k() {
                "except_clause" | "except_group_clause" => {
                    // The handler may start anywhere in the body: from before it or after it.
                    let mut start = before.clone();
                    start.join(&after_body);
                    self.state = start;
                    for c in named_children(clause) {
                        if c.k() == "block" {
                            self.exec_block(c);
                        } else if c.k() == "as_pattern" {
                            if let Some(alias) = c.field("alias") {
                                let o = self.alloc(Obj::Other);
                                self.bind_target(alias, smallvec![o], None);
                            }
                        }
                    }
                    out.join(&self.state);
                }
                "else_clause" => {
                    self.state = after_body.clone();
                    if let Some(b) = clause.field("body") {
                        self.exec_block(b);
                    }
                    out.join(&self.state);
                }
                "finally_clause" => finally = Some(clause),
                _ => {}
            }
        }
        if !named_children(stmt).iter().any(|c| c.k() == "else_clause") {
            out.join(&after_body);
        }
        self.state = out;
        if let Some(f) = finally {
            let was_dead = self.state.dead;
            if was_dead {
                self.state = after_body;
            }
            for c in named_children(f) {
                if c.k() == "block" {
                    self.exec_block(c);
                }
            }
            self.state.dead |= was_dead;
        }
    }

    fn exec_with(&mut self, stmt: Node<'t>) {
        let saved_mode = self.grad_enabled;
        let mut cursor = stmt.walk();
        for clause in stmt.named_children(&mut cursor) {
            if clause.k() != "with_clause" {
                continue;
            }
            for item in named_children(clause) {
                let Some(value) = item.field("value") else {
                    continue;
                };
                let (expr, alias) = if value.k() == "as_pattern" {
                    (value.named_child(0).unwrap_or(value), value.field("alias"))
                } else {
                    (value, None)
                };
                let vals = self.eval(expr);
                for v in &vals {
                    match self.heap[*v as usize] {
                        Obj::GradCtx(GradCtx::NoGrad) => self.grad_enabled = false,
                        Obj::GradCtx(GradCtx::EnableGrad) => self.grad_enabled = true,
                        Obj::GradCtx(GradCtx::Set(on)) => self.grad_enabled = on,
                        _ => {}
                    }
                }
                if let Some(a) = alias {
                    let target = if a.k() == "as_pattern_target" {
                        a.named_child(0).unwrap_or(a)
                    } else {
                        a
                    };
                    let o = self.alloc(Obj::Unknown);
                    self.bind_target(target, smallvec![o], None);
                }
            }
        }
        if let Some(body) = stmt.field("body") {
            self.exec_block(body);
        }
        self.grad_enabled = saved_mode;
    }

    fn exec_import(&mut self, stmt: Node<'t>) {
        if stmt.k() == "import_statement" {
            for name in named_children(stmt) {
                match name.k() {
                    "dotted_name" => {
                        // `import torch.nn` binds `torch`.
                        let full = self.text(name);
                        let first = full.split('.').next().unwrap_or(full).trim();
                        let p = self.alloc(Obj::Path(first.into()));
                        self.state.env.insert(first.into(), smallvec![p]);
                    }
                    "aliased_import" => {
                        let (Some(n), Some(a)) = (name.field("name"), name.field("alias")) else {
                            continue;
                        };
                        let path: String = self.text(n).split_whitespace().collect();
                        let p = self.alloc(Obj::Path(path.into()));
                        self.bind_name(a, smallvec![p], None);
                    }
                    _ => {}
                }
            }
            return;
        }
        let module: String = stmt
            .field("module_name")
            .map(|m| self.text(m).split_whitespace().collect())
            .unwrap_or_default();
        let mut cursor = stmt.walk();
        for name in stmt.children_by_field_name("name", &mut cursor) {
            let (n, alias) = match name.k() {
                "aliased_import" => (name.field("name"), name.field("alias")),
                _ => (Some(name), Some(name)),
            };
            let (Some(n), Some(alias)) = (n, alias) else {
                continue;
            };
            let path = format!("{module}.{}", self.text(n));
            let p = self.alloc(Obj::Path(path.into()));
            self.bind_name(alias, smallvec![p], None);
        }
    }

    // ----------------------------------------------------------------------------- assignment

    fn exec_assign(&mut self, stmt: Node<'t>) {
        let Some(right) = stmt.field("right") else {
            // An annotation without a value (`x: Tensor`).
            return;
        };
        let left = stmt.field("left");
        let target_name = left
            .filter(|l| l.k() == "identifier")
            .map(|l| Name::from(self.text(l)));
        let saved = self.assign_rhs.take();
        if let Some(name) = &target_name {
            self.assign_rhs = Some((TextRange::of(right), name.clone()));
        }
        let vals = if right.k() == "assignment" {
            // `a = b = expr`
            self.exec_assign(right);
            right
                .field("left")
                .map(|l| self.eval(l))
                .unwrap_or_else(|| smallvec![self.unknown])
        } else {
            self.eval(right)
        };
        self.assign_rhs = saved;
        if let Some(l) = left {
            self.bind_target(l, vals, Some(stmt));
        }
    }

    /// Bind an assignment target (name, attribute, subscript or pattern) to values.
    pub fn bind_target(&mut self, target: Node<'t>, vals: Vals, stmt: Option<Node<'t>>) {
        match target.k() {
            "identifier" => self.bind_name(target, vals, stmt),
            "attribute" => self.bind_attribute(target, vals, stmt),
            "subscript" => {
                let Some(obj) = target.field("value") else {
                    return;
                };
                let base = self.eval(obj);
                let index = self.index_of(target);
                let mut tensors = Vals::new();
                let mut seq_add = Vals::new();
                for b in base {
                    match &mut self.heap[b as usize] {
                        // `xs[i] = v` is a tensor write only on what is known to be a tensor
                        // (lists and dicts are written the same way).
                        Obj::Tensor(t) if index != Index::Key && t.known => tensors.push(b),
                        Obj::Seq(_) => seq_add.push(b),
                        _ => {}
                    }
                }
                for s in seq_add {
                    // `xs[2] = v` replaces that position; other keys add a position.
                    let Obj::Seq(items) = &mut self.heap[s as usize] else {
                        continue;
                    };
                    match index {
                        Index::At(i) if i >= 0 && (i as usize) < items.len() => {
                            items[i as usize] = if vals.len() > MAX_SEQ {
                                smallvec![UNKNOWN]
                            } else {
                                vals.clone()
                            }
                        }
                        _ => {
                            let slot = items.len().min(63);
                            self.seq_insert(s, slot, &vals);
                        }
                    }
                }
                if !tensors.is_empty() {
                    let site = stmt.unwrap_or(target);
                    let through = obj_name(self, obj);
                    self.write(
                        &tensors,
                        WriteKind::Subscript,
                        TextRange::of(site),
                        TextRange::of(site),
                        through.clone(),
                        through,
                        Some(&vals),
                        true,
                    );
                }
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list"
            | "expression_list" => {
                let targets = named_children(target);
                let parts = self.unpack(&vals, targets.len());
                for (t, v) in targets.into_iter().zip(parts) {
                    self.bind_target(t, v, None);
                }
            }
            "parenthesized_expression" => {
                if let Some(inner) = target.named_child(0) {
                    self.bind_target(inner, vals, stmt);
                }
            }
            "list_splat_pattern" | "list_splat" => {
                if let Some(inner) = target.named_child(0) {
                    let s = self.alloc(Obj::Seq(vec![vals]));
                    self.bind_target(inner, smallvec![s], None);
                }
            }
            _ => {}
        }
    }

    pub fn bind_name(&mut self, name_node: Node<'t>, vals: Vals, stmt: Option<Node<'t>>) {
        let name: Name = self.text(name_node).into();
        if let Some(stmt) = stmt {
            self.check_rebind(&name, name_node, &vals, stmt);
            self.state
                .bound_at
                .insert(name.clone(), TextRange::of(stmt));
        } else {
            self.state.bound_at.remove(&name);
        }
        self.state.stale.remove(&name);
        self.state.env.insert(name, vals);
    }

    fn bind_attribute(&mut self, target: Node<'t>, vals: Vals, stmt: Option<Node<'t>>) {
        let (Some(obj), Some(attr)) = (target.field("object"), target.field("attribute")) else {
            return;
        };
        let owners = self.eval(obj);
        let attr: Name = self.text(attr).into();
        for o in owners {
            match &self.heap[o as usize] {
                Obj::Module(m) => {
                    let old = m.attrs.get(&attr).cloned().unwrap_or_default();
                    if let Some(stmt) = stmt {
                        self.check_rebind_objs(&old, &vals, target, stmt, &attr);
                    }
                    if let Obj::Module(m) = &mut self.heap[o as usize] {
                        m.attrs.insert(attr.clone(), vals.clone());
                    }
                }
                Obj::Tensor(t) => match &*attr {
                    "data" => {
                        let site = stmt.map(TextRange::of).unwrap_or(TextRange::of(target));
                        let storage = t.storage;
                        // Replacing `.data` writes new contents without a version bump.
                        let alias = self.data_alias(o, TextRange::of(target));
                        let _ = storage;
                        self.write(
                            &smallvec![alias],
                            WriteKind::DataAssign,
                            site,
                            site,
                            None,
                            None,
                            Some(&vals),
                            false,
                        );
                    }
                    "requires_grad" => {
                        let on = stmt
                            .and_then(|s| s.field("right"))
                            .map(|r| self.text(r) != "False")
                            .unwrap_or(true);
                        if let Obj::Tensor(t) = &mut self.heap[o as usize] {
                            t.grad = if on { Tri::Yes } else { Tri::No };
                            t.leaf = on && t.node.is_none();
                        }
                    }
                    _ => {}
                },
                Obj::Unknown | Obj::Path(_) => {
                    let v = vals.first().copied().unwrap_or(self.unknown);
                    self.loose_attrs.insert((o, attr.clone()), v);
                }
                _ => {}
            }
        }
    }

    fn exec_aug_assign(&mut self, stmt: Node<'t>) {
        let (Some(left), Some(right)) = (stmt.field("left"), stmt.field("right")) else {
            return;
        };
        let value = self.eval(right);
        let target = self.eval(left);
        let op = stmt.field("operator").map(|o| self.text(o)).unwrap_or("+=");
        let tensors: Vals = target
            .iter()
            .copied()
            .filter(|t| self.maybe_tensor(*t))
            .collect();
        if tensors.is_empty() {
            // Numbers, strings, lists: `+=` rebinds or mutates something that is no tensor.
            let result = self.binary(op.trim_end_matches('='), &target, &value, stmt);
            if left.k() == "identifier" {
                self.bind_name(left, result, None);
            }
            return;
        }
        let through = obj_name(self, left);
        let is_sub = left.k() == "subscript";
        let kind = if is_sub {
            WriteKind::Subscript
        } else {
            WriteKind::AugAssign
        };
        self.write(
            &tensors,
            kind,
            TextRange::of(stmt),
            TextRange::of(stmt),
            through.clone(),
            through,
            Some(&value),
            true,
        );
        // The in-place op itself may save tensors (`x *= w` saves `w` when `x` needs grad).
        let name = binary_op_name(op.trim_end_matches('='));
        if let Some(name) = name {
            self.inplace_saves_by_name(&tensors, name, Some(&value), stmt);
        }
    }

    // ---------------------------------------------------------------------- function calls

    /// Execute a local function or method body with these arguments.
    pub fn inline(
        &mut self,
        def: Node<'t>,
        self_obj: Option<ObjId>,
        args: &Args<'t>,
        call: TextRange,
    ) -> Vals {
        if self.inlining.contains(&def.id())
            || self.inlining.len() >= MAX_INLINE
            || self.exhausted()
        {
            return self.opaque_call(args, call);
        }
        let mut env = Env::default();
        let is_lambda = def.k() == "lambda";
        let mut positional = args.positional.iter();
        let mut self_pending = self_obj;
        if let Some(params) = def.field("parameters") {
            for p in named_children(params) {
                let Some((pname, default)) = param_name(self, p) else {
                    continue;
                };
                let vals = if let Some(s) = self_pending.take() {
                    smallvec![s]
                } else if p.k() == "list_splat_pattern" {
                    let rest: Vec<Vals> = positional.by_ref().map(|(v, _)| v.clone()).collect();
                    smallvec![self.alloc(Obj::Seq(rest))]
                } else if p.k() == "dictionary_splat_pattern" {
                    smallvec![self.alloc(Obj::Unknown)]
                } else if let Some((v, _)) = args.keyword(&pname) {
                    v.clone()
                } else if let Some((v, _)) = positional.next() {
                    v.clone()
                } else if let Some(d) = default {
                    self.eval(d)
                } else {
                    smallvec![self.alloc(Obj::Unknown)]
                };
                env.insert(pname, vals);
            }
        }
        let saved_env = std::mem::replace(&mut self.state.env, env);
        let saved_bound = std::mem::take(&mut self.state.bound_at);
        let saved_stale = std::mem::take(&mut self.state.stale);
        self.outer_envs.push(saved_env);
        let saved_mode = self.grad_enabled;
        if !is_lambda && runs_without_grad(self, def) {
            self.grad_enabled = false;
        }
        let saved_site = self.call_site;
        if self.call_site.is_none() {
            self.call_site = Some(call);
        }
        self.inlining.push(def.id());
        self.frames.push(Frame::new(false));
        let saved_assign = self.assign_rhs.take();
        let first_write = self.writes.len();
        if let Some(body) = def.field("body") {
            if is_lambda {
                let v = self.eval(body);
                let frame = self.frames.last_mut().unwrap();
                frame.returns.extend(v);
            } else {
                self.exec_block(body);
            }
        }
        self.assign_rhs = saved_assign;
        let frame = self.frames.pop().unwrap();
        self.inlining.pop();
        self.call_site = saved_site;
        self.grad_enabled = saved_mode;
        self.state.join(&frame.ret_state);
        self.state.dead = false;
        self.state.env = self.outer_envs.pop().unwrap();
        self.state.bound_at = saved_bound;
        self.state.stale = saved_stale;
        // `y = helper(x)` where the helper wrote `x` in place: other names of `x` are stale.
        if let Some((rhs, target)) = &self.assign_rhs {
            if *rhs == call {
                for w in first_write..self.writes.len() {
                    let t = self.writes[w].target;
                    if !matches!(&self.heap[t as usize], Obj::Tensor(tt) if tt.known && tt.counter)
                    {
                        continue;
                    }
                    let names: Vec<Name> = self
                        .state
                        .env
                        .iter()
                        .filter(|(n, vs)| vs.contains(&t) && *n != target)
                        .map(|(n, _)| n.clone())
                        .collect();
                    for n in names {
                        let e = self.state.stale.entry(n).or_default();
                        if !e.contains(&(w as WriteId)) {
                            e.push(w as WriteId);
                        }
                    }
                }
            }
        }
        let generator = *self
            .generators
            .entry(def.id())
            .or_insert_with(|| is_generator(def));
        if frame.returns.is_empty() || generator {
            if generator {
                return self.opaque_call(args, call);
            }
            return smallvec![self.other];
        }
        frame.returns
    }

    pub fn class_ref(&mut self, class: Node<'t>) -> ClassRef<'t> {
        let name: Name = class
            .field("name")
            .map(|n| self.text(n))
            .unwrap_or("")
            .into();
        let mut methods = FxHashMap::default();
        if let Some(body) = class.field("body") {
            for stmt in named_children(body) {
                let def = if stmt.k() == "decorated_definition" {
                    stmt.field("definition")
                } else {
                    Some(stmt)
                };
                if let Some(def) = def.filter(|d| d.k() == "function_definition") {
                    if let Some(n) = def.field("name") {
                        methods.insert(Name::from(self.text(n)), def);
                    }
                }
            }
        }
        let mut base_classes = Vec::new();
        if let Some(supers) = class.field("superclasses") {
            for b in named_children(supers) {
                if b.k() != "keyword_argument" {
                    base_classes.extend(self.eval(b));
                }
            }
        }
        ClassRef {
            name,
            methods: Rc::new(methods),
            base_classes,
        }
    }

    /// Find a method on a local class or its local bases.
    pub fn find_method(&self, class: &ClassRef<'t>, name: &str) -> Option<Node<'t>> {
        if let Some(m) = class.methods.get(name) {
            return Some(*m);
        }
        for b in &class.base_classes {
            if let Obj::Class(c) = &self.heap[*b as usize] {
                if let Some(m) = self.find_method(c, name) {
                    return Some(m);
                }
            }
        }
        None
    }

    /// Whether a local class derives (directly or through local classes) from `torch.nn.Module`.
    pub fn class_is_module(&self, class: &ClassRef<'t>) -> bool {
        class
            .base_classes
            .iter()
            .any(|b| match &self.heap[*b as usize] {
                Obj::Path(p) => {
                    p.starts_with("torch.nn") || p.ends_with("Module") || p.contains("nn.")
                }
                Obj::Class(c) => self.class_is_module(c),
                _ => false,
            })
            || class.methods.contains_key("forward")
    }

    pub fn instantiate(&mut self, class: ClassRef<'t>, args: &Args<'t>, call: TextRange) -> ObjId {
        let module = ModuleObj {
            class: class.name.clone(),
            local: Some(class.clone()),
            inplace: None,
            attrs: FxHashMap::default(),
            children: Vec::new(),
            origin: call,
            hooks: Vec::new(),
        };
        let obj = self.alloc(Obj::Module(module));
        if let Some(init) = self.find_method(&class, "__init__") {
            self.inline(init, Some(obj), args, call);
        }
        obj
    }

    // ---------------------------------------------------------------------------- expressions

    pub fn eval(&mut self, node: Node<'t>) -> Vals {
        if self.depth > MAX_DEPTH || self.exhausted() {
            return smallvec![self.unknown];
        }
        self.depth += 1;
        let v = self.eval_inner(node);
        self.depth -= 1;
        self.bounded(v)
    }

    /// A value set of more than [`MAX_VALUES`] alternatives is unknown: nested containers read
    /// element by element would otherwise multiply sets (and allocations) without bound.
    pub fn bounded(&self, v: Vals) -> Vals {
        if v.len() > MAX_VALUES {
            smallvec![self.unknown]
        } else {
            v
        }
    }

    fn eval_inner(&mut self, node: Node<'t>) -> Vals {
        match node.k() {
            "identifier" => self.lookup(node),
            "attribute" => self.eval_attribute(node),
            "call" => self.eval_call(node),
            "subscript" => self.eval_subscript(node),
            "binary_operator" => {
                let (Some(l), Some(r)) = (node.field("left"), node.field("right")) else {
                    return smallvec![self.unknown];
                };
                let a = self.eval(l);
                let b = self.eval(r);
                let op = node.field("operator").map(|o| self.text(o)).unwrap_or("+");
                self.binary(op, &a, &b, node)
            }
            "unary_operator" => {
                let a = match node.field("argument") {
                    Some(x) => self.eval(x),
                    None => return smallvec![self.other],
                };
                if a.iter().any(|v| self.maybe_tensor(*v)) {
                    let t = self.apply_op("neg", "-", &[a], node, false);
                    smallvec![t]
                } else {
                    smallvec![self.other]
                }
            }
            "parenthesized_expression" => match node.named_child(0) {
                Some(inner) => self.eval(inner),
                None => smallvec![self.other],
            },
            "tuple" | "list" | "set" | "expression_list" => {
                let mut items = Vec::new();
                for c in named_children(node) {
                    if c.k() == "list_splat" {
                        let inner = c.named_child(0).map(|i| self.eval(i)).unwrap_or_default();
                        items.push(self.elements(&inner));
                    } else if c.k() != "comment" {
                        items.push(self.eval(c));
                    }
                }
                smallvec![self.alloc(Obj::Seq(items))]
            }
            "dictionary" => {
                let mut items = Vec::new();
                for pair in named_children(node) {
                    if pair.k() == "pair" {
                        if let Some(k) = pair.field("key") {
                            self.eval(k);
                        }
                        if let Some(v) = pair.field("value") {
                            items.push(self.eval(v));
                        }
                    } else if pair.k() != "comment" {
                        items.push(self.eval(pair));
                    }
                }
                smallvec![self.alloc(Obj::Seq(items))]
            }
            "list_comprehension"
            | "set_comprehension"
            | "generator_expression"
            | "dictionary_comprehension" => self.eval_comprehension(node),
            "lambda" => smallvec![self.alloc(Obj::Func(node))],
            "conditional_expression" => {
                let parts = named_children(node);
                let mut out = Vals::new();
                for (i, p) in parts.iter().enumerate() {
                    let v = self.eval(*p);
                    if i != 1 {
                        out.extend(v);
                    }
                }
                out
            }
            "boolean_operator" => {
                let (Some(l), Some(r)) = (node.field("left"), node.field("right")) else {
                    return smallvec![self.other];
                };
                let is_and = node.field("operator").is_some_and(|o| o.k() == "and");
                let a = self.eval(l);
                let b = self.eval(r);
                let (t, f) = ([self.true_obj], [self.false_obj]);
                // Known truth values decide; else either operand may be the result.
                match (is_and, a.as_slice(), b.as_slice()) {
                    (true, x, _) if x == f => a,
                    (true, x, _) if x == t => b,
                    (true, _, y) if y == f => b,
                    (false, x, _) if x == t => a,
                    (false, x, _) if x == f => b,
                    (false, _, y) if y == t => b,
                    _ => {
                        let mut out = a;
                        out.extend(b);
                        out.retain(|v| *v != self.true_obj && *v != self.false_obj);
                        if out.is_empty() {
                            out.push(self.other);
                        }
                        out
                    }
                }
            }
            "comparison_operator" => self.eval_comparison(node),
            "not_operator" => {
                let v = node
                    .field("argument")
                    .map(|a| self.eval(a))
                    .unwrap_or_default();
                if v.as_slice() == [self.true_obj] {
                    smallvec![self.false_obj]
                } else if v.as_slice() == [self.false_obj] {
                    smallvec![self.true_obj]
                } else {
                    smallvec![self.other]
                }
            }
            "named_expression" => {
                let v = node
                    .field("value")
                    .map(|v| self.eval(v))
                    .unwrap_or_default();
                if let Some(n) = node.field("name") {
                    self.bind_name(n, v.clone(), None);
                }
                v
            }
            "await" | "yield" => {
                let v = node.named_child(0).map(|c| self.eval(c));
                v.unwrap_or_else(|| smallvec![self.unknown])
            }
            "true" => smallvec![self.true_obj],
            "false" => smallvec![self.false_obj],
            "none" => smallvec![self.none_obj],
            "string" | "concatenated_string" | "integer" | "float" | "ellipsis" => {
                smallvec![self.other]
            }
            "keyword_argument" => node
                .field("value")
                .map(|v| self.eval(v))
                .unwrap_or_default(),
            _ => {
                for c in named_children(node) {
                    self.eval(c);
                }
                smallvec![self.alloc(Obj::Unknown)]
            }
        }
    }

    /// `x is None` / `x is not None` on values we know; other comparisons are unknown.
    fn eval_comparison(&mut self, node: Node<'t>) -> Vals {
        let parts: Vec<Vals> = named_children(node)
            .into_iter()
            .map(|p| self.eval(p))
            .collect();
        let mut cursor = node.walk();
        let ops: Vec<&str> = node
            .children(&mut cursor)
            .filter(|c| !c.is_named())
            .map(|c| c.k())
            .collect();
        if let ([a, b], [op]) = (parts.as_slice(), ops.as_slice()) {
            if matches!(*op, "is" | "is not") && b.as_slice() == [self.none_obj] && !a.is_empty() {
                let known = |v: &ObjId| {
                    matches!(
                        self.heap[*v as usize],
                        Obj::Module(_)
                            | Obj::Tensor(_)
                            | Obj::Optimizer { .. }
                            | Obj::Func(_)
                            | Obj::Class(_)
                    )
                };
                let is_none = if a.iter().all(|v| *v == self.none_obj) {
                    Some(true)
                } else if a.iter().all(known) {
                    Some(false)
                } else {
                    None
                };
                if let Some(n) = is_none {
                    let truth = if *op == "is" { n } else { !n };
                    return smallvec![if truth { self.true_obj } else { self.false_obj }];
                }
            }
        }
        smallvec![self.other]
    }

    fn eval_comprehension(&mut self, node: Node<'t>) -> Vals {
        self.steps += 1 + self.state.env.len() as u64 / 16;
        let saved_env = self.state.env.clone();
        let mut body = None;
        for c in named_children(node) {
            match c.k() {
                "for_in_clause" => {
                    let iter = c.field("right").map(|r| self.eval(r)).unwrap_or_default();
                    let elems = self.elements(&iter);
                    if let Some(l) = c.field("left") {
                        self.bind_target(l, elems, None);
                    }
                }
                "if_clause" => {
                    for x in named_children(c) {
                        self.eval(x);
                    }
                }
                _ => body = Some(c),
            }
        }
        let result = match body {
            Some(b) if b.k() == "pair" => {
                b.field("value").map(|v| self.eval(v)).unwrap_or_default()
            }
            Some(b) => self.eval(b),
            None => Vals::new(),
        };
        self.state.env = saved_env;
        smallvec![self.alloc(Obj::Seq(vec![result]))]
    }

    fn lookup(&mut self, node: Node<'t>) -> Vals {
        let name = self.text(node);
        if self.state.stale.contains_key(name) && reads_value(self, node) {
            let writes = self.state.stale.remove(name).unwrap_or_default();
            self.report_stale_read(name, &writes, TextRange::of(node));
        }
        if let Some(v) = self.state.env.get(name) {
            let v = v.clone();
            if !self.state.orphaned.is_empty() {
                for o in &v {
                    if let Some(fs) = self.state.orphaned.remove(o) {
                        for f in fs {
                            self.report(f);
                        }
                    }
                }
            }
            return v;
        }
        for env in self.outer_envs.iter().take(1) {
            if let Some(v) = env.get(name) {
                return v.clone();
            }
        }
        if let Some(v) = self.globals.get(name) {
            return v.clone();
        }
        match name {
            "True" => smallvec![self.true_obj],
            "False" => smallvec![self.false_obj],
            "None" => smallvec![self.none_obj],
            _ => smallvec![self.alloc(Obj::Path(format!("builtins.{name}").into()))],
        }
    }

    fn eval_attribute(&mut self, node: Node<'t>) -> Vals {
        let (Some(obj), Some(attr)) = (node.field("object"), node.field("attribute")) else {
            return smallvec![self.unknown];
        };
        let owners = self.eval(obj);
        let attr = self.text(attr);
        let mut out = Vals::new();
        for o in owners {
            let v = self.attribute_of(o, attr, node);
            for x in v {
                if !out.contains(&x) {
                    out.push(x);
                }
            }
        }
        out
    }

    fn eval_subscript(&mut self, node: Node<'t>) -> Vals {
        let Some(value) = node.field("value") else {
            return smallvec![self.unknown];
        };
        let base = self.eval(value);
        let index = self.index_of(node);
        let index_literal = match index {
            Index::At(i) => Some(i),
            _ => None,
        };
        let mut out = Vals::new();
        for b in base {
            if out.len() > MAX_VALUES {
                return smallvec![self.unknown];
            }
            match &self.heap[b as usize] {
                // A string key means a dict (or a mapping-like output), never tensor indexing.
                Obj::Tensor(_) if index == Index::Key => out.push(self.alloc(Obj::Unknown)),
                Obj::Tensor(_) => out.push(self.view_of(b, TextRange::of(node))),
                Obj::Seq(items) => {
                    let items = items.clone();
                    self.steps += items.iter().map(|i| i.len() as u64).sum::<u64>() / 16;
                    let n = items.len() as i64;
                    let resolve = |i: i64| {
                        if i < 0 {
                            (n + i).max(0) as usize
                        } else {
                            i as usize
                        }
                    };
                    match index {
                        Index::At(i) if items.len() > 1 && items.get(resolve(i)).is_some() => {
                            out.extend(items[resolve(i)].iter().copied())
                        }
                        Index::Range(lo, hi) => {
                            let lo = lo.map(resolve).unwrap_or(0).min(items.len());
                            let hi = hi
                                .map(resolve)
                                .unwrap_or(items.len())
                                .clamp(lo, items.len());
                            out.push(self.alloc(Obj::Seq(items[lo..hi].to_vec())));
                        }
                        _ => {
                            // An element we cannot pin down (a comprehension's one slot stands for
                            // all its elements): a stand-in with the history but its own storage,
                            // so different elements never look like aliases.
                            for v in items.into_iter().flatten() {
                                if out.len() > MAX_VALUES {
                                    return smallvec![self.unknown];
                                }
                                match &self.heap[v as usize] {
                                    Obj::Tensor(t) => {
                                        let t = t.sibling(self.heap.len() as ObjId);
                                        out.push(self.alloc(Obj::Tensor(t)));
                                    }
                                    _ => out.push(v),
                                }
                            }
                        }
                    }
                }
                Obj::Module(m) if !m.children.is_empty() => {
                    let ch = m.children.clone();
                    match index_literal
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| ch.get(i))
                    {
                        Some(c) => out.push(*c),
                        None => out.extend(ch),
                    }
                }
                Obj::Params { tensors, .. } => out.extend(tensors.clone()),
                Obj::Other => out.push(self.other),
                _ => out.push(self.alloc(Obj::Unknown)),
            }
        }
        if out.is_empty() {
            out.push(self.unknown);
        }
        out
    }

    /// What a subscript indexes with: `[2]`, `[-1]`, `[1:]`, `["key"]`, or anything else.
    pub fn index_of(&mut self, node: Node<'t>) -> Index {
        let mut cursor = node.walk();
        let idx: Vec<Node<'t>> = node
            .children_by_field_name("subscript", &mut cursor)
            .collect();
        for i in &idx {
            self.eval(*i);
        }
        let [one] = idx.as_slice() else {
            return Index::Other;
        };
        let int = |n: Node<'_>| self.text(n).replace(' ', "").parse::<i64>().ok();
        match one.k() {
            "integer" | "unary_operator" => int(*one).map(Index::At).unwrap_or(Index::Other),
            "string" | "concatenated_string" => Index::Key,
            "slice" => {
                let parts = named_children(*one);
                let text = self.text(*one);
                let colon = text
                    .find(':')
                    .map(|c| one.start_byte() + c)
                    .unwrap_or(usize::MAX);
                let mut lo = None;
                let mut hi = None;
                for p in &parts {
                    let v = int(*p);
                    if v.is_none() {
                        return Index::Other;
                    }
                    if p.end_byte() <= colon {
                        lo = v;
                    } else if hi.is_none() {
                        hi = v;
                    }
                }
                if text.matches(':').count() > 1 {
                    return Index::Other;
                }
                Index::Range(lo, hi)
            }
            _ => Index::Other,
        }
    }

    /// The values a `for` loop over `vals` binds.
    pub fn elements(&mut self, vals: &Vals) -> Vals {
        let mut out = Vals::new();
        for v in vals {
            if out.len() > MAX_VALUES {
                return smallvec![self.unknown];
            }
            match &self.heap[*v as usize] {
                Obj::Seq(items) => {
                    for x in items.iter().flatten() {
                        if !out.contains(x) {
                            out.push(*x);
                        }
                    }
                }
                Obj::Params { tensors, .. } => out.extend(tensors.iter().copied()),
                Obj::Module(m) => out.extend(m.children.iter().copied()),
                Obj::Tensor(_) => {
                    let r = self.heap_origin(*v);
                    out.push(self.view_of(*v, r));
                }
                Obj::Other => out.push(self.other),
                _ => out.push(self.alloc(Obj::Unknown)),
            }
        }
        if out.is_empty() {
            out.push(self.unknown);
        }
        out
    }

    /// The children to run a loop over one by one: a single `ModuleList`/`Sequential`, or a
    /// literal list of modules, of at most 32 entries.
    fn unrollable(&self, iter: &Vals) -> Option<Vec<ObjId>> {
        let [one] = iter.as_slice() else { return None };
        let children: Vec<ObjId> = match &self.heap[*one as usize] {
            Obj::Module(m) if !m.children.is_empty() => m.children.clone(),
            Obj::Seq(items) if !items.is_empty() && items.iter().all(|i| i.len() == 1) => {
                items.iter().map(|i| i[0]).collect()
            }
            _ => return None,
        };
        let modules = children
            .iter()
            .all(|c| matches!(self.heap[*c as usize], Obj::Module(_)));
        (modules && children.len() <= 32).then_some(children)
    }

    /// Split values for `a, b = vals` into `n` parts.
    fn unpack(&mut self, vals: &Vals, n: usize) -> Vec<Vals> {
        let mut parts = vec![Vals::new(); n];
        for v in vals {
            match self.heap[*v as usize].clone() {
                Obj::Seq(items) if items.len() == n => {
                    for (p, item) in parts.iter_mut().zip(items) {
                        p.extend(item);
                    }
                }
                Obj::Seq(items) => {
                    // `a, b, c = x.unbind()`: each target is its own object (same storage for
                    // views), not one shared object.
                    let all: Vals = items.into_iter().flatten().collect();
                    for p in parts.iter_mut() {
                        for v in &all {
                            match self.heap[*v as usize].clone() {
                                Obj::Tensor(mut t) => {
                                    t.grad_tensor = None;
                                    p.push(self.alloc(Obj::Tensor(t)));
                                }
                                _ => p.push(*v),
                            }
                        }
                    }
                }
                Obj::Tensor(t) => {
                    // Several results of one op (`out, (h, c) = lstm(x)`): new tensors with its history.
                    for p in parts.iter_mut() {
                        let t2 = t.sibling(self.heap.len() as ObjId);
                        p.push(self.alloc(Obj::Tensor(t2)));
                    }
                }
                Obj::Other => parts.iter_mut().for_each(|p| p.push(self.other)),
                _ => {
                    for p in parts.iter_mut() {
                        p.push(self.alloc(Obj::Unknown));
                    }
                }
            }
        }
        parts
    }

    pub fn heap_origin(&self, v: ObjId) -> TextRange {
        match &self.heap[v as usize] {
            Obj::Tensor(t) => t.origin,
            Obj::Module(m) => m.origin,
            _ => TextRange::default(),
        }
    }

    pub fn maybe_tensor(&self, v: ObjId) -> bool {
        matches!(self.heap[v as usize], Obj::Tensor(_))
    }

    pub fn is_module(&self, v: ObjId) -> bool {
        match &self.heap[v as usize] {
            Obj::Module(m) => m.local.as_ref().is_none_or(|c| self.class_is_module(c)),
            _ => false,
        }
    }

    /// Everything reachable inside containers (for backward roots and optimizer params).
    pub fn flatten(&self, vals: &Vals, out: &mut Vals, seen: &mut FxHashSet<ObjId>) {
        for v in vals {
            if !seen.insert(*v) {
                continue;
            }
            match &self.heap[*v as usize] {
                Obj::Seq(items) => {
                    for i in items {
                        self.flatten(i, out, seen);
                    }
                }
                Obj::Params { tensors, .. } => self.flatten(tensors, out, seen),
                _ => out.push(*v),
            }
        }
    }
}

/// The index of a subscript, as far as it is a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Index {
    At(i64),
    Range(Option<i64>, Option<i64>),
    Key,
    Other,
}

// ------------------------------------------------------------------------------ call arguments

#[derive(Default)]
pub(crate) struct Args<'t> {
    pub positional: Vec<(Vals, Option<Node<'t>>)>,
    pub keywords: Vec<(Name, Vals, Node<'t>)>,
}

impl<'t> Args<'t> {
    pub fn keyword(&self, name: &str) -> Option<(&Vals, Node<'t>)> {
        self.keywords
            .iter()
            .find(|(n, _, _)| &**n == name)
            .map(|(_, v, n)| (v, *n))
    }
    pub fn first(&self) -> Option<&Vals> {
        self.positional.first().map(|(v, _)| v)
    }
    pub fn all_values(&self) -> impl Iterator<Item = &Vals> {
        self.positional
            .iter()
            .map(|(v, _)| v)
            .chain(self.keywords.iter().map(|(_, v, _)| v))
    }
}

// ------------------------------------------------------------------------------ syntax helpers

/// Steps allowed for a scope of `lines` lines: enough to inline and unroll ordinary code,
/// bounded so that a file's analysis stays linear in its size.
fn budget_for(lines: usize) -> u64 {
    2_000 + 30 * lines as u64
}

pub(crate) fn named_children(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| c.k() != "comment")
        .collect()
}

/// The name (and default value) of one parameter node.
fn param_name<'t>(it: &Interp<'t>, p: Node<'t>) -> Option<(Name, Option<Node<'t>>)> {
    match p.k() {
        "identifier" => Some((it.text(p).into(), None)),
        "typed_parameter" => p
            .named_child(0)
            .filter(|n| n.k() == "identifier")
            .map(|n| (it.text(n).into(), None))
            .or_else(|| {
                p.named_child(0)
                    .and_then(|s| s.named_child(0))
                    .map(|n| (it.text(n).into(), None))
            }),
        "default_parameter" | "typed_default_parameter" => p
            .field("name")
            .map(|n| (it.text(n).into(), p.field("value"))),
        "list_splat_pattern" | "dictionary_splat_pattern" => {
            p.named_child(0).map(|n| (it.text(n).into(), None))
        }
        _ => None,
    }
}

fn annotated_tensor(it: &Interp<'_>, p: Node<'_>) -> bool {
    p.field("type")
        .is_some_and(|t| it.text(t).contains("Tensor"))
}

/// A parameter annotated with a type that is no tensor (`int`, `float`, `bool`, `str`, a config
/// class, ...). Annotations that mention tensors, modules or `Any` keep it a maybe-tensor.
fn annotated_non_tensor(it: &Interp<'_>, p: Node<'_>) -> bool {
    let Some(t) = p.field("type") else {
        return false;
    };
    let text = it.text(t);
    const TENSORISH: &[&str] = &[
        "Tensor",
        "Module",
        "Any",
        "Parameter",
        "torch",
        "Variable",
        "Sequence",
        "Iterable",
        "list",
        "List",
        "tuple",
        "Tuple",
        "dict",
        "Dict",
    ];
    !TENSORISH.iter().any(|k| text.contains(k))
}

fn is_literal(n: Node<'_>) -> bool {
    matches!(
        n.k(),
        "integer"
            | "float"
            | "string"
            | "true"
            | "false"
            | "none"
            | "concatenated_string"
            | "unary_operator"
            | "tuple"
    )
}

fn is_generator(def: Node<'_>) -> bool {
    fn has_yield(n: Node<'_>, depth: usize) -> bool {
        if depth > 60 {
            return false;
        }
        if n.k() == "yield" {
            return true;
        }
        if matches!(n.k(), "function_definition" | "lambda" | "class_definition") && depth > 0 {
            return false;
        }
        let mut c = n.walk();
        let found = n.children(&mut c).any(|ch| has_yield(ch, depth + 1));
        found
    }
    def.k() == "function_definition" && def.field("body").is_some_and(|b| has_yield(b, 1))
}

fn has_decorator(it: &Interp<'_>, def: Node<'_>, needle: &str) -> bool {
    def.parent()
        .filter(|p| p.k() == "decorated_definition")
        .is_some_and(|p| {
            named_children(p)
                .iter()
                .any(|d| d.k() == "decorator" && it.text(*d).contains(needle))
        })
}

fn has_no_grad_decorator(it: &Interp<'_>, def: Node<'_>) -> bool {
    has_decorator(it, def, "no_grad") || has_decorator(it, def, "inference_mode")
}

/// Functions whose body runs with grad disabled: `@torch.no_grad()` / `@torch.inference_mode()`
/// decorated ones, and `forward`/`backward` of a `torch.autograd.Function`.
fn runs_without_grad(it: &Interp<'_>, def: Node<'_>) -> bool {
    if has_no_grad_decorator(it, def) {
        return true;
    }
    enclosing_class(def)
        .and_then(|c| c.field("superclasses"))
        .is_some_and(|s| {
            named_children(s).iter().any(|b| {
                let t = it.text(*b);
                t == "Function" || t.ends_with("autograd.Function") || t.ends_with(".Function")
            })
        })
}

fn enclosing_class(def: Node<'_>) -> Option<Node<'_>> {
    let mut p = def.parent()?;
    if p.k() == "decorated_definition" {
        p = p.parent()?;
    }
    if p.k() != "block" {
        return None;
    }
    p.parent().filter(|c| c.k() == "class_definition")
}

/// Every function definition in the file, outermost first.
fn collect_functions<'t>(root: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if n.k() == "function_definition" {
            out.push(n);
        }
        let mut c = n.walk();
        let children: Vec<_> = n.named_children(&mut c).collect();
        stack.extend(children.into_iter().rev());
    }
    out.sort_by_key(|n| n.start_byte());
}

/// Whether evaluating this name reads the tensor's values (not just `x.shape`, `x is y`, ...).
fn reads_value(it: &Interp<'_>, name: Node<'_>) -> bool {
    let Some(parent) = name.parent() else {
        return true;
    };
    match parent.k() {
        "attribute" if parent.field("object") == Some(name) => {
            let attr = parent.field("attribute").map(|a| it.text(a)).unwrap_or("");
            !crate::ops::METADATA.contains(&attr)
        }
        "comparison_operator" => {
            let mut c = parent.walk();
            let is_identity = parent
                .children(&mut c)
                .any(|ch| matches!(ch.k(), "is" | "is not"));
            !is_identity
        }
        _ => true,
    }
}

/// The plain name an expression writes through (`y` in `y += 1`, `x` in `x[0] = 1`).
pub(crate) fn obj_name(it: &Interp<'_>, node: Node<'_>) -> Option<Name> {
    match node.k() {
        "identifier" => Some(it.text(node).into()),
        "subscript" => node.field("value").and_then(|v| obj_name(it, v)),
        "parenthesized_expression" => node.named_child(0).and_then(|v| obj_name(it, v)),
        // `x.mul_(2).add_(1)`: the chain writes through `x`.
        "call" => {
            let f = node.field("function").filter(|f| f.k() == "attribute")?;
            let m = f.field("attribute")?;
            if it.text(m).ends_with('_') {
                obj_name(it, f.field("object")?)
            } else {
                None
            }
        }
        _ => None,
    }
}

pub(crate) fn binary_op_name(op: &str) -> Option<&'static str> {
    Some(match op {
        "+" => "add",
        "-" => "sub",
        "*" => "mul",
        "/" => "div",
        "@" => "matmul",
        "**" => "pow",
        "//" => "floor_divide",
        "%" => "remainder",
        _ => return None,
    })
}
