//! Tensors: methods, operators, ops from the measured table and what they save, views,
//! `.detach()`, `.data`, `.grad`, leaves, and attributes of every kind of object.

use super::write::{note_write, WriteSpec};
use super::*;
use crate::events::{WriteId, WriteKind};
use crate::ops::{self, ArgKind, Saves as OpSaves};

/// Methods whose result is a new tensor with the receiver's history and nothing saved.
const COPIES: &[&str] = &[
    "clone",
    "to",
    "cuda",
    "cpu",
    "float",
    "double",
    "half",
    "bfloat16",
    "type",
    "type_as",
    "contiguous",
];

impl Interp<'_, '_> {
    /// Conversions that return their receiver itself when its dtype and device already are
    /// those asked for (measured with torch 2.15: a write into the result bumps the receiver's
    /// version), decided for a receiver that surely requires grad (so it is floating and lives
    /// where the model does):
    /// - `.to(other)` / `.type_as(other)` of another tensor in the graph, both only maybe
    ///   requiring grad (`self.cache_k = self.cache_k.to(xq)` keeps the cache);
    /// - `.to(x.device)`, `.to(device)` (where the model is), `.to(x.dtype)`;
    /// - `.float()`, `.to(torch.float32)`, `.type(torch.float32)`, where nothing in the file
    ///   mentions another floating dtype (half, bfloat16, double, autocast);
    /// - `.contiguous()` of a tensor that is no view (an op's result).
    ///
    /// Copies: `copy=True`, `.double()`, `.half()`, `.cuda()`, a view made contiguous
    /// (`x.t().contiguous()`), and any of these on a tensor outside the graph (a batch moved to
    /// the device, labels cast to float), whose dtype and device are not known.
    fn returns_itself(&self, c: Code<'_>, recv: &Vals, m: &str, args: &Args) -> bool {
        if !self.in_graph(recv) {
            return false;
        }
        // (Only a tensor that surely requires grad is surely floating: an argument of unknown
        // history may be a mask or labels, `mask.to(x.dtype)`, `labels.float()`, a copy.)
        let surely = self.surely_grad(recv);
        match m {
            "float" => surely && args.positional.is_empty() && self.prog.single_precision(),
            "contiguous" => {
                surely
                    && recv
                        .iter()
                        .all(|v| self.tensor(*v).is_some_and(|t| t.view_of.is_none()))
            }
            "type" => surely && matches!(args.positional.as_slice(), [(v, _)] if self.float32(v)),
            "type_as" => matches!(args.positional.as_slice(), [(v, _)] if self.in_graph(v)),
            "to" => {
                // (`copy=True` is a keyword: `converts_to_same` refuses it.)
                let other = matches!(args.positional.as_slice(), [(v, _)] if self.in_graph(v))
                    && args.keywords.is_empty();
                let given = args.positional.len() + args.keywords.len();
                other || surely && given > 0 && self.converts_to_same(c, args, true)
            }
            _ => false,
        }
    }

    /// Whether a conversion's arguments (`args` of `.to(...)`, or the keywords of
    /// `torch.as_tensor(t, ...)`; `positional`: the positional ones count) each keep what a
    /// tensor in the graph has: another tensor in the graph, a device (spelled as one, or a
    /// string where nothing mentions an accelerator), the dtype of a tensor, or float32 in a
    /// single-precision file; and no `copy=True`.
    pub(super) fn converts_to_same(&self, c: Code<'_>, args: &Args, positional: bool) -> bool {
        let attr_of = |e: Option<ExprId>, name: &str| {
            e.is_some_and(
                |e| matches!(*c.expr(e), Expr::Attr { attr, .. } if self.name(attr) == name),
            )
        };
        // A device: `x.device`, a name or attribute spelled so (`device`, `self.device`), or a
        // device string where nothing mentions an accelerator (every tensor is on the CPU).
        let device = |vals: &Vals, e: Option<ExprId>| {
            let spelled = e.is_some_and(|e| match *c.expr(e) {
                Expr::Name { name, .. } | Expr::Attr { attr: name, .. } => {
                    self.name(name).contains("device")
                }
                _ => false,
            });
            let strings =
                !vals.is_empty() && vals.iter().all(|v| matches!(self.obj(*v), Obj::Str(_)));
            spelled || (strings && self.prog.cpu_only())
        };
        let keeps = |vals: &Vals, e: Option<ExprId>| {
            self.in_graph(vals)
                || self.float32(vals)
                || (attr_of(e, "dtype") && self.prog.single_precision())
                || device(vals, e)
        };
        let copy = (args.keyword(known::COPY)).is_some_and(|(v, ..)| !v.contains(&FALSE));
        let kws_ok = (args.keywords.iter()).all(|(n, v, e, _)| {
            *n == known::NON_BLOCKING
                || *n == known::COPY
                || (*n == known::DEVICE || *n == known::DTYPE) && keeps(v, Some(*e))
        });
        !copy && kws_ok && (!positional || args.positional.iter().all(|(v, e)| keeps(v, *e)))
    }

    /// Every value is a tensor that may require grad (so floating, where the model is).
    pub(super) fn in_graph(&self, vals: &Vals) -> bool {
        !vals.is_empty()
            && vals
                .iter()
                .all(|v| self.tensor(*v).is_some_and(|t| t.grad.is_possible()))
    }

    /// `torch.float32` (or its string type) in a file where every floating tensor is float32.
    fn float32(&self, vals: &Vals) -> bool {
        self.prog.single_precision()
            && !vals.is_empty()
            && vals.iter().all(|v| match self.obj(*v) {
                Obj::Path(p) => matches!(self.name(*p), "torch.float32" | "torch.float"),
                Obj::Str(s) => self.name(*s) == "torch.FloatTensor",
                _ => false,
            })
    }

    /// `.cpu()`, or `.to(...)` given only device strings (`.to("cpu")`, `device="cpu"`): a move
    /// that changes no dtype and asks for no copy.
    fn moves_to_the_cpu(&self, m: &str, args: &Args) -> bool {
        let device =
            |v: &Vals| !v.is_empty() && v.iter().all(|x| matches!(self.obj(*x), Obj::Str(_)));
        match m {
            "cpu" => args.positional.is_empty(),
            _ => {
                let kws_ok = (args.keywords.iter()).all(|(n, v, ..)| {
                    *n == known::DEVICE && device(v) || *n == known::NON_BLOCKING
                });
                let given = args.positional.len() + args.keywords.len();
                given > 0 && kws_ok && args.positional.iter().all(|(v, _)| device(v))
            }
        }
    }

    /// A method called for its effect on autograd's bookkeeping (`register_hook`): `w.retain_grad()`
    /// on a leaf's computed update keeps its `.grad`, as the code means.
    fn no_result(&mut self, meth: &str, recv: &Vals) -> Vals {
        if meth == "retain_grad" {
            for v in recv {
                self.leaf_rebinds.remove(v);
            }
        }
        smallvec![OTHER]
    }

    /// `x.data_ptr()`: the address of a tensor that is no view, one per tensor (`q.data_ptr()
    /// == k.data_ptr()`, fairseq's test for self-attention, is decided where both are one).
    fn data_ptr(&mut self, recv: &Vals) -> ObjId {
        // (By the tensor, through its `.data` and `.detach()` aliases: a storage stands for
        // every tensor one place makes.)
        let storage = match recv.as_slice() {
            [one] if !self.summaries.objs.contains(one) => self
                .tensor(*one)
                .filter(|t| t.view_of.is_none())
                .map(|t| t.detached_from.unwrap_or(*one)),
            _ => None,
        };
        let ptr = self.alloc(Obj::Other);
        if let Some(storage) = storage {
            self.data_ptrs.insert(ptr, storage);
        }
        ptr
    }

    pub(super) fn tensor_method(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        recv: &Vals,
        meth: Name,
        args: &Args,
        recv_expr: ExprId,
    ) -> Vals {
        let call = c.span(e);
        let m = self.name(meth).to_string();
        match m.as_str() {
            "backward" => {
                let retain = self.keyword_on(args, known::RETAIN_GRAPH);
                // (With `create_graph=True` torch makes new `.grad` tensors: none is added into.)
                let create_graph = self.keyword_on(args, known::CREATE_GRAPH);
                let outer = std::mem::replace(&mut self.new_grads, create_graph);
                self.check_graph(recv, call, retain, true);
                self.new_grads = outer;
                return smallvec![OTHER];
            }
            "detach" => return recv.iter().map(|v| self.detach_of(*v, call)).collect(),
            "detach_" => {
                // Cuts the history in place; the data and its version stay as they are.
                for v in recv {
                    if let Some(t) = self.tensor_mut(*v) {
                        t.grad = Tri::No;
                        t.leaf = false;
                        t.node = None;
                    }
                }
                return recv.clone();
            }
            // A CPU tensor's array shares its memory, with `force=True` too (`.cpu()` is taken
            // for a copy where CUDA is mentioned: on a GPU it is one).
            "numpy" => {
                return recv
                    .iter()
                    .map(|v| self.numpy_alias(*v, call, true))
                    .collect();
            }
            "requires_grad_" => {
                let on = !self.arg_is_false(args, 0, known::REQUIRES_GRAD);
                for v in recv {
                    self.set_requires_grad(*v, on);
                }
                return recv.clone();
            }
            "retain_grad" | "register_hook" | "share_memory_" => return self.no_result(&m, recv),
            "data_ptr" => return smallvec![self.data_ptr(recv)],
            _ if self.returns_itself(c, recv, &m, args) => return recv.clone(),
            // On the CPU, `.cpu()` and `.to("cpu")` return the tensor itself (measured with torch
            // 2.15: writing `x.cpu().detach()` in place bumps `x`'s version); taken so where
            // nothing mentions an accelerator (on a GPU it is a copy).
            "cpu" | "to" if self.moves_to_the_cpu(&m, args) && self.prog.cpu_only() => {
                return recv.clone()
            }
            _ if COPIES.contains(&m.as_str()) => {
                return smallvec![self.derive(
                    std::slice::from_ref(recv),
                    call,
                    OpSaves::default(),
                    None,
                    false
                )];
            }
            _ => {}
        }
        if ops::NON_TENSOR.contains(&m.as_str()) {
            return smallvec![OTHER];
        }
        let of_tensor = m == "new"
            && (args.positional.first())
                .is_some_and(|(v, _)| v.iter().any(|x| self.tensor(*x).is_some()));
        if ops::NEW_FACTORIES.contains(&m.as_str()) && !of_tensor {
            let grad = self.keyword_on(args, known::REQUIRES_GRAD);
            return smallvec![self.new_leaf(grad, call)];
        }
        if ops::is_view_op(&m) {
            let op = RefusedBy::of(
                &m,
                args.positional.first().is_some_and(|(v, _)| self.is_seq(v)),
            );
            let views: Vals = recv
                .iter()
                .map(|v| self.view_op_result(c, (*v, call), op, &m, (args, 0)))
                .collect();
            if ops::SPLITS.contains(&m.as_str()) {
                return smallvec![self.alloc(Obj::Seq(vec![views]))];
            }
            return views;
        }
        // (A method of that shape no tensor has, `td.clear_refs_for_compile_()` of a
        // TensorDict taken for a tensor, writes nothing the analysis knows of.)
        if let Some(base) = ops::table().inplace_method_base(&m) {
            let through = self.obj_name(c, recv_expr);
            let keep = self.keep_name(call, through);
            let value = self
                .indexed_source(base, args, CallForm::Method)
                .or_else(|| self.value_operand(base, args, CallForm::Method))
                .or_else(|| args.first().cloned());
            let element = self.element_read(c.span(recv_expr));
            // (`masked_fill_(mask, v)`, `index_fill_(d, i, v)`, `fill_(v)`: the value last.)
            let masking = matches!(base, "masked_fill" | "index_fill" | "fill")
                && (args.positional.last().and_then(|(_, e)| *e))
                    .is_some_and(|v| self.masking_value(c, v));
            // (`torch.Tensor.add_(y, 1)`, `operator.iadd(y, 1)`: the tensor is an argument, as
            // for `torch.relu_(y)`.)
            let bound = matches!(*c.expr(e), Expr::Call { func, .. }
                if matches!(*c.expr(func), Expr::Attr { value, .. } if value == recv_expr));
            let kind = if bound {
                WriteKind::Method(meth)
            } else {
                WriteKind::TorchFn(meth)
            };
            let spec = WriteSpec::new(kind, call, call)
                .masking(masking)
                .through(through, keep)
                .value(value.as_ref())
                .element(element)
                .record_field(self.field_reads.contains(&c.span(recv_expr)))
                .call(e);
            let w = self.write(recv, spec);
            if matches!(base, "add" | "sub" | "mul" | "div" | "true_divide" | "pow") {
                let operand = args.positional.first().and_then(|(_, e)| *e);
                self.check_self_overlap(c, (recv_expr, recv), operand, w);
            }
            match self.based_operands(base, args, CallForm::Method) {
                Some((a, b)) => self.inplace_based_saves(recv, base, &a, &b, call),
                None => self.inplace_saves_by_name(recv, base, value.as_ref(), (call, w)),
            }
            // `cache.index_copy_(1, pos, k)`, `x.masked_fill_(mask, v)`: the index or mask is
            // saved as the out-of-place op's is (measured with torch 2.15 for each of them:
            // writing it in place before `backward()` raises).
            if let Some(index) = self.index_operand(base, args, CallForm::Method) {
                let index = self.flat_tensors(&index);
                self.save_with(recv, &index, OpLabel::Method(meth), call);
            }
            return recv.clone();
        }
        let mut inputs = vec![recv.clone()];
        match self.indexed_source(&m, args, CallForm::Method) {
            // (The table's `other` is the source; the index is saved below.)
            Some(source) => inputs.push(source),
            None => inputs.extend(args.positional.iter().map(|(v, _)| v.clone())),
        }
        based_order(&m, &mut inputs);
        let index = self.index_operand(&m, args, CallForm::Method);
        let out = if ops::table().op(&m).is_some()
            || matches!(m.as_str(), "add" | "sub" | "mul" | "div" | "matmul" | "pow")
        {
            let name = self.dim_variant(&m, args, 0);
            let tensor_only = !ops::ARRAY_METHODS.contains(&m.as_str());
            self.op_result(&name, OpLabel::Method(meth), &inputs, call, tensor_only)
        } else if ops::INDEX_RESULT.contains(&m.as_str())
            || ops::NO_GRAD_DRAWS.contains(&m.as_str())
        {
            return smallvec![self.new_leaf(false, call)];
        } else {
            smallvec![self.derive(&inputs, call, OpSaves::default(), None, false)]
        };
        if let Some(index) = index {
            self.save_with(&out, &index, OpLabel::Method(meth), call);
        }
        // `y.stft(n_fft, ...)`: as `torch.stft(y, n_fft, ...)`.
        if m == "stft" && self.stft_keeps_input(args, 0) {
            self.save_with(&out, recv, OpLabel::Method(meth), call);
        }
        out
    }

    /// A method on a value we do not model: module and optimizer idioms, else a tensor guess.
    pub(super) fn unknown_method(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        recv: ObjId,
        meth: Name,
        args: &Args,
        recv_expr: ExprId,
    ) -> Vals {
        let call = c.span(e);
        let m = self.name(meth).to_string();
        match m.as_str() {
            "parameters" | "named_parameters" => {
                return smallvec![self.alloc(Obj::Params {
                    owners: smallvec![recv],
                    tensors: Vals::new()
                })]
            }
            // `accelerator.backward(loss)`, a wrapper's `scaled.backward()`: what it reaches
            // is not known, so no parameter is known to be without a grad after it.
            "backward" => {
                let retain = self.keyword_on(args, known::RETAIN_GRAPH);
                let mut roots: Vals = smallvec![recv];
                roots.extend(args.all_values().flatten().copied());
                self.check_graph(&roots, call, retain, true);
                self.state.gradless.clear();
                return smallvec![OTHER];
            }
            // `scaler.step(optimizer)` (AMP) steps that optimizer.
            "step"
                if args.first().is_some_and(|v| {
                    v.iter()
                        .any(|o| matches!(self.obj(*o), Obj::Optimizer { .. }))
                }) =>
            {
                let opts = args.first().cloned().unwrap_or_default();
                for o in opts {
                    if let Obj::Optimizer { params, .. } = self.obj(o).clone() {
                        let step = self.intern("step");
                        self.optimizer_method(c, e, o, &params, step, &Args::default());
                    }
                }
                return smallvec![OTHER];
            }
            "step" | "zero_grad" | "update" | "append" | "extend" | "items" | "keys" | "values"
            | "get" | "pop" => return self.opaque_call(args, call),
            _ => {}
        }
        if ops::table().inplace_method_base(&m).is_some() {
            // Only tensors have `add_`-style methods: this value is one. (Not of a name that no
            // tensor method has: `td.clear_refs_for_compile_()` of a TensorDict.)
            // (The shared "anything" object stays itself: a tensor of its own stands in for
            // it, or every unknown value of the run would become this tensor.)
            let origin = c.span(recv_expr);
            let recv = match self.obj(recv) {
                Obj::Unknown if recv == UNKNOWN => {
                    let id = self.heap.len() as ObjId;
                    self.alloc(Obj::Tensor(TensorObj::fresh(id, Tri::Maybe, false, origin)))
                }
                Obj::Unknown => {
                    *self.obj_mut(recv) =
                        Obj::Tensor(TensorObj::fresh(recv, Tri::Maybe, false, origin));
                    recv
                }
                _ => recv,
            };
            return self.tensor_method(c, e, &smallvec![recv], meth, args, recv_expr);
        }
        // `img.transpose((2, 0, 1))` of an array a dataset keeps: a view of it, kept too.
        if ops::NUMPY_VIEW_METHODS.contains(&m.as_str()) {
            if let Some(view) = self.stored_array_view(&smallvec![recv]) {
                return view;
            }
        }
        // The receiver's own history is not known; the arguments' is.
        self.opaque_call(args, call)
    }

    /// A view of an array among `vals` that a dataset keeps (`img.T`, `np.transpose(img)`):
    /// a value of its own, kept by the dataset as the array is (`torch.from_numpy` of it
    /// shares the stored memory).
    pub(super) fn stored_array_view(&mut self, vals: &Vals) -> Option<Vals> {
        let stored = vals
            .iter()
            .find_map(|v| self.stored_arrays.get(v).copied())?;
        let view = self.alloc(Obj::Unknown);
        self.stored_arrays.insert(view, stored);
        Some(smallvec![view])
    }

    /// `+ - * // %` of two known integers (small ones: loop bounds and sizes).
    pub(super) fn int_arith(&self, op: BinOp, a: &Vals, b: &Vals) -> Option<i64> {
        let (x, y) = (self.one_int(a)?, self.one_int(b)?);
        let n = match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            BinOp::Mul => x.checked_mul(y),
            BinOp::FloorDiv if y != 0 => Some(x.div_euclid(y)),
            BinOp::Mod if y != 0 => Some(x.rem_euclid(y)),
            _ => None,
        }?;
        (n.abs() < 1 << 20).then_some(n)
    }

    /// `[x] * n` (or `n * [x]`): list `seq` repeated, its elements the same objects (`[act] *
    /// 2` holds one layer twice); slot by slot when `n` is known, else one slot for any of them.
    fn repeat_seq(&mut self, seq: &Vals, n: &Vals) -> Option<ObjId> {
        let [s] = seq.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*s) else {
            return None;
        };
        if self.dict_objs.contains(s) {
            return None;
        }
        let items = items.clone();
        let exact = self.exact_seqs.contains(s);
        match self.one_int(n) {
            // (`[x] * 0`, `[x] * -1`: empty.)
            Some(k) if k <= 0 => {
                let r = self.alloc(Obj::Seq(Vec::new()));
                self.exact_seqs.insert(r);
                Some(r)
            }
            Some(k) if (k as usize).saturating_mul(items.len()) <= MAX_SLOTS => {
                let slots: Vec<Vals> = (0..k).flat_map(|_| items.iter().cloned()).collect();
                let r = self.alloc(Obj::Seq(slots));
                if exact {
                    self.exact_seqs.insert(r);
                }
                Some(r)
            }
            _ => {
                let any: Vals = items.into_iter().flatten().take(32).collect();
                Some(self.alloc(Obj::Seq(vec![any])))
            }
        }
    }

    pub fn binary(&mut self, op: BinOp, a: &Vals, b: &Vals, origin: Span) -> Vals {
        let any_tensor = a.iter().chain(b.iter()).any(|v| self.maybe_tensor(*v));
        if !any_tensor {
            if let Some(s) = self.string_op(op, a, b) {
                return s;
            }
            // `list(a.parameters()) + list(b.parameters())`: the items of both lists.
            let seqs: Vec<Vec<Vals>> = a
                .iter()
                .chain(b.iter())
                .filter_map(|v| match self.obj(*v) {
                    Obj::Seq(items) => Some(items.clone()),
                    _ => None,
                })
                .collect();
            if let Some(n) = self.int_arith(op, a, b) {
                return smallvec![self.int(n)];
            }
            // Numbers give numbers (`n // k`): a name bound to one is never written in place
            // (`n += 1` rebinds it).
            let plain = |v: &ObjId| matches!(self.obj(*v), Obj::Other | Obj::Str(_));
            if !a.is_empty() && !b.is_empty() && a.iter().chain(b.iter()).all(plain) {
                return smallvec![OTHER];
            }
            if op == BinOp::Mul {
                if let Some(r) = self.repeat_seq(a, b).or_else(|| self.repeat_seq(b, a)) {
                    return smallvec![r];
                }
            }
            if op == BinOp::Add && !seqs.is_empty() {
                let exact = (a.len(), b.len()) == (1, 1)
                    && self.exact_seqs.contains(&a[0])
                    && self.exact_seqs.contains(&b[0]);
                let mut items = seqs.concat();
                let bounded = items.len() <= MAX_SLOTS;
                if !bounded {
                    // Keep lists bounded (`x = x + x` in a loop): the rest share the last slot.
                    let rest: Vals = items.drain(MAX_SLOTS - 1..).flatten().take(32).collect();
                    items.push(rest);
                }
                let seq = self.alloc(Obj::Seq(items));
                if exact && bounded {
                    self.exact_seqs.insert(seq);
                }
                return smallvec![seq];
            }
            return smallvec![self.alloc(Obj::Unknown)];
        }
        // `2.0 / h` is `h.__rtruediv__(2.0)`, which torch computes as `h.reciprocal() * 2.0`
        // (measured with torch 2.15): the reciprocal's saved result is its own, and neither `h`
        // nor what the expression gives is saved (`torch.div(2.0, h)` saves `h`).
        let number = |v: &ObjId| match self.obj(*v) {
            Obj::Other => true,
            Obj::Path(p) => self.name(*p).starts_with("math."),
            _ => false,
        };
        let reciprocal = op == BinOp::Div && !a.is_empty() && a.iter().all(number);
        let Some(name) = op.op_name().filter(|_| !reciprocal) else {
            return smallvec![self.derive(
                &[a.clone(), b.clone()],
                origin,
                OpSaves::default(),
                None,
                false
            )];
        };
        smallvec![self.apply_op(
            name,
            OpLabel::Operator(op),
            &[a.clone(), b.clone()],
            origin,
            false
        )]
    }

    pub(super) fn arg_kind(&self, vals: &Vals) -> ArgKind {
        let mut kind = ArgKind::Scalar;
        for v in vals {
            match self.tensor(*v) {
                Some(t) if t.grad.is_possible() => return ArgKind::Grad,
                Some(_) => kind = ArgKind::Const,
                None => {}
            }
        }
        kind
    }

    /// An op's result as Python sees it: an integer or boolean result is a new tensor without
    /// grad (indices, masks, `one_hot`); `(values, indices)` for `topk`, `sort` and reductions over a
    /// dimension, whose indices carry no grad either. `name` may be a table's `.dim` variant.
    pub fn op_result(
        &mut self,
        name: &str,
        label: OpLabel,
        inputs: &[Vals],
        origin: Span,
        known: bool,
    ) -> Vals {
        let base = name.strip_suffix(".dim").unwrap_or(name);
        if ops::INDEX_RESULT.contains(&base) {
            return smallvec![self.new_leaf(false, origin)];
        }
        let values = self.apply_op(name, label, inputs, origin, known);
        if let Some(outputs) = ops::table().op(base).and_then(|s| s.outputs.as_ref()) {
            return smallvec![self.several_results(values, outputs, label, origin)];
        }
        let pair = ops::VALUES_INDICES_ALWAYS.contains(&base)
            || (name.ends_with(".dim") && ops::VALUES_INDICES_WITH_DIM.contains(&base));
        if !pair {
            return smallvec![values];
        }
        let indices = self.new_leaf(false, origin);
        smallvec![self.alloc(Obj::Seq(vec![smallvec![values], smallvec![indices]]))]
    }

    /// The outputs of an op with several (`U, S, Vh = torch.linalg.svd(a)`), `first` being the
    /// first as [`Interp::apply_op`] made it: each another result of the same node, or a tensor
    /// without grad (pivots, an error code), saved by that node where `outputs` says so
    /// (measured per output).
    fn several_results(
        &mut self,
        first: ObjId,
        outputs: &ops::Outputs,
        label: OpLabel,
        origin: Span,
    ) -> ObjId {
        let Some(t) = self.tensor(first).cloned() else {
            return self.alloc(Obj::Unknown);
        };
        let mut slots = Vec::with_capacity(outputs.saved.len());
        for (k, (&kept, &grad)) in outputs.saved.iter().zip(&outputs.grad).enumerate() {
            let id = match (k, grad) {
                (0, true) => first,
                (_, true) => {
                    let id = self.heap.len() as ObjId;
                    self.alloc(Obj::Tensor(t.sibling(id)))
                }
                (_, false) => self.new_leaf(false, origin),
            };
            if let (true, Some(node), false) = (kept, t.node, k == 0 && grad) {
                let storage = self.tensor(id).map_or(id, |o| o.storage);
                let save = self.record_save(storage, true, label, origin, t.grad_if);
                self.nodes.get_mut(node).saves.push(save);
            }
            slots.push(smallvec![id]);
        }
        self.alloc(Obj::Seq(slots))
    }

    /// Apply an op from the table: a new result tensor whose node records what the op saved.
    pub fn apply_op(
        &mut self,
        name: &str,
        label: OpLabel,
        inputs: &[Vals],
        origin: Span,
        known: bool,
    ) -> ObjId {
        let a = inputs
            .first()
            .map(|v| self.arg_kind(v))
            .unwrap_or(ArgKind::Scalar);
        let b = inputs.get(1).map(|v| self.arg_kind(v));
        // (An adaptive average pool to size 1 is a mean: it saves nothing.)
        let global_pool = name.starts_with("adaptive_avg_pool")
            && inputs.get(1).is_some_and(|v| self.all_ones(v));
        let mut saves = if self.grad_enabled && !global_pool {
            ops::table().saves(name, a, b)
        } else {
            OpSaves::default()
        };
        // (`gather` reads its source for the source's own gradient, and is as often applied to
        // token ids (`shift_tokens_right(labels)`, which gathers from a copy of its argument):
        // a source only assumed to require grad, through an argument, is taken to be such ids.
        // (So is `log_softmax(logits)` of an argument: the op's dtype is not followed.))
        if saves.input
            && ops::INTEGER_SOURCES.contains(&name)
            && !inputs.first().is_some_and(|v| self.surely_grad(v))
        {
            saves.input = false;
        }
        // An operand saved only for the other's gradient (`a * b` keeps `a` for `b`'s) is saved
        // only when the other requires grad: when that is an argument's assumption, the save
        // rests on it (not on what the result's history rests on).
        // (`Some(None)`: the other surely requires grad, or rests on nothing known.)
        let mut rests = [None, None];
        if saves.input
            && b == Some(ArgKind::Grad)
            && !ops::table().saves(name, a, Some(ArgKind::Const)).input
        {
            rests[0] = inputs
                .get(1)
                .map(|v| self.assumption(std::slice::from_ref(v)));
        }
        if let (true, Some(kb)) = (saves.other && a == ArgKind::Grad, b) {
            if !ops::table().saves(name, ArgKind::Const, Some(kb)).other {
                rests[1] = inputs
                    .first()
                    .map(|v| self.assumption(std::slice::from_ref(v)));
            }
        }
        self.derive_resting(inputs, origin, saves, Some(label), known, rests)
    }

    /// A new tensor computed from `inputs`; `saves` says which of them (and itself) its
    /// backward reads.
    pub fn derive(
        &mut self,
        inputs: &[Vals],
        origin: Span,
        saves: OpSaves,
        op: Option<OpLabel>,
        known: bool,
    ) -> ObjId {
        self.derive_resting(inputs, origin, saves, op, known, [None, None])
    }

    /// [`Interp::derive`], where `rests[i]` is what the save of input `i` rests on (an
    /// argument, or `None`: nothing) when that is not what the result's history rests on.
    fn derive_resting(
        &mut self,
        inputs: &[Vals],
        origin: Span,
        saves: OpSaves,
        op: Option<OpLabel>,
        known: bool,
        rests: [Option<Option<GradIf>>; 2],
    ) -> ObjId {
        self.check_refused_inputs(inputs, origin);
        let mut grad = Tri::No;
        let mut parents = SmallVec::<[NodeId; 2]>::new();
        let mut leaves = SmallVec::<[u32; 2]>::new();
        // The result is known to be a tensor when a torch function made it or an input is one.
        let mut known = known;
        for vals in inputs {
            for v in vals {
                if let Some(t) = self.tensor(*v) {
                    known |= t.known;
                    grad = grad.max(t.grad);
                    link_input(t, &mut parents, &mut leaves);
                }
            }
        }
        if !self.grad_enabled {
            grad = Tri::No;
        }
        let assumes = self.assumption(inputs);
        let id = self.heap.len() as ObjId;
        let label = op.unwrap_or(OpLabel::Static(""));
        let mut node_saves = Saves::new();
        if grad.is_possible() {
            if saves.result {
                node_saves.push(self.record_save(id, true, label, origin, assumes));
            }
            for (i, flag) in [(0usize, saves.input), (1usize, saves.other)] {
                if !flag {
                    continue;
                }
                let assumes = rests[i].unwrap_or(assumes);
                if let Some(vals) = inputs.get(i) {
                    for v in vals.clone() {
                        node_saves.extend(self.save_input(v, label, origin, assumes));
                    }
                }
            }
        }
        let node = grad.is_possible().then(|| {
            self.nodes.push(GraphNode {
                saves: node_saves,
                parents,
                leaves,
            })
        });
        let mut t = TensorObj::fresh(id, grad, known, origin);
        t.node = node;
        t.grad_if = assumes.filter(|_| grad == Tri::Maybe);
        self.alloc(Obj::Tensor(t))
    }

    /// The index or target operand an op's backward reads ([`ops::INDEX_OPERANDS`],
    /// [`ops::FUNCTIONAL_INDEX_OPERANDS`]), to be saved with the op's result. Taken before the
    /// result is made: an index is an integer or boolean tensor, which never requires grad, so a
    /// stand-in whose grad was unknown (an argument) learns here that it has none, and the
    /// result's history does not rest on it. (A loss's target may be soft probabilities.)
    pub(super) fn index_operand(&mut self, op: &str, args: &Args, form: CallForm) -> Option<Vals> {
        let table = match form {
            CallForm::Functional => ops::FUNCTIONAL_INDEX_OPERANDS,
            CallForm::Torch | CallForm::Method => ops::INDEX_OPERANDS,
        };
        let &(_, pos, kw) = table.iter().find(|(n, ..)| *n == op)?;
        let index = self.operand(args, form, pos, &[kw])?;
        if kw != "target" {
            self.never_requires_grad(&index);
        }
        Some(index)
    }

    /// `vals` is an integer or boolean tensor (an index, a mask): when it is one value whose
    /// grad was unknown and that has no history (a stand-in for an argument), it is known not to
    /// require grad. (Of several candidates, the one used may be another: `x if flag else ids`.)
    pub(super) fn never_requires_grad(&mut self, vals: &Vals) {
        let [v] = vals.as_slice() else {
            return;
        };
        if let Some(t) = self.tensor_mut(*v) {
            if t.grad == Tri::Maybe && t.node.is_none() {
                t.grad = Tri::No;
                t.grad_if = None;
            }
        }
    }

    /// A weighted embedding bag's per-sample weights: at `pos` or by keyword.
    pub(super) fn bag_weights(&self, args: &Args, pos: usize) -> Option<Vals> {
        self.operand(args, CallForm::Functional, pos, &[ops::PER_SAMPLE_WEIGHTS])
    }

    /// The saves of a weighted embedding bag (`F.embedding_bag(ids, table, offsets,
    /// per_sample_weights=w)`, `nn.EmbeddingBag(...)(ids, offsets, w)`), which the op table (measured
    /// without per-sample weights) does not hold. Measured with torch 2.15: the per-sample weights
    /// are saved whenever the result has a history (the table's gradient reads them), and the
    /// table when the weights require grad (their gradient reads it).
    pub(super) fn save_weighted_bag(
        &mut self,
        out: &Vals,
        weights: &Vals,
        table: &Vals,
        label: OpLabel,
        origin: Span,
    ) {
        self.save_with(out, weights, label, origin);
        if self.arg_kind(weights) == ArgKind::Grad {
            self.save_with(out, table, label, origin);
        }
    }

    /// The operand at `pos` of an op's function form (a method's receiver is position 0), or
    /// passed by one of the keywords `kws`.
    pub(super) fn operand(
        &self,
        args: &Args,
        form: CallForm,
        pos: usize,
        kws: &[&str],
    ) -> Option<Vals> {
        let at = match form {
            CallForm::Method => pos.checked_sub(1),
            _ => Some(pos),
        };
        at.and_then(|p| args.positional.get(p).map(|(v, _)| v.clone()))
            .or_else(|| {
                args.keywords
                    .iter()
                    .find(|(n, ..)| kws.contains(&self.name(*n)))
                    .map(|(_, v, ..)| v.clone())
            })
    }

    /// The source operand of an op that combines one into its first operand at indices
    /// (`src.scatter_reduce(0, index, src)`, `x.index_add_(0, index, source)`), when `op` is one.
    pub(super) fn indexed_source(&self, op: &str, args: &Args, form: CallForm) -> Option<Vals> {
        ops::table().op(op)?.indexed?;
        let (pos, kws) = ops::INDEXED_SOURCE;
        Some(self.operand(args, form, pos, &kws).unwrap_or_default())
    }

    /// Saves of `operand`'s tensors recorded with each of `out`'s nodes (an op's backward reads
    /// them when its result has a history).
    pub(super) fn save_with(&mut self, out: &Vals, operand: &Vals, label: OpLabel, origin: Span) {
        if !self.grad_enabled {
            return;
        }
        for o in out {
            let Some((node, assumes)) = self
                .tensor(*o)
                .filter(|t| t.grad.is_possible())
                .and_then(|t| Some((t.node?, t.grad_if)))
            else {
                continue;
            };
            for v in operand {
                if let Some(s) = self.save_input(*v, label, origin, assumes) {
                    self.nodes.get_mut(node).saves.push(s);
                }
            }
        }
    }

    /// What an op's history over `inputs` rests on: nothing when an input surely requires grad,
    /// else the argument the first input that may is waiting for.
    pub(super) fn assumption(&self, inputs: &[Vals]) -> Option<GradIf> {
        let tensors = || inputs.iter().flatten().filter_map(|v| self.tensor(*v));
        if tensors().any(|t| t.grad == Tri::Yes) {
            return None;
        }
        tensors()
            .filter(|t| t.grad == Tri::Maybe)
            .find_map(|t| t.grad_if)
    }

    pub(super) fn record_save(
        &mut self,
        storage: ObjId,
        output: bool,
        op: OpLabel,
        range: Span,
        assumes: Option<GradIf>,
    ) -> SaveId {
        let callers = self.caller_chain();
        let id = self.saves.push(Save {
            storage,
            output,
            op,
            range,
            assumes,
            stmt: self.unit_stmt,
            inner: self.stmt,
            callers,
            stash: None,
            through_data: None,
        });
        // (Saved under `allow_mutation_on_saved_tensors()`: a write copies it first, it stays
        // as saved.)
        if !self.save_modes.mutation_allowed {
            self.state.live.entry(storage).or_default().push(id);
        }
        id
    }

    /// The callers' statements of the calls being inlined, as one shared list (`None` outside
    /// any call).
    fn caller_chain(&mut self) -> Option<Arc<[StmtRef]>> {
        if self.caller_stmts.is_empty() {
            return None;
        }
        let chain =
            (self.caller_chain).get_or_insert_with(|| Arc::from(self.caller_stmts.as_slice()));
        Some(chain.clone())
    }

    /// Where tensor `v`, or the tensor it is a view of, was taken as a `.data` alias of
    /// another (a version counter of its own, which its views share), if it was.
    pub(super) fn data_alias_at(&self, mut v: ObjId) -> Option<Span> {
        for _ in 0..64 {
            let t = self.tensor(v).filter(|t| !t.counter && t.numpy.is_none())?;
            match t.view_of {
                Some((base, _)) if self.tensor(base).is_some_and(|b| !b.counter) => v = base,
                _ => return Some(t.origin),
            }
        }
        None
    }

    /// Of a tensor made to show another's memory (`pk.data = pq.data`), or a view of one: where
    /// that tensor was made, which stands for its version counter. It keeps its own
    /// (measured with torch 2.15: a write through `pk` leaves what an op saved of `pq`
    /// unchecked, and the backward silently reads the new values).
    pub(super) fn shown_counter(&self, mut v: ObjId) -> Option<Span> {
        if self.shown_memory.is_empty() {
            return None;
        }
        for _ in 0..64 {
            if self.shown_memory.contains_key(&v) {
                return Some(self.tensor(v)?.origin);
            }
            v = self.tensor(v)?.view_of?.0;
        }
        None
    }

    /// The save of input tensor `v`'s memory (None when `v` is no tensor). Saved through a
    /// `.data` alias, the save keeps that alias's own version counter (`through_data`).
    pub(super) fn save_input(
        &mut self,
        v: ObjId,
        label: OpLabel,
        origin: Span,
        assumes: Option<GradIf>,
    ) -> Option<SaveId> {
        let storage = self.tensor(v)?.storage;
        let through = self.data_alias_at(v).or_else(|| self.shown_counter(v));
        let id = self.record_save(storage, false, label, origin, assumes);
        self.saves.get_mut(id).through_data = through;
        Some(id)
    }

    /// Saves made by an in-place op on its own result (`sigmoid_` saves the result, `mul_(w)`
    /// saves `w`), recorded after write `write` so they carry the new version. But an operand
    /// that shares the target's memory (`x.mul_(x)`, `x *= a` with `a = x`, `x.mul_(f_(x))`
    /// where `f_` returns its argument written) is saved as it was before the write, which then
    /// changes it (measured with torch 2.15: `backward()` raises; `x.mul_(x.sigmoid())` does
    /// not).
    pub fn inplace_saves_by_name(
        &mut self,
        targets: &Vals,
        base: &str,
        other: Option<&Vals>,
        (origin, write): (Span, WriteId),
    ) {
        if !self.grad_enabled {
            return;
        }
        let a = self.arg_kind(targets);
        let b = other.map(|o| self.arg_kind(o));
        // The in-place kernel (`leaky_relu_`) where it is measured: it may save its result
        // where the out-of-place op saves its input.
        let kernel = format!("{base}_");
        let s = match ops::table().op(&kernel) {
            Some(_) if b.is_none_or(|k| k == ArgKind::Scalar) => {
                ops::table().saves(&kernel, a, None)
            }
            _ => ops::table().saves(base, a, b),
        };
        let grad_any = a == ArgKind::Grad || b == Some(ArgKind::Grad);
        if !grad_any {
            return;
        }
        let assumes = self.assumption(&[targets.clone(), other.cloned().unwrap_or_default()]);
        // Whether or not it saves anything, the write links the written value's history into
        // the target (`x += conv(x)`), so a later backward reaches the saves on either side.
        let label = OpLabel::Inplace(self.intern(base));
        let mut saves = Saves::new();
        for t in targets.clone() {
            if let Some(tt) = self.tensor(t) {
                let storage = tt.storage;
                if s.result {
                    saves.push(self.record_save(storage, true, label, origin, assumes));
                }
            }
        }
        if let (true, Some(o)) = (s.other, other) {
            // (Through `.data` the counter is another: `x.mul_(x.data)` raises nothing, and the
            // gradient silently reads the product: IP401's.)
            let written: SmallVec<[ObjId; 2]> = (targets.iter())
                .filter_map(|t| self.tensor(*t).filter(|t| t.counter).map(|t| t.storage))
                .collect();
            for v in o.clone() {
                let Some(tt) = self.tensor(v) else { continue };
                let storage = tt.storage;
                // (A view of part of it, `x.div_(x[:, :1])`, is the overlap IP402 reports.)
                let whole = !matches!(tt.view_of, Some((_, Part::Index(_) | Part::Piece)))
                    && (tt.counter || self.data_alias_at(v).is_some());
                let Some(save) = self.save_input(v, label, origin, assumes) else {
                    continue;
                };
                if whole && written.contains(&storage) && !self.raised() {
                    note_write(self.state.clobbered.entry(save).or_default(), write);
                }
                saves.push(save);
            }
        }
        self.extend_history(targets, saves, other);
    }

    /// The saves of an in-place op that adds a product to its target (`acc.addcmul_(a, b)`,
    /// `out.addmm_(x, w)`): what the op saves of `a` and `b` (the target is only added to).
    fn inplace_based_saves(
        &mut self,
        targets: &Vals,
        base: &str,
        a: &Vals,
        b: &Vals,
        origin: Span,
    ) {
        if !self.grad_enabled {
            return;
        }
        let (ka, kb) = (self.arg_kind(a), self.arg_kind(b));
        // (Nothing that may require grad: no history to extend, as for any in-place op.)
        if ![self.arg_kind(targets), ka, kb].contains(&ArgKind::Grad) {
            return;
        }
        let s = ops::table().saves(base, ka, Some(kb));
        let both: Vals = a.iter().chain(b).copied().collect();
        let assumes = self.assumption(&[targets.clone(), both.clone()]);
        let label = OpLabel::Inplace(self.intern(base));
        let mut saves = Saves::new();
        for (flag, vals) in [(s.input, a), (s.other, b)] {
            for v in vals.iter().filter(|_| flag) {
                saves.extend(self.save_input(*v, label, origin, assumes));
            }
        }
        self.extend_history(targets, saves, Some(&both));
    }

    /// The two factors of an op that adds a product to a base (see [`ops::OpSpec::base_first`]),
    /// by position after the base or by keyword.
    pub(super) fn based_operands(
        &self,
        op: &str,
        args: &Args,
        form: CallForm,
    ) -> Option<(Vals, Vals)> {
        if !ops::table().op(op).is_some_and(|s| s.base_first) {
            return None;
        }
        const FACTORS: [[&str; 3]; 2] =
            [["mat1", "tensor1", "batch1"], ["mat2", "tensor2", "batch2"]];
        let a = (self.operand(args, form, 1, &FACTORS[0]))
            .or_else(|| self.operand(args, form, 1, &["mat", "vec1"]))?;
        let b = (self.operand(args, form, 2, &FACTORS[1]))
            .or_else(|| self.operand(args, form, 2, &["vec", "vec2"]))?;
        Some((a, b))
    }

    /// The operand an in-place op writes, where it is not the first after the target
    /// ([`ops::VALUE_OPERANDS`]: `x.index_put_(indices, values)`).
    pub(super) fn value_operand(&self, op: &str, args: &Args, form: CallForm) -> Option<Vals> {
        let &(_, pos, kw) = ops::VALUE_OPERANDS.iter().find(|(n, ..)| *n == op)?;
        self.operand(args, form, pos, &[kw])
    }

    /// After an in-place op, the written tensors' history includes the op.
    pub(super) fn extend_history(&mut self, targets: &Vals, saves: Saves, other: Option<&Vals>) {
        let mut parents = SmallVec::<[NodeId; 2]>::new();
        let mut leaves = SmallVec::<[u32; 2]>::new();
        for v in targets.iter().chain(other.into_iter().flatten()) {
            if let Some(t) = self.tensor(*v) {
                link_input(t, &mut parents, &mut leaves);
            }
        }
        let n = self.nodes.push(GraphNode {
            saves,
            parents,
            leaves,
        });
        for v in targets {
            if let Some(t) = self.tensor_mut(*v) {
                t.node = Some(n);
                if t.grad == Tri::No {
                    t.grad = Tri::Maybe;
                }
            }
            self.rebase_views_bases(*v, n);
        }
    }

    /// An in-place op on a view becomes part of its base's history too (torch rebases the
    /// base's `grad_fn` onto `CopySlices`): a backward through the base (`p.sum()` after
    /// `p[:, :2].sigmoid_()`) reaches what the op saved. Up the chain of views.
    fn rebase_views_bases(&mut self, view: ObjId, op: NodeId) {
        const MAX_CHAIN: usize = 8;
        let mut at = view;
        for _ in 0..MAX_CHAIN {
            let Some((base, _)) = self.tensor(at).and_then(|t| t.view_of) else {
                return;
            };
            let Some(b) = self.tensor(base) else {
                return;
            };
            let mut parents = SmallVec::<[NodeId; 2]>::new();
            parents.push(op);
            let mut leaves = SmallVec::<[u32; 2]>::new();
            link_input(b, &mut parents, &mut leaves);
            let n = self.nodes.push(GraphNode {
                saves: Saves::new(),
                parents,
                leaves,
            });
            if let Some(b) = self.tensor_mut(base) {
                b.node = Some(n);
                if b.grad == Tri::No {
                    b.grad = Tri::Maybe;
                }
            }
            at = base;
        }
    }

    // ----------------------------------------------------------- views, detach, data, grad

    pub fn view_of(&mut self, base: ObjId, origin: Span, part: Part) -> ObjId {
        let Some(t) = self.tensor(base) else {
            return self.alloc(Obj::Unknown);
        };
        let mut v = t.clone();
        v.view_of = Some((base, part));
        // (Which dimensions of a view of a view are cut is not followed.)
        if v.strided != 0 {
            v.strided = ANY_ORDER;
        }
        v.rank = 0;
        v.view_of_leaf = (t.leaf || t.view_of_leaf) && t.counter && self.grad_enabled;
        v.leaf = false;
        v.view_origin = Some(origin);
        v.origin = origin;
        v.grad_tensor = None;
        if !self.grad_enabled {
            // (As in torch, the later kind wins: a `no_grad` view of a split's view is a
            // `no_grad` view.)
            if t.counter {
                v.refused_view = Some(RefusedView {
                    op: RefusedBy::NoGrad,
                    at: origin,
                    grad: t.grad == Tri::Yes,
                });
            }
            v.grad = Tri::No;
        }
        self.alloc(Obj::Tensor(v))
    }

    /// What view op `name` (a method, or a `torch.*` function whose first `skip` arguments
    /// are the tensor) makes of `base` at `origin`: one of its views, marked strided where the
    /// op rearranges; but a copy where it flattens a view that is not laid out in order into one
    /// dimension (`x.t().reshape(-1)`, `x[:, :3].flatten()`). (A reshape into several
    /// dimensions views where it only splits dimensions, `x[:, 0].reshape(b, n, c)`, which torch
    /// refuses to see written when the slice was saved, and copies where it merges them,
    /// `x.transpose(1, 2).reshape(b, n, -1)`: it stays a view here, of unknown layout.)
    pub(super) fn view_op_result(
        &mut self,
        c: Code<'_>,
        (base, origin): (ObjId, Span),
        op: Option<RefusedBy>,
        name: &str,
        (args, skip): (&Args, usize),
    ) -> ObjId {
        let flat = match name {
            "reshape" => match args.positional.get(skip..) {
                // (One number, `-1`, or a one-element shape; not a shape of unknown length.)
                Some([(v, _)]) => v.iter().all(|o| match self.obj(*o) {
                    Obj::Seq(items) => items.len() == 1,
                    Obj::Other => true,
                    _ => false,
                }),
                _ => false,
            },
            "flatten" => args.positional.len() == skip && args.keywords.is_empty(),
            _ => false,
        };
        let strided = self.tensor(base).is_some_and(|t| t.strided != 0);
        let merge = self.merges_out_of_order(c, base, name, (args, skip));
        if strided && (flat || merge == Some(true)) {
            return self.derive(&[smallvec![base]], origin, OpSaves::default(), None, false);
        }
        let permuted = self.permutation_layout(base, name, (args, skip));
        let id = self.split_view_of(base, origin, op, Part::of_view(name));
        if let (Some((cut, rank)), Some(t)) = (permuted, self.tensor_mut(id)) {
            (t.strided, t.rank) = (cut, rank);
        } else if ops::STRIDED_VIEWS.contains(&name) {
            self.mark_strided(id, ANY_ORDER);
        } else if merge == Some(false) {
            // (It merges only dimensions that follow on from each other: still a view out of
            // order, of a layout no longer followed.)
            self.mark_strided(id, ANY_ORDER);
        } else if strided && matches!(name, "reshape" | "flatten" | "diagonal") {
            // (A reshape into several dimensions of one not laid out in order views it where it
            // only splits dimensions, and copies where it merges them, in order then; a
            // diagonal is of one dimension mostly: their layout is not known, and is taken to
            // be in order, as an op's result's is.)
            if let Some(t) = self.tensor_mut(id) {
                t.strided = 0;
            }
        }
        id
    }

    /// The layout `x.permute(dims)` (`name`, its arguments after the first `skip`) gives a
    /// tensor `base` laid out in order: which of its dimensions do not follow on from the one
    /// before them ([`TensorObj::strided`]) and how many there are. `None` for any other view,
    /// dimensions not known, or a base out of order already.
    fn permutation_layout(
        &self,
        base: ObjId,
        name: &str,
        (args, skip): (&Args, usize),
    ) -> Option<(u32, u8)> {
        if name != "permute" || self.tensor(base)?.strided != 0 || !args.keywords.is_empty() {
            return None;
        }
        let given = self.int_entries(args.positional.get(skip..)?)?;
        let rank = given.len();
        let dims = (given.iter())
            .map(|d| usize::try_from(if *d < 0 { *d + rank as i64 } else { *d }).ok())
            .collect::<Option<Vec<usize>>>()?;
        let mut seen = vec![false; rank];
        for &d in &dims {
            if d >= rank || std::mem::replace(&mut seen[d], true) {
                return None;
            }
        }
        let cut = (1..rank.min(32))
            .filter(|&k| dims[k] != dims[k - 1] + 1)
            .fold(0u32, |m, k| m | (1 << k));
        Some((cut, u8::try_from(rank).ok()?))
    }

    /// The integers a shape or a list of dimensions is given as: several arguments, or one
    /// list or tuple of them; `None` where one is not a known integer.
    fn int_entries(&self, given: &[(Vals, Option<ExprId>)]) -> Option<Vec<i64>> {
        self.int_or_unknown_entries(given)?.into_iter().collect()
    }

    /// Whether `base.reshape(shape)` / `base.flatten(start, end)` (`name`, its arguments after
    /// the first `skip`) merges dimensions of a permuted `base` (its layout known, see
    /// [`TensorObj::rank`]) that do not follow on from each other: then torch copies (measured
    /// with torch 2.15: `p.permute(0, 2, 3, 1).reshape(-1, c)` written in place leaves `p` at
    /// version 0, where `.reshape(b, -1, c)` is a view). Which dimensions a reshape merges is
    /// known where its shape has one `-1` and fewer entries than `base` has dimensions: the
    /// entries around it keep the dimensions at each end. (A dimension of size 1 would make it
    /// a view: a batch of one; taken to be larger.) `None` where not known, and where an entry
    /// is a product (`reshape(h * w, -1)` merges where the entry stands, not around the `-1`).
    fn merges_out_of_order(
        &self,
        c: Code<'_>,
        base: ObjId,
        name: &str,
        (args, skip): (&Args, usize),
    ) -> Option<bool> {
        let t = self.tensor(base)?;
        let rank = usize::from(t.rank);
        if rank == 0 || t.strided == ANY_ORDER {
            return None;
        }
        let given = args.positional.get(skip..)?;
        let merged = match name {
            "reshape" if args.keywords.is_empty() => {
                let shape = self.int_or_unknown_entries(given)?;
                let exprs: Vec<ExprId> = match given {
                    [(_, Some(e))] => match *c.expr(*e) {
                        Expr::Seq { items, .. } => c.body.exprs_of(items).collect(),
                        _ => vec![*e],
                    },
                    _ => given.iter().filter_map(|(_, e)| *e).collect(),
                };
                if exprs.len() != shape.len() {
                    return None;
                }
                // How many dimensions each entry stands for: a product of `k` factors merges
                // `k` where it stands (`reshape(b * h, -1)`), the `-1` takes the rest, any
                // other entry one; a floor division splits one (not decided).
                let mut widths = (exprs.iter())
                    .map(|e| factors(c, *e))
                    .collect::<Option<Vec<usize>>>()?;
                let free = shape.iter().position(|d| *d == Some(-1))?;
                if shape.iter().filter(|d| **d == Some(-1)).count() != 1 {
                    return None;
                }
                let known: usize = (widths.iter().enumerate())
                    .filter(|(k, _)| *k != free)
                    .map(|(_, w)| *w)
                    .sum();
                widths[free] = rank.checked_sub(known).filter(|w| *w >= 1)?;
                let mut start = 0;
                let mut cut = false;
                for w in widths {
                    cut |= (start + 1..start + w).any(|k| k < 32 && t.strided & (1 << k) != 0);
                    start += w;
                }
                return Some(cut);
            }
            "flatten" => {
                // (`start_dim=`, `end_dim=` as keywords too.)
                let mut ends = self.int_entries(given)?;
                // (`end_dim=` alone: from dimension 0.)
                let keyword = |k: &str| self.arg_named(args, k, None);
                if ends.is_empty() && keyword("end_dim").is_some() && keyword("start_dim").is_none()
                {
                    ends.push(0);
                }
                let given_len = ends.len();
                for (k, at) in [("start_dim", 0), ("end_dim", 1)] {
                    if let Some(v) = keyword(k) {
                        if ends.len() != at {
                            return None;
                        }
                        ends.push(self.one_int(v)?);
                    }
                }
                if args.keywords.len() + given_len != ends.len() {
                    return None;
                }
                let norm = |d: i64| usize::try_from(if d < 0 { d + rank as i64 } else { d }).ok();
                let (start, end) = match ends.as_slice() {
                    [] => (0, rank - 1),
                    [s] => (norm(*s)?, rank - 1),
                    [s, e] => (norm(*s)?, norm(*e)?),
                    _ => return None,
                };
                start..end + 1
            }
            _ => return None,
        };
        Some((merged.start + 1..merged.end).any(|k| k < 32 && t.strided & (1 << k) != 0))
    }

    /// The entries of a shape: a known integer, or `None` for one not known (`b`, `h * w`);
    /// `None` where the shape's length is not known.
    fn int_or_unknown_entries(&self, given: &[(Vals, Option<ExprId>)]) -> Option<Vec<Option<i64>>> {
        match given {
            [(v, _)] if self.one_int(v).is_none() => match v.as_slice() {
                [o] => match self.obj(*o) {
                    Obj::Seq(items) => Some(items.iter().map(|slot| self.one_int(slot)).collect()),
                    _ => None,
                },
                _ => None,
            },
            _ => Some(given.iter().map(|(v, _)| self.one_int(v)).collect()),
        }
    }

    /// Marks view `id` as not laid out in order (see `TensorObj::strided`), at the dimensions
    /// of `cut` (of a view of a tensor laid out in order; else at unknown ones).
    pub(super) fn mark_strided(&mut self, id: ObjId, cut: u32) {
        if let Some(t) = self.tensor_mut(id) {
            t.strided = if t.strided == 0 { cut } else { ANY_ORDER };
        }
    }

    /// Marks view `id` as one autograd refuses to see written (made by `op` at `at`).
    pub(super) fn refuse_view(&mut self, id: ObjId, op: RefusedBy, at: Span) {
        let Some(t) = self.tensor_mut(id) else {
            return;
        };
        let grad = t.grad == Tri::Yes;
        t.refused_view = Some(RefusedView { op, at, grad });
        let storage = t.storage;
        // (Rows of an iteration only over a parameter, `list(w)`: what else is iterated over
        // is often only taken to be a tensor.)
        let rows_of_leaf = op != RefusedBy::Iteration || t.view_of_leaf;
        if several(op) && grad && rows_of_leaf && self.grad_enabled {
            self.split_storages.insert(storage);
        }
    }

    /// Write `wid` changed tensors `written` (`targets`) in place: the views of them functions
    /// returning several made before it are refused as inputs from now on.
    pub(super) fn refuse_views_of(&mut self, written: &[TensorObj], wid: WriteId, targets: &Vals) {
        if self.split_storages.is_empty() {
            return;
        }
        let made_before = self.heap.len() as ObjId;
        // (Not a write through one of those views itself: that one is refused at once.)
        let through_view = |t: &TensorObj| t.refused_view.is_some_and(|r| several(r.op));
        for t in written.iter().filter(|t| t.counter && !through_view(t)) {
            if self.split_storages.contains(&t.storage) {
                let first = targets.first().copied().unwrap_or(UNKNOWN);
                self.split_written
                    .insert(t.storage, (wid, made_before, first));
            }
        }
    }

    /// An op autograd records reads `inputs` at `at`: one of them a view a function returning
    /// several made, before a write changed its tensor, raises there (reported once per view).
    fn check_refused_inputs(&mut self, inputs: &[Vals], at: Span) {
        if self.split_written.is_empty() || !self.grad_enabled {
            return;
        }
        for v in inputs.iter().flatten() {
            let Some(t) = self.tensor(*v) else { continue };
            let Some(view) = t.refused_view.filter(|r| several(r.op) && r.grad) else {
                continue;
            };
            let Some(&(write, made_before, written)) = self.split_written.get(&t.storage) else {
                continue;
            };
            if *v >= made_before || *v == written || !self.refused_reported.insert(*v) {
                continue;
            }
            self.report(Event::RefusedViewRead {
                write,
                view,
                read: at,
            });
        }
    }

    /// Some alternative of `v` is a list or tuple (`x.split([2, 3])` splits by sizes).
    pub(super) fn is_seq(&self, v: &Vals) -> bool {
        v.iter().any(|o| matches!(self.obj(*o), Obj::Seq(_)))
    }

    /// One of the views `op` (`chunk`, `split`, `unbind`) makes of `base` at `origin`.
    pub fn split_view_of(
        &mut self,
        base: ObjId,
        origin: Span,
        op: Option<RefusedBy>,
        part: Part,
    ) -> ObjId {
        let id = self.view_of(base, origin, part);
        // (Taken with grad mode on, a split's view is one whatever its base was; under
        // `no_grad` it is a `no_grad` view, as `view_of` made it.)
        // (An expanded view refuses writes in any mode.)
        if let Some(op) = op.filter(|op| self.grad_enabled || *op == RefusedBy::Expand) {
            self.refuse_view(id, op, origin);
        }
        id
    }

    /// `t.requires_grad = on` / `t.requires_grad_(on)`: a tensor without history becomes a
    /// leaf that requires grad; one that is a view (`x.unsqueeze(0)`, `x[0]`, not a
    /// `detach()`) becomes a view of a leaf too, so writing it in place is form ② (measured
    /// with torch 2.15).
    pub(super) fn set_requires_grad(&mut self, o: ObjId, on: bool) {
        // (Unfrozen after an optimizer listed it, it is not taken to be held by it: a name
        // rebound from it later is no replaced parameter. Not followed.)
        match on {
            true => self.frozen.remove(&o),
            false => {
                let param = self.tensor(o).is_some_and(|t| t.leaf) && self.parameters.contains(&o);
                param && self.frozen.insert(o)
            }
        };
        // (Only an activation a forward hook makes a leaf, `output.requires_grad_(True)` of
        // `enable_input_require_grads`: it is made anew by each call, never trained. A leaf
        // the program makes of an input, `x.clone().requires_grad_()`, may be what it
        // optimises.)
        let own = self
            .tensor(o)
            .filter(|t| on && t.node.is_none() && !self.parameters.contains(&t.storage))
            .filter(|_| self.running_hook.is_some())
            .map(|t| t.storage);
        if let Some(storage) = own {
            self.own_leaves.insert(storage);
        }
        if let Some(t) = self.tensor_mut(o) {
            t.grad = if on { Tri::Yes } else { Tri::No };
            t.leaf = on && t.node.is_none();
            // (What a view op made of a value an unseen call returned, `transform(img)
            // .unsqueeze(0)`, is taken for a tensor for certain once asked to require grad.)
            t.known |= on;
            if t.view_of.is_some() && t.node.is_none() {
                t.view_of_leaf = on;
            }
        }
    }

    /// The tensor whose `.grad` tensor `o`'s is: a leaf's memory owner (every name or element
    /// that stands for the same leaf reads one `.grad`, the one a backward accumulates into).
    fn grad_owner(&self, o: ObjId) -> ObjId {
        match self.tensor(o) {
            // (A leaf made of another's memory, `w.detach().requires_grad_()`, has its own.)
            Some(t) if t.leaf && t.counter && t.detached_from.is_none() => t.storage,
            _ => o,
        }
    }

    /// `o.grad` is `grad` now (`None`: the next backward makes a new one).
    pub(super) fn set_grad_tensor(&mut self, o: ObjId, grad: Option<ObjId>) {
        let owner = self.grad_owner(o);
        if let Some(t) = self.tensor_mut(owner) {
            t.grad_tensor = grad;
        }
    }

    pub fn detach_of(&mut self, base: ObjId, origin: Span) -> ObjId {
        let Some(t) = self.tensor(base) else {
            return self.alloc(Obj::Unknown);
        };
        let mut v = t.clone();
        v.grad = Tri::No;
        v.leaf = false;
        v.view_of_leaf = false;
        v.refused_view = None;
        v.node = None;
        v.view_origin = Some(origin);
        v.origin = origin;
        v.grad_tensor = None;
        v.detached_from = Some(base);
        // (The same memory as `base` under another name: `mark_stale` follows it.)
        v.view_of = None;
        self.alloc(Obj::Tensor(v))
    }

    pub fn data_alias(&mut self, base: ObjId, origin: Span) -> ObjId {
        let id = self.detach_of(base, origin);
        if let Some(t) = self.tensor_mut(id) {
            t.counter = false;
            t.view_origin = None;
        }
        id
    }

    /// A NumPy array sharing `base`'s memory, made by `call`: writes into it change the tensor
    /// without a version bump, as through `.data`.
    pub fn numpy_alias(&mut self, base: ObjId, call: Span, from_tensor: bool) -> ObjId {
        let id = self.data_alias(base, call);
        if let Some(t) = self.tensor_mut(id) {
            t.numpy = Some(NumpyShare {
                at: call,
                from_tensor,
            });
        }
        id
    }

    pub fn new_leaf(&mut self, grad: bool, origin: Span) -> ObjId {
        let id = self.heap.len() as ObjId;
        let mut t = TensorObj::fresh(id, if grad { Tri::Yes } else { Tri::No }, true, origin);
        t.leaf = grad;
        self.alloc(Obj::Tensor(t))
    }

    /// The tensors among `vals`; unknown values written in place are taken for tensors.
    pub fn as_tensors(&mut self, vals: &Vals) -> Vals {
        let mut out = Vals::new();
        for v in vals {
            match self.obj(*v) {
                Obj::Tensor(_) => out.push(*v),
                Obj::Unknown if *v != UNKNOWN => {
                    *self.obj_mut(*v) =
                        Obj::Tensor(TensorObj::fresh(*v, Tri::Maybe, false, Span::default()));
                    out.push(*v);
                }
                _ => {}
            }
        }
        out
    }

    /// A dict of module `m`'s submodules under their attribute names, in the order they were
    /// made.
    fn submodule_dict(&mut self, m: ObjId) -> ObjId {
        let Obj::Module(module) = self.obj(m) else {
            return self.keyed_dict(Vec::new());
        };
        let mut subs: Vec<(Name, Vals)> = (module.attrs.iter())
            .filter(|(_, v)| !v.is_empty() && v.iter().all(|x| self.is_module(*x)))
            .map(|(n, v)| (*n, v.clone()))
            .collect();
        subs.sort_by_key(|(_, v)| v[0]);
        let at = module.origin;
        let entries = subs.into_iter().map(|(n, v)| (Some((n, at)), v)).collect();
        self.keyed_dict(entries)
    }

    /// `o.attr`, where `e` is the attribute expression.
    pub(super) fn attribute_of(&mut self, c: Code<'_>, e: ExprId, o: ObjId, attr: Name) -> Vals {
        let range = c.span(e);
        // (The slot a record's field names, for `Obj::Seq` below.)
        let field = self.key_slot(o, attr).flatten();
        match self.obj(o) {
            Obj::Path(p) => {
                let p = *p;
                if let Some(v) = self.loose_attrs.get(&(o, attr)) {
                    return smallvec![*v];
                }
                if let Some(v) = self.module_member(p, attr) {
                    return v;
                }
                let path = self.path_join(p, attr);
                smallvec![self.alloc(Obj::Path(path))]
            }
            Obj::Tensor(t) => {
                let t = t.clone();
                self.tensor_attribute(c, e, o, &t, attr, range)
            }
            Obj::Module(m) => {
                if let Some(v) = m.attrs.get(&attr).cloned() {
                    if m.local.as_ref().is_some_and(|k| self.is_named_tuple(k, 0)) {
                        self.field_reads.insert(range);
                    }
                    self.read_slot(o, Slot::Attr(attr), range);
                    if self.getitem_self == Some(o) {
                        self.remember_stored(&v, attr, range);
                    } else if self.method_self == Some(o) {
                        self.remember_kept(&v, attr, range);
                    }
                    return v;
                }
                let method = m.local.as_ref().and_then(|k| self.find_method(k, attr));
                if let Some(def) = method {
                    // `self.scale` of an `@property`: what its getter returns.
                    if self.is_property(def) {
                        return self.inline(def, Some(o), &Args::default(), range);
                    }
                    return smallvec![self.alloc(Obj::Bound(o, def))];
                }
                let local = m.local.clone();
                if let Some(v) = (local.clone()).and_then(|k| self.class_attribute(&k, attr)) {
                    return v;
                }
                // `self._modules`: its submodules by name (`self._modules["gcl_%d" % i]`), in
                // the order they were made.
                if attr == known::MODULES {
                    return smallvec![self.submodule_dict(o)];
                }
                // A module is made in training mode (`eval()` sets it, above); the backward
                // whose hazards this finds runs in it.
                if attr == known::TRAINING {
                    return smallvec![TRUE];
                }
                if let Some(v) = local.and_then(|k| self.getattr_hook(o, &k, attr, range)) {
                    return v;
                }
                smallvec![self.loose_attr(o, attr)]
            }
            // `cls.__name__` (a registry's key).
            // (Compared as text: a name added to the known ones shifts every other name's id.)
            Obj::Class(k) if self.name(attr) == "__name__" => {
                let name = k.name;
                smallvec![self.alloc(Obj::Str(name))]
            }
            // `fn.__name__` (a registry of functions: `@register_model`).
            Obj::Func(def) if self.name(attr) == "__name__" => {
                let def = *def;
                match self.resolve_def(def) {
                    Some((body, f)) => smallvec![self.alloc(Obj::Str(body.func(f).name))],
                    None => smallvec![self.alloc(Obj::Unknown)],
                }
            }
            Obj::Class(k) => match self.find_method(k, attr) {
                Some(def) => smallvec![self.alloc(Obj::Func(def))],
                // `relu = MyReLU.apply`: bound to its class, applied when called.
                None if attr == known::APPLY && self.is_autograd_function(k, 0) => {
                    match self.find_method(k, known::FORWARD) {
                        Some(forward) => smallvec![self.alloc(Obj::Bound(o, forward))],
                        None => smallvec![self.alloc(Obj::Unknown)],
                    }
                }
                None => {
                    let k = k.clone();
                    match self.class_attribute(&k, attr) {
                        Some(v) => v,
                        None => smallvec![self.alloc(Obj::Unknown)],
                    }
                }
            },
            // `opt.param_groups` of a torch optimizer: one group whose `"params"` are the
            // parameters it holds (SAM's `self.param_groups = self.base_optimizer.param_groups`),
            // the same list each time.
            Obj::Optimizer { params, origin } if self.name(attr) == "param_groups" => {
                if let Some(v) = self.loose_attrs.get(&(o, attr)) {
                    return smallvec![*v];
                }
                let (params, origin) = (params.clone(), *origin);
                let key = self.intern("params");
                // (A list of the parameters, one slot each: `for p in group["params"]` walks
                // them, not the rows of one of them.)
                let list = Obj::Seq(params.iter().map(|p| smallvec![*p]).collect());
                let list = smallvec![self.alloc(list)];
                let group = self.keyed_dict(vec![(Some((key, origin)), list)]);
                let groups = self.alloc(Obj::Seq(vec![smallvec![group]]));
                self.loose_attrs.insert((o, attr), groups);
                smallvec![groups]
            }
            Obj::Other | Obj::Str(_) => smallvec![OTHER],
            Obj::Dist(_) => self.distribution_attribute(o, attr, range),
            // `args.__dict__` of a dict read by attribute: the dict itself.
            Obj::Seq(_) if self.dict_objs.contains(&o) && self.name(attr) == "__dict__" => {
                smallvec![o]
            }
            // `state.h` of a `namedtuple`.
            // (A read of its slot, as `state[0]` is: one a write changed since is read stale.)
            Obj::Seq(items) if field.is_some() => {
                let k = field.unwrap_or_default();
                let v = items[k].clone();
                self.field_reads.insert(range);
                self.read_slot(o, Slot::At(k as u32), range);
                v
            }
            // `x.max(dim=1).values`, `.indices`; `torch.linalg.svd(a).U`.
            Obj::Seq(items)
                if ops::result_field(self.name(attr)).is_some_and(|k| k < items.len()) =>
            {
                items[ops::result_field(self.name(attr)).unwrap_or_default()].clone()
            }
            Obj::Unknown if self.name(attr) == "T" && self.stored_arrays.contains_key(&o) => {
                self.stored_array_view(&smallvec![o]).unwrap_or_default()
            }
            _ => smallvec![self.loose_attr(o, attr)],
        }
    }

    /// `obj.name` that neither the instance nor its class holds, on an instance of a class of
    /// the program that defines `__getattr__`: what that returns for the name (a dict with
    /// attribute access, `return self[k]`; a wrapper's `return getattr(self.module, name)`),
    /// or the entry itself for `__getattr__ = dict.__getitem__` (or `dict.get`).
    fn getattr_hook(&mut self, o: ObjId, k: &ClassObj, attr: Name, at: Span) -> Option<Vals> {
        let hook = self.intern("__getattr__");
        if let Some(def) = self.find_method(k, hook) {
            let key = self.alloc(Obj::Str(attr));
            let args = Args {
                positional: vec![(smallvec![key], None)],
                keywords: Vec::new(),
                spread: false,
            };
            return Some(self.inline(def, Some(o), &args, at));
        }
        let path = match self.class_attribute(k, hook)?.as_slice() {
            [path] => *path,
            _ => return None,
        };
        let Obj::Path(p) = self.obj(path) else {
            return None;
        };
        if !matches!(
            self.name(*p),
            "builtins.dict.__getitem__" | "builtins.dict.get"
        ) {
            return None;
        }
        let d = self.dict_items(o)?;
        let slot = self.key_slot(d, attr).flatten()?;
        match self.obj(d) {
            Obj::Seq(items) => items.get(slot).cloned(),
            _ => None,
        }
    }

    /// The tensors in `vals` (read out of the dataset's `self.attr` at `read`) are kept by it.
    pub(super) fn remember_stored(&mut self, vals: &Vals, attr: Name, read: Span) {
        let mut flat = Vals::new();
        self.flatten(vals, &mut flat, &mut FxHashSet::default());
        for t in flat {
            if let Some(tt) = self.tensor(t).filter(|tt| tt.counter) {
                let storage = tt.storage;
                self.stored_reads.entry(storage).or_insert((attr, read));
            } else if matches!(self.obj(t), Obj::Unknown) && t != UNKNOWN {
                self.stored_arrays.entry(t).or_insert((attr, read));
            }
        }
    }

    /// Tensors a method read out of its own instance (`self.mask`): their storage outlives
    /// the call.
    fn remember_kept(&mut self, vals: &Vals, attr: Name, read: Span) {
        let depth = self.inlining.len();
        for &t in vals {
            // (Not a tensor the call itself made and stored, `self.buf = torch.zeros(n)`: its
            // storage id is an object made after the method was entered.)
            let kept = |tt: &&TensorObj| (tt.storage as usize) < self.method_heap;
            if let Some(tt) = (self.tensor(t))
                .filter(|tt| tt.counter && tt.known)
                .filter(kept)
            {
                let storage = tt.storage;
                self.kept_reads
                    .entry(storage)
                    .or_insert((attr, read, depth));
            }
        }
    }

    /// The attribute of an object we do not model, the same object each time.
    fn loose_attr(&mut self, o: ObjId, attr: Name) -> ObjId {
        if let Some(v) = self.loose_attrs.get(&(o, attr)) {
            return *v;
        }
        let v = self.alloc(Obj::Unknown);
        self.loose_attrs.insert((o, attr), v);
        v
    }

    fn tensor_attribute(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        o: ObjId,
        t: &TensorObj,
        attr: Name,
        range: Span,
    ) -> Vals {
        if attr == known::DATA {
            let alias = self.data_alias(o, range);
            if t.known || t.grad == Tri::Yes {
                let name_at = match *c.expr(e) {
                    Expr::Attr { attr_at, .. } => attr_at,
                    _ => range.rel.start,
                };
                let kept = self.stmt.is_some_and(|s| {
                    s.item == c.item
                        && matches!(*c.body.stmt(s.stmt), Stmt::Assign { value, .. } if value == e)
                });
                self.data_reads.entry(range).or_insert(DataRead {
                    name_at,
                    kept,
                    written: false,
                });
            }
            return smallvec![alias];
        }
        // (The code asks for the gradient of a leaf, or whether it is one, of a leaf rebound to
        // a computed update: the rebinding made it none.)
        // (Whether it requires grad only when it does not: computed under `no_grad`.)
        let asks = attr == known::GRAD
            || self.name(attr) == "is_leaf"
            || attr == known::REQUIRES_GRAD && t.grad == Tri::No;
        if asks {
            if let Some(e) = self.leaf_rebinds.remove(&o) {
                self.report(e);
            }
        }
        if attr == known::GRAD {
            // (Kept on the tensor that owns the memory: every name or element that stands for
            // the same leaf reads one `.grad`, the one a backward accumulates into.)
            let owner = self.grad_owner(o);
            if let Some(g) = self.tensor(owner).and_then(|t| t.grad_tensor) {
                self.grad_reads.insert(g, range);
                return smallvec![g];
            }
            let g = self.new_leaf(false, range);
            if let Some(gt) = self.tensor_mut(g) {
                gt.inference = None;
            }
            self.set_grad_tensor(o, Some(g));
            return smallvec![g];
        }
        // What autograd records of it, as far as it is known: `if x.requires_grad:`,
        // `if x.grad_fn is None:` (a fast path taken when autograd does not record) take one
        // branch then.
        // (A grad that rests on an argument is only assumed: either.)
        if attr == known::REQUIRES_GRAD {
            return match (t.grad, t.grad_if) {
                (Tri::Yes, None) => smallvec![TRUE],
                (Tri::No, None) => smallvec![FALSE],
                _ => smallvec![TRUE, FALSE],
            };
        }
        let a = self.name(attr);
        // (Its node stands as `True`: not `None`, and true.)
        if a == "grad_fn" {
            return match (t.node, t.grad, t.grad_if) {
                (Some(_), Tri::Yes, None) if !t.leaf => smallvec![TRUE],
                (None, Tri::No, None) => smallvec![NONE],
                _ if t.leaf => smallvec![NONE],
                _ => smallvec![TRUE, NONE],
            };
        }
        if ops::VIEW_ATTRS.contains(&a) {
            let strided = ops::STRIDED_VIEWS.contains(&a);
            let view = self.view_of(o, range, Part::of_view(a));
            if strided {
                self.mark_strided(view, ANY_ORDER);
            }
            return smallvec![view];
        }
        if ops::NON_TENSOR.contains(&a) {
            return smallvec![OTHER];
        }
        smallvec![self.alloc(Obj::Unknown)]
    }
}

/// How many dimensions a reshape's entry stands for: the factors of a product (`b * h * w`:
/// 3), else 1; `None` for a floor division or a true one (`c // g` splits a dimension).
fn factors(c: Code<'_>, e: ExprId) -> Option<usize> {
    match *c.expr(e) {
        Expr::Binary {
            op: BinOp::Mul,
            left,
            right,
        } => Some(factors(c, left)? + factors(c, right)?),
        Expr::Binary {
            op: BinOp::FloorDiv | BinOp::Div,
            ..
        } => None,
        _ => Some(1),
    }
}

/// An op's input in its node: the input's own node as a parent, or, for a tensor without
/// history that may require grad (a parameter, a leaf), its storage as a leaf of the node.
fn link_input(t: &TensorObj, parents: &mut SmallVec<[NodeId; 2]>, leaves: &mut SmallVec<[u32; 2]>) {
    match t.node {
        Some(n) if !parents.contains(&n) => parents.push(n),
        None if t.grad.is_possible() && !leaves.contains(&t.storage) => leaves.push(t.storage),
        _ => {}
    }
}

/// How an op is called: `torch.gather(x, ...)`, `x.gather(...)`, `F.cross_entropy(...)`.
#[derive(Clone, Copy)]
pub(super) enum CallForm {
    Torch,
    Method,
    Functional,
}

/// The inputs of an op that adds a product to a base (`addmm(bias, x, w)`) put in the table's
/// order: the factors first (its `self` and `other`), the base after them, linked but not saved.
pub(super) fn based_order(op: &str, inputs: &mut [Vals]) {
    if inputs.len() >= 3 && ops::table().op(op).is_some_and(|s| s.base_first) {
        inputs[..3].rotate_left(1);
    }
}

/// The views of a function returning several (a split, `unbind`, rows of an iteration).
fn several(op: RefusedBy) -> bool {
    matches!(
        op,
        RefusedBy::Split | RefusedBy::SplitWithSizes | RefusedBy::Unbind | RefusedBy::Iteration
    )
}
