//! Calls by qualified name: torch functions, `torch.nn.functional`, grad-mode contexts,
//! factories, `nn` classes, optimizers, and Python builtins.

use super::tensor::CallForm;
use super::write::WriteSpec;
use super::*;
use crate::events::{Event, WriteKind};
use crate::ops::{self, Saves};

/// Library dicts whose entries are attributes too (`cfg.lr` is `cfg["lr"]`).
const ATTRIBUTE_DICTS: &[&str] = &[
    "munch.Munch",
    "munch.DefaultMunch",
    "munch.munchify",
    "easydict.EasyDict",
    "addict.Dict",
    "attrdict.AttrDict",
    "box.Box",
    "ml_collections.ConfigDict",
    "argparse.Namespace",
    "types.SimpleNamespace",
];

/// The `torch.nn.functional` spelling of an in-place function (`relu_` -> `relu`).
pub(crate) fn strip_inplace(name: &str) -> Option<&str> {
    name.strip_suffix('_')
        .filter(|n| !n.ends_with('_') && !n.is_empty())
}

impl Interp<'_, '_> {
    /// The argument at position `i` or keyword `kw`, as written (the caller's expression; none
    /// for an argument bound by `functools.partial` or passed through `**kwargs`).
    pub(super) fn arg_expr(&self, args: &Args, i: usize, kw: Name) -> Option<ExprId> {
        args.keyword(kw)
            .map(|(_, e, _)| e)
            .or_else(|| args.positional.get(i).and_then(|(_, e)| *e))
            .and_then(ExprId::get)
    }

    /// The argument is `False` on every path (`requires_grad=False`).
    pub(super) fn arg_is_false(&self, args: &Args, i: usize, kw: Name) -> bool {
        args.named_or_at(kw, i)
            .is_some_and(|v| v.as_slice() == [FALSE])
    }

    /// A keyword given, `False` on every path (`bias=False`).
    pub(super) fn keyword_false(&self, args: &Args, kw: Name) -> bool {
        args.keyword(kw)
            .is_some_and(|(v, ..)| v.as_slice() == [FALSE])
    }

    /// Where `inplace=True` is given: by keyword, or `True` at position `at` (`F.leaky_relu(x,
    /// 0.2, True)`); `None` when it is not. A `True` bound by `functools.partial(nn.LeakyReLU,
    /// 0.1, True)` has no expression here: the call `e` stands for it.
    pub(super) fn inplace_arg(
        &self,
        c: Code<'_>,
        e: ExprId,
        args: &Args,
        at: Option<usize>,
    ) -> Option<Span> {
        let by_position = at
            .and_then(|i| args.positional.get(i))
            .filter(|(v, _)| v.contains(&TRUE))
            .map(|(_, n)| c.span(n.unwrap_or(e)));
        args.keyword(known::INPLACE)
            .filter(|(v, ..)| v.contains(&TRUE))
            .map(|(_, _, span)| span)
            .or(by_position)
    }

    /// A keyword given, with a value that may be anything but `False`.
    pub(super) fn keyword_on(&self, args: &Args, kw: Name) -> bool {
        args.keyword(kw)
            .is_some_and(|(v, ..)| v.as_slice() != [FALSE])
    }

    /// The length of the one list or tuple in `vals` whose slots are its elements one by one.
    pub(super) fn exact_len(&self, vals: &Vals) -> Option<i64> {
        let [one] = vals.as_slice() else { return None };
        match self.obj(*one) {
            Obj::Seq(items) if self.exact_seqs.contains(one) => Some(items.len() as i64),
            _ => None,
        }
    }

    /// `Variable(t, requires_grad=...)`, the old wrapper: a new leaf over the tensor's memory,
    /// without its history (`t.detach()`), which requires grad when asked (measured with torch
    /// 2.15).
    fn variable(&mut self, first_arg: &Vals, args: &Args, call: Span) -> Vals {
        let grad = args
            .named_or_at(known::REQUIRES_GRAD, 1)
            .is_some_and(|v| v.as_slice() == [TRUE]);
        let mut out = Vals::new();
        for &v in first_arg {
            let d = match self.tensor(v) {
                Some(_) => self.detach_of(v, call),
                None if grad => self.new_leaf(true, call),
                None => self.alloc(Obj::Unknown),
            };
            if grad {
                self.set_requires_grad(d, true);
            }
            out.push(d);
        }
        if out.is_empty() {
            out.push(self.alloc(Obj::Unknown));
        }
        out
    }

    /// `torch._foreach_mul_(xs, s)`, `torch._foreach_add_(xs, ys, alpha=a)`,
    /// `torch._foreach_lerp_(xs, ys, w)`: the in-place method on each tensor of the first list,
    /// with the element at the same position of a list given next (pairs in order when the
    /// lists have the same length, else any of them).
    fn foreach_inplace(&mut self, c: Code<'_>, e: ExprId, meth: &str, args: &Args) -> Vals {
        let Some(((first, first_expr), rest)) = args.positional.split_first() else {
            return smallvec![self.alloc(Obj::Unknown)];
        };
        // (Each slot of the list is read out to be written: the code works on the tensors
        // through it, as `for p in ps: p.mul_(s)` does.)
        self.elements(first);
        let mut targets = Vals::new();
        self.flatten_in_order(first, &mut targets, &mut Vec::new());
        targets.retain(|v| self.maybe_tensor(*v));
        let paired = rest.first().and_then(|(v, _)| {
            let lists = v
                .iter()
                .all(|x| matches!(self.obj(*x), Obj::Seq(_) | Obj::Params { .. }));
            if !lists {
                return None;
            }
            let mut items = Vals::new();
            self.flatten_in_order(v, &mut items, &mut Vec::new());
            Some(items)
        });
        let meth = self.intern(meth);
        let recv_expr = first_expr.unwrap_or(ExprId::NONE);
        for (k, t) in targets.clone().into_iter().enumerate() {
            let mut each = args.clone();
            each.positional.remove(0);
            if let (Some(items), Some(slot)) = (&paired, each.positional.first_mut()) {
                slot.0 = match items.get(k).filter(|_| items.len() == targets.len()) {
                    Some(x) => smallvec![*x],
                    None => items.clone(),
                };
            }
            self.tensor_method(c, e, &smallvec![t], meth, &each, recv_expr);
        }
        smallvec![NONE]
    }

    /// `torch._foreach_mul(xs, s)` and the other out-of-place fused ops: a list of new tensors,
    /// one per tensor of the first list, each carrying its history and the other operands'.
    fn foreach_results(&mut self, args: &Args, call: Span) -> Vals {
        let Some(((first, _), rest)) = args.positional.split_first() else {
            return smallvec![self.alloc(Obj::Unknown)];
        };
        let mut items = Vals::new();
        self.flatten_in_order(first, &mut items, &mut Vec::new());
        items.retain(|v| self.maybe_tensor(*v));
        // (Each result from the element at its position of each other list, when the lengths
        // agree; else from all of them, linked once through one node.)
        let mut columns: Vec<Vals> = Vec::new();
        let mut shared = Vals::new();
        for (v, _) in rest {
            let mut col = Vals::new();
            self.flatten_in_order(v, &mut col, &mut Vec::new());
            col.retain(|x| self.maybe_tensor(*x));
            if col.len() == items.len() {
                columns.push(col);
            } else {
                shared.extend(col);
            }
        }
        let shared: Vals = match shared.len() {
            0 | 1 => shared,
            _ => smallvec![self.derive(&[shared], call, Saves::default(), None, false)],
        };
        let slots: Vec<Vals> = (items.into_iter().enumerate())
            .map(|(k, v)| {
                let mut others = shared.clone();
                others.extend(columns.iter().map(|c| c[k]));
                let inputs = [smallvec![v], others];
                smallvec![self.derive(&inputs, call, Saves::default(), None, true)]
            })
            .collect();
        smallvec![self.alloc(Obj::Seq(slots))]
    }

    pub(super) fn call_path(&mut self, c: Code<'_>, e: ExprId, path: Name, args: &Args) -> Vals {
        let call = c.span(e);
        let p = self.name(path).to_string();
        if let Some(v) = self.call_unbound_method(c, e, &p, args) {
            return v;
        }
        if let Some(v) = self.call_python_library(c, e, &p, args) {
            return v;
        }
        // (`math.sqrt(d)`, `math.log(n)`: a number.)
        if p.starts_with("math.") {
            return smallvec![OTHER];
        }
        if !p.starts_with("torch") {
            // `np.transpose(img, (2, 0, 1))` of an array a dataset keeps: a view of it.
            // (`np.asarray(img, dtype=np.float32)` of another dtype copies: only the array
            // alone, or with the axes and shapes the others take.)
            let numpy_view = (p.strip_prefix("numpy.")).is_some_and(|f| {
                ops::NUMPY_VIEW_FUNCTIONS.contains(&f)
                    && (f != "asarray" || (args.positional.len() == 1 && args.keywords.is_empty()))
            });
            if let (true, Some(first)) = (numpy_view, args.positional.first()) {
                if let Some(view) = self.stored_array_view(&first.0.clone()) {
                    return view;
                }
            }
            return self.opaque_call(args, call);
        }
        if let Some(v) = self.call_torch_runtime(c, e, &p, args) {
            return v;
        }
        let out = self.call_torch_api(c, e, &p, args);
        // `pack_padded_sequence(x, lengths)`: a recurrent layer given it keeps no output.
        let last = p.rsplit('.').next().unwrap_or(&p);
        if matches!(
            last,
            "pack_sequence" | "pack_padded_sequence" | "PackedSequence"
        ) {
            self.packed.extend(out.iter().copied());
        }
        out
    }

    /// `torch.Tensor.add_(y, 1)` (the unbound method) and `operator.iadd(y, 1)`: the method on
    /// the first argument, when it is a tensor.
    fn call_unbound_method(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        p: &str,
        args: &Args,
    ) -> Option<Vals> {
        let unbound = (p.strip_prefix("torch.Tensor."))
            .or_else(|| p.strip_prefix("operator.").and_then(ops::inplace_operator));
        if let (Some(meth), Some((recv, recv_expr))) = (unbound, args.positional.first()) {
            let tensors: Vals = (recv.iter().copied())
                .filter(|v| matches!(self.obj(*v), Obj::Tensor(_)))
                .collect();
            if !tensors.is_empty() {
                let rest = Args {
                    positional: args.positional[1..].to_vec(),
                    keywords: args.keywords.clone(),
                    spread: false,
                };
                let meth = self.intern(meth);
                let recv_expr = recv_expr.unwrap_or(ExprId::NONE);
                return Some(self.tensor_method(c, e, &tensors, meth, &rest, recv_expr));
            }
        }
        None
    }

    /// A call of Python's own library the analysis models: builtins, `copy`, `collections`,
    /// `functools.partial`, dataclass fields, named tuples, torchvision's transforms.
    fn call_python_library(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        p: &str,
        args: &Args,
    ) -> Option<Vals> {
        let call = c.span(e);
        let first_arg = args.first().cloned().unwrap_or_default();
        if p == "builtins.map" {
            return Some(self.call_map(c, e, args));
        }
        if let Some(b) = p.strip_prefix("builtins.") {
            return Some(self.call_builtin(c, e, b, args));
        }
        // `copy.copy(x)`: a module copied so shares its parameters (its `_parameters` dict is the
        // same), a tensor so shares its memory but not its version counter (as `.data` does), a
        // dict so holds the same values: measured with torch 2.15. So does
        // `collections.OrderedDict(d)` of a dict.
        if p == "copy.copy" || p == "collections.OrderedDict" {
            if let Some(v) = self.shallow_copy(&first_arg, args, call, p == "copy.copy") {
                return Some(v);
            }
        }
        // `defaultdict(list)`, `defaultdict(dict)`: an empty dict that adds an empty list or
        // dict at a key read that is not there (`history["loss"].append(x)`).
        if p == "collections.defaultdict" {
            let kind = match first_arg.as_slice() {
                [one] => match self.obj(*one) {
                    Obj::Path(f) => match self.name(*f) {
                        "builtins.list" => Some(true),
                        "builtins.dict" => Some(false),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            };
            let d = self.keyed_dict(Vec::new());
            if let Some(list) = kind {
                self.default_factories.insert(d, list);
            }
            return Some(smallvec![d]);
        }
        // `deque(maxlen=n)`, `deque(xs)`: a list (a replay buffer; what `maxlen` drops is kept:
        // a stored graph may still be sampled).
        if p == "collections.deque" {
            let seq = match args.positional.is_empty() {
                true => {
                    let seq = self.alloc(Obj::Seq(Vec::new()));
                    self.exact_seqs.insert(seq);
                    seq
                }
                false => {
                    let mut items = args.clone();
                    items.positional.truncate(1);
                    items.keywords.clear();
                    let made = self.call_builtin(c, e, "list", &items);
                    let [seq] = made.as_slice() else {
                        return Some(made);
                    };
                    *seq
                }
            };
            // (`deque(xs, maxlen=n)`: its last `n` items; a `maxlen` not known is not followed.)
            let maxlen = args
                .named_or_at(self.intern("maxlen"), 1)
                .and_then(|v| self.one_int(v));
            if let Some(n) = maxlen.and_then(|n| usize::try_from(n).ok()) {
                self.deque_maxlen.insert(seq, n);
                self.trim_deque(seq, true);
            }
            return Some(smallvec![seq]);
        }
        // `OrderedDict(pairs)`, `OrderedDict(a=x)`, `OrderedDict()`: as `dict(...)` (its order
        // is a dict's too).
        if p == "collections.OrderedDict" {
            return Some(self.call_builtin(c, e, "dict", args));
        }
        // Dicts whose entries are also read as attributes (`model = Munch(decoder=...,
        // wd=...)`, then `model.wd`): as `dict(...)`; an attribute read of a dict with known
        // keys reads the entry (see `attribute_of`).
        if ATTRIBUTE_DICTS.contains(&p) {
            return Some(self.call_builtin(c, e, "dict", args));
        }
        if p == "argparse.ArgumentParser" {
            return Some(self.new_arg_parser());
        }
        if p == "copy.deepcopy" {
            if let Some(v) = self.deepcopy(args) {
                return Some(v);
            }
        }
        // `types.MethodType(f, obj)`: `f` bound to `obj`, a method patched onto it at run
        // time (as a partial with `obj` first).
        if p == "types.MethodType" {
            if let [(func, _), (obj, _)] = args.positional.as_slice() {
                let bound = Obj::Partial {
                    func: func.clone(),
                    positional: vec![obj.clone()],
                    keywords: Vec::new(),
                };
                return Some(smallvec![self.alloc(bound)]);
            }
        }
        if p == "functools.partial" {
            let Some((func, rest)) = args.positional.split_first() else {
                return Some(smallvec![self.alloc(Obj::Unknown)]);
            };
            let partial = Obj::Partial {
                func: func.0.clone(),
                positional: rest.iter().map(|(v, _)| v.clone()).collect(),
                keywords: args
                    .keywords
                    .iter()
                    .map(|(n, v, _, s)| (*n, v.clone(), *s))
                    .collect(),
            };
            return Some(smallvec![self.alloc(partial)]);
        }
        // A dataclass field's default (`init_record` evaluates it for each instance):
        // `field(default_factory=list)` calls the factory, `field(default=v)` is `v`.
        if p == "dataclasses.field" {
            let (factory, default) = (self.intern("default_factory"), self.intern("default"));
            if let Some((fs, ..)) = args.keyword(factory) {
                let mut out = Vals::new();
                for f in fs.clone() {
                    out.extend(self.call_value(c, e, f, &Args::default()));
                }
                return Some(out);
            }
            return Some(match args.keyword(default) {
                Some((v, ..)) => v.clone(),
                None => smallvec![self.alloc(Obj::Unknown)],
            });
        }
        if matches!(p, "collections.namedtuple" | "typing.NamedTuple") {
            if let Some(fields) = self.record_fields_given(args) {
                return Some(smallvec![self.alloc(Obj::Record(fields.into()))]);
            }
        }
        if let Some(t) = p.strip_prefix("torchvision.transforms.") {
            if let Some(v) = self.call_transform(c, e, t, args) {
                return Some(v);
            }
        }
        None
    }

    /// torch's runtime around the ops: grad modes, distributions, `_foreach_` ops, weight
    /// norm, data loading, saving, autograd's entry points, checkpoints, parameters.
    fn call_torch_runtime(&mut self, c: Code<'_>, e: ExprId, p: &str, args: &Args) -> Option<Vals> {
        let call = c.span(e);
        let first_arg = args.first().cloned().unwrap_or_default();
        // `if torch.is_grad_enabled(): ... else: <in-place fast path>`.
        if p == "torch.is_grad_enabled" {
            return Some(smallvec![if self.grad_enabled { TRUE } else { FALSE }]);
        }
        // `torch.equal(before, model.weight)` after a step compares as `before - model.weight`
        // does: a parameter with itself.
        if matches!(
            p,
            "torch.equal" | "torch.allclose" | "torch.sub" | "torch.dist"
        ) && !self.step_log.is_empty()
        {
            if let [(a, Some(l)), (b, Some(r)), ..] = args.positional.as_slice() {
                self.difference_with_itself(c, (*l, a), (*r, b));
            }
        }
        // `torch.equal(query, key)` of the one tensor passed twice: true.
        if p == "torch.equal" {
            let same = match args.positional.as_slice() {
                [(a, _), (b, _)] => a.len() == 1 && a == b && self.tensor(a[0]).is_some(),
                _ => false,
            };
            return Some(smallvec![if same { TRUE } else { OTHER }]);
        }
        if matches!(
            p,
            "torch.nn.utils.weight_norm" | "torch.nn.utils.parametrizations.weight_norm"
        ) {
            if let Some(v) = self.weight_norm(c, e, args) {
                return Some(v);
            }
        }
        if let Some(v) = self.distribution_call(p, args, call) {
            return Some(v);
        }
        if let Some(meth) = p.strip_prefix("torch._foreach_") {
            if meth.ends_with('_') {
                return Some(self.foreach_inplace(c, e, meth, args));
            }
            return Some(self.foreach_results(args, call));
        }
        if let Some(v) = self.grad_mode_call(c, p, args, call) {
            return Some(v);
        }
        if matches!(
            p,
            "torch.utils.data.DataLoader" | "torch.utils.data.dataloader.DataLoader"
        ) {
            if let Some(loader) = self.unbatched_loader(args, call) {
                return Some(smallvec![loader]);
            }
            // Batches are stacked from the samples: new tensors, not the dataset's (unless
            // a `collate_fn` of the program's passes the samples through).
            let collate = self.intern("collate_fn");
            if args.keyword(collate).is_none() {
                return Some(smallvec![self.alloc(Obj::Unknown)]);
            }
        }
        if matches!(
            p,
            "torch.utils.data.TensorDataset" | "torch.utils.data.dataset.TensorDataset"
        ) {
            return Some(smallvec![self.tensor_dataset(args, call)]);
        }
        match p {
            // `torch.save(best_state, path)` writes out every entry of the state given: a stale
            // snapshot is read here (what it saves are the values of now).
            "torch.save" => {
                if let Some((v, Some(arg))) = args.positional.first() {
                    self.read_entries(v, c.span(*arg));
                }
                return Some(smallvec![OTHER]);
            }
            "torch.autograd.backward" => {
                let retain = self.keyword_on(args, known::RETAIN_GRAPH);
                self.check_graph(&first_arg, call, retain, true);
                return Some(smallvec![OTHER]);
            }
            "torch.autograd.grad" => {
                let outputs = args
                    .keyword(known::OUTPUTS)
                    .map(|(v, ..)| v.clone())
                    .unwrap_or(first_arg);
                let retain = self.keyword_on(args, known::RETAIN_GRAPH)
                    || args.keyword(known::CREATE_GRAPH).is_some();
                let inputs =
                    (args.named_or_at(self.intern("inputs"), 1).cloned()).unwrap_or_default();
                self.check_graph_until(&outputs, &inputs, call, retain, true);
                // With `create_graph=True` the gradients are computed by ops autograd records:
                // they carry the graph they were taken through, and a later backward through
                // them (MAML's inner step `w -= lr * gw`, a gradient penalty) reaches what its
                // ops saved.
                if self.keyword_on(args, known::CREATE_GRAPH) {
                    if let Some(out) = self.gradient_graph(&outputs, &inputs, call) {
                        return Some(smallvec![out]);
                    }
                }
                return Some(smallvec![self.alloc(Obj::Unknown)]);
            }
            "torch.autograd.functional.jacobian"
            | "torch.autograd.functional.hessian"
            | "torch.autograd.functional.vjp"
            | "torch.autograd.functional.jvp"
            | "torch.autograd.functional.vhp"
            | "torch.autograd.functional.hvp" => return Some(self.call_differentiated(c, e, args)),
            "torch.utils.checkpoint.checkpoint" if !args.positional.is_empty() => {
                return Some(self.call_checkpointed(c, e, args));
            }
            "torch.utils.checkpoint.checkpoint_sequential" => {
                if let Some(out) = self.checkpoint_sequential(c, e, args) {
                    return Some(out);
                }
            }
            "torch.autograd.Variable" | "torch.autograd.variable.Variable" => {
                return Some(self.variable(&first_arg, args, call));
            }
            "torch.nn.Parameter" | "torch.nn.parameter.Parameter" | "torch.nn.Buffer" => {
                let param = p.ends_with("Parameter");
                let grad = param && !self.arg_is_false(args, 1, known::REQUIRES_GRAD);
                let t = self.new_leaf(grad, call);
                if param {
                    self.parameters.insert(t);
                    // (`nn.Parameter(x, requires_grad=False)`: a frozen one.)
                    if !grad {
                        self.frozen.insert(t);
                    }
                }
                return Some(smallvec![t]);
            }
            _ => {}
        }
        None
    }

    /// torch's API proper: optimizers, `nn.init`, `nn.functional`, layers, `torch.<op>`.
    fn call_torch_api(&mut self, c: Code<'_>, e: ExprId, p: &str, args: &Args) -> Vals {
        let call = c.span(e);
        let first_arg = args.first().cloned().unwrap_or_default();
        let last = p.rsplit('.').next().unwrap_or(p).to_string();
        if p.starts_with("torch.optim.") && !p.contains("lr_scheduler") && !p.contains("swa_utils")
        {
            let params = args
                .keyword(known::PARAMS)
                .map(|(v, ..)| v.clone())
                .unwrap_or(first_arg);
            // (Built by a factory, `return torch.optim.SGD(...)` in `build_optimizer(model)`: it
            // is built where the factory is called; an IP403 fix builds it again there.)
            let factory = self.inlining.len() > self.unit_depth
                && self.stmt.is_some_and(|s| {
                    s.item == c.item && matches!(c.body.stmt(s.stmt), Stmt::Return(_))
                });
            let origin = match self.call_site {
                Some(site) if factory => site,
                _ => call,
            };
            return smallvec![self.new_optimizer(&params, origin)];
        }
        // `F.embedding(idx, weight, max_norm=1.0)`: the rows it looks up renormalised in place
        // in the weight given, as the layer with `max_norm` does (measured with torch 2.15: an op
        // that saved the weight before raises at its backward).
        if p == "torch.nn.functional.embedding" {
            let max_norm = args.named_or_at(known::MAX_NORM, 3);
            if let (Some(v), Some((weight, _))) = (max_norm, args.positional.get(1)) {
                if v.as_slice() != [NONE] {
                    let weight = self.as_tensors(&weight.clone());
                    let spec = WriteSpec::new(WriteKind::Renorm, call, call)
                        .no_leaf_check()
                        .call(e);
                    self.write(&weight, spec);
                }
            }
        }
        if p.starts_with("torch.nn.init.") {
            if !first_arg.is_empty() {
                let tensors = self.as_tensors(&first_arg);
                let name = self.intern(&last);
                // (Written through the name given: `nn.init.zeros_(p)` then `p[2:4]` reads
                // what it wrote, no other name's.)
                let (through, keep) = self.first_arg_names(c, args, call);
                let spec = WriteSpec::new(WriteKind::Init(name), call, call)
                    .no_leaf_check()
                    .through(through, keep);
                self.write(&tensors, spec);
            }
            return first_arg;
        }
        if let Some(f) = p.strip_prefix("torch.nn.functional.") {
            let moved = args.operands_by_position(false);
            return self.call_functional(c, e, f, moved.as_ref().unwrap_or(args));
        }
        // `nn.Embedding.from_pretrained(vectors, freeze=False, max_norm=1.0)`: the layer (its
        // `max_norm` where the constructor takes it too), its weight frozen unless `freeze=False`.
        let pretrained = (p.strip_prefix("torch.nn."))
            .and_then(|r| r.strip_suffix(".from_pretrained"))
            .filter(|k| matches!(*k, "Embedding" | "EmbeddingBag"));
        if let Some(class) = pretrained {
            let m = self.new_module(c, e, class, args);
            let freeze = self.intern("freeze");
            if !self.arg_is_false(args, 1, freeze) {
                let weight = match self.obj(m) {
                    Obj::Module(module) => module.attrs.get(&known::WEIGHT).cloned(),
                    _ => None,
                };
                for w in weight.unwrap_or_default() {
                    self.set_requires_grad(w, false);
                }
            }
            return smallvec![m];
        }
        let is_nn_class = p.starts_with("torch.nn.")
            && last
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_uppercase());
        if is_nn_class && !p.starts_with("torch.nn.functional") && !p.starts_with("torch.nn.utils")
        {
            return smallvec![self.new_module(c, e, &last, args)];
        }
        if let Some(f) = p.strip_prefix("torch.") {
            if !f.contains('.')
                || f.starts_with("special.")
                || f.starts_with("linalg.")
                || f.starts_with("fft.")
            {
                let moved = args.operands_by_position(false);
                return self.call_torch_fn(c, e, f, moved.as_ref().unwrap_or(args));
            }
        }
        self.opaque_call(args, call)
    }

    /// `jacobian(func, inputs)` and friends: `func` runs on inputs that require grad, and a
    /// backward runs through what it returns.
    fn call_differentiated(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Vals {
        let call = c.span(e);
        let (Some((f, _)), Some((inputs, _))) = (args.positional.first(), args.positional.get(1))
        else {
            return smallvec![self.alloc(Obj::Unknown)];
        };
        let (f, inputs) = (f.clone(), inputs.clone());
        let mut leaves = Vec::new();
        let flat = self.flat_tensors(&inputs);
        for _ in &flat {
            leaves.push((smallvec![self.new_leaf(true, call)], None));
        }
        if leaves.is_empty() {
            leaves.push((smallvec![self.new_leaf(true, call)], None));
        }
        let a = Args {
            positional: leaves,
            keywords: Vec::new(),
            spread: false,
        };
        let mut out = Vals::new();
        for func in f {
            out.extend(self.call_value(c, e, func, &a));
        }
        self.check_graph(&out, call, false, true);
        smallvec![self.alloc(Obj::Unknown)]
    }

    /// `map(f, xs)`: `f` called on each element, in order (one call for a summary slot).
    fn call_map(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Vals {
        let (Some((f, _)), Some((xs, _))) = (args.positional.first(), args.positional.get(1))
        else {
            return smallvec![self.alloc(Obj::Unknown)];
        };
        let (f, xs) = (f.clone(), xs.clone());
        // (`map(f, (q, *kv))`: its star's slot stands for several results too.)
        let star = match xs.as_slice() {
            [one] => self.starred_slots.get(one).copied(),
            _ => None,
        };
        let slots: Vec<Vals> = match xs.as_slice() {
            [one] => match self.obj(*one) {
                Obj::Seq(items) => items.clone(),
                _ => vec![self.elements(&xs)],
            },
            _ => vec![self.elements(&xs)],
        };
        let mut out = Vec::with_capacity(slots.len());
        for slot in slots.into_iter().take(MAX_SLOTS) {
            let mut results = Vals::new();
            for func in &f {
                results.extend(self.call_value(c, e, *func, &Args::one(slot.clone())));
            }
            out.push(self.bounded(results));
        }
        let seq = self.alloc(Obj::Seq(out));
        if let Some(at) = star {
            self.starred_slots.insert(seq, at);
        }
        smallvec![seq]
    }

    /// `torch.no_grad()` and friends: a context object; anomaly mode is also an event.
    fn grad_mode_call(&mut self, c: Code<'_>, p: &str, args: &Args, call: Span) -> Option<Vals> {
        let ctx = match p {
            "torch.no_grad" | "torch.autograd.no_grad" | "torch.autograd.grad_mode.no_grad" => {
                GradCtx::NoGrad
            }
            "torch.enable_grad" | "torch.autograd.enable_grad" => GradCtx::EnableGrad,
            "torch.inference_mode" | "torch.autograd.inference_mode" => {
                // (Inference tensors only where it surely is on: no argument, or `True`.)
                let on = (args.positional.is_empty() && args.keywords.is_empty())
                    || args
                        .named_or_at(known::MODE, 0)
                        .is_some_and(|v| v.as_slice() == [TRUE]);
                if self.arg_is_false(args, 0, known::MODE) {
                    GradCtx::EnableGrad
                } else if on {
                    GradCtx::Inference
                } else {
                    GradCtx::NoGrad
                }
            }
            "torch.set_grad_enabled" | "torch.autograd.set_grad_enabled" => {
                GradCtx::Set(!self.arg_is_false(args, 0, known::MODE))
            }
            "torch.autograd.set_detect_anomaly"
            | "torch.autograd.detect_anomaly"
            | "torch.autograd.anomaly_mode.set_detect_anomaly"
            | "torch.autograd.anomaly_mode.detect_anomaly"
            | "torch.set_anomaly_enabled" => {
                // `detect_anomaly(check_nan=True)` always turns it on (its argument is
                // `check_nan`); `set_detect_anomaly(mode)` and `set_anomaly_enabled(enabled)`
                // only when the mode is certainly true: a mode read from a flag or a setting
                // is the guard the rule recommends.
                let on = if !p.ends_with(".detect_anomaly") {
                    self.arg_expr(args, 0, known::MODE)
                        .is_some_and(|e| matches!(c.expr(e), Expr::True))
                } else {
                    true
                };
                if on && self.inlining.len() <= 1 {
                    self.report(Event::Anomaly { call });
                }
                GradCtx::Anomaly
            }
            "torch.autograd.graph.allow_mutation_on_saved_tensors" => GradCtx::AllowMutation,
            "torch.autocast"
            | "torch.amp.autocast"
            | "torch.amp.autocast_mode.autocast"
            | "torch.cuda.amp.autocast"
            | "torch.cpu.amp.autocast" => {
                // (On unless `enabled` says otherwise, in float16 or bfloat16 unless `dtype`
                // names another; `torch.autocast(device_type, dtype, enabled)`, the older
                // `torch.cuda.amp.autocast(enabled, dtype)`.)
                let (at_enabled, at_dtype) =
                    match p.contains(".amp.autocast") && !p.starts_with("torch.amp") {
                        true => (0, 1),
                        false => (2, 1),
                    };
                let enabled = self.intern("enabled");
                let dtype = self.intern("dtype");
                let on =
                    (args.named_or_at(enabled, at_enabled)).is_none_or(|v| v.as_slice() == [TRUE]);
                let low = (args.named_or_at(dtype, at_dtype)).is_none_or(|v| {
                    !v.is_empty()
                        && v.iter().all(|x| match self.obj(*x) {
                            Obj::Path(p) => matches!(
                                self.name(*p),
                                "torch.float16" | "torch.half" | "torch.bfloat16"
                            ),
                            _ => *x == NONE,
                        })
                });
                GradCtx::Autocast(on && low)
            }
            _ => return None,
        };
        Some(smallvec![self.alloc(Obj::GradCtx(ctx))])
    }

    /// The layers of an `nn.Sequential` or `nn.ModuleList` `m`, in the order it runs or
    /// lists them.
    fn layers_in_order(&self, m: ObjId) -> Option<Vec<ObjId>> {
        match (self.container_of(m), self.obj(m)) {
            (Some(Container::Sequential | Container::ModuleList), Obj::Module(module)) => {
                Some(module.children.clone())
            }
            _ => None,
        }
    }

    /// `list(x)`, `tuple(x)`, `iter(x)`, `reversed(x)`, `sorted(x)`, `set(x)`, `filter(f, x)`.
    fn call_listing(&mut self, name: &str, args: &Args, first: Vals, at: Span) -> Vals {
        // `list()`, `tuple()`: an empty one, as `[]` and `()` are (`rep = list()` that layers
        // are appended to, then `nn.Sequential(*rep)`).
        if args.positional.is_empty() && args.keywords.is_empty() && name != "filter" {
            let seq = self.alloc(Obj::Seq(Vec::new()));
            self.exact_seqs.insert(seq);
            match name {
                "tuple" => self.tuples.insert(seq),
                "list" | "sorted" => self.lists.insert(seq),
                _ => false,
            };
            return smallvec![seq];
        }
        let source = if name == "filter" {
            args.positional
                .get(1)
                .map(|(v, _)| v.clone())
                .unwrap_or_default()
        } else {
            first
        };
        // `list(d)` of a dict with its keys all known: its keys, in order.
        if let ([one], "list" | "tuple" | "iter") = (source.as_slice(), name) {
            if self.dict_objs.contains(one) {
                if let Some(keys) = self.dict_key_list(*one) {
                    return smallvec![keys];
                }
            }
        }
        // `list(model.parameters())`: one slot per parameter, in order (a loop over
        // it writes each); `list(model.children())`, `tuple(xs)`: a copy of the list,
        // slot by slot (`[:-1]` of it drops the last); else one slot that may be any
        // element.
        let slots = match (source.as_slice(), name) {
            ([one], "list" | "tuple") => match self.obj(*one) {
                Obj::Params { tensors, .. } => {
                    Some(tensors.iter().map(|t| smallvec![*t]).collect())
                }
                // (Not a dict's: `list(d)` gives its keys.)
                Obj::Seq(slots) if slots.len() > 1 && !self.dict_keys.contains_key(one) => {
                    Some(slots.clone())
                }
                // `list(cnn)` of an `nn.Sequential` or `nn.ModuleList`: its layers, in
                // order (rebuilt into another one, they keep their neighbours).
                Obj::Module(_) => (self.layers_in_order(*one))
                    .map(|layers| layers.into_iter().map(|l| smallvec![l]).collect()),
                _ => None,
            },
            _ => None,
        };
        // (A copy of a list whose slots are its elements is one too.)
        let exact = slots.is_some()
            && (self.exact_len(&source).is_some()
                || matches!(source.as_slice(), [one] if matches!(self.obj(*one), Obj::Module(_))));
        let slots = slots.unwrap_or_else(|| vec![self.elements(&source)]);
        let params =
            matches!(source.as_slice(), [one] if matches!(self.obj(*one), Obj::Params { .. }));
        let seq = self.alloc(Obj::Seq(slots));
        if exact {
            self.exact_seqs.insert(seq);
        }
        if params && name != "iter" {
            self.param_lists.insert(seq, at);
        }
        match name {
            "tuple" => self.tuples.insert(seq),
            "list" | "sorted" => self.lists.insert(seq),
            _ => false,
        };
        smallvec![seq]
    }

    fn call_builtin(&mut self, c: Code<'_>, e: ExprId, name: &str, args: &Args) -> Vals {
        let call = c.span(e);
        let first = args.first().cloned().unwrap_or_default();
        if name == "zip" {
            // Zipping lists reads their elements: a stale one is read here.
            for (v, arg) in &args.positional {
                if let Some(arg) = arg {
                    self.read_entries(v, c.span(*arg));
                }
            }
        }
        match name {
            "isinstance" => self.eval_isinstance(args),
            // Over numbers these give numbers; over tensors, a tensor with their history.
            "min" | "max" | "abs" | "pow" | "divmod" => {
                let any_tensor = args.all_values().flatten().any(|v| self.maybe_tensor(*v));
                if any_tensor {
                    self.opaque_call(args, call)
                } else {
                    smallvec![OTHER]
                }
            }
            // `len(sizes)` of a literal list: its length (`range(len(sizes) - 1)` then runs a
            // known number of times).
            "len" if let Some(n) = self.exact_len(&first) => smallvec![self.int(n)],
            // `str(i)` of a known integer (`"fc" + str(i)` names a layer).
            "str" if let Some(text) = self.text_of(&first) => {
                let n = self.intern(&text);
                smallvec![self.string(n)]
            }
            // `vars(args)` of a dict read by attribute: the dict itself (`.update(cfg)` of it
            // changes the settings).
            "vars" if matches!(first.as_slice(), [d] if self.dict_objs.contains(d)) => first,
            // `type(online)()` of an instance of the program's class: that class (a target
            // network made as a second instance of the online one).
            "type" if !first.is_empty() && args.positional.len() == 1 => {
                let class = |v: &ObjId| match self.obj(*v) {
                    Obj::Module(m) => m.local.clone(),
                    _ => None,
                };
                match first.iter().map(class).collect::<Option<Vec<_>>>() {
                    Some(classes) => (classes.into_iter())
                        .map(|c| self.alloc(Obj::Class(c)))
                        .collect(),
                    None => smallvec![OTHER],
                }
            }
            "range" | "len" | "int" | "float" | "str" | "bool" | "print" | "hasattr" | "round"
            | "type" | "repr" | "format" | "id" | "hash" | "open" | "input" | "issubclass"
            | "callable" | "vars" | "dir" => smallvec![OTHER],
            "setattr" => {
                if let [(owners, _), (names, _), (vals, _)] = args.positional.as_slice() {
                    if let Some([attr]) = self.str_values(names).as_deref() {
                        let stmt = self.stmt.filter(|s| s.item == c.item).map(|s| s.stmt);
                        for o in owners.clone() {
                            self.set_attribute(c, e, o, *attr, vals.clone(), stmt);
                        }
                    }
                }
                smallvec![OTHER]
            }
            "getattr" => self.call_getattr(c, e, args),
            // `delattr(m, "weight")`: as `del m.weight`.
            "delattr" => {
                if let ([(owners, _), (names, _)], true) =
                    (args.positional.as_slice(), self.runs_always(c))
                {
                    if let Some([attr]) = self.str_values(names).as_deref() {
                        for o in owners.clone() {
                            self.remove_member(o, *attr);
                        }
                    }
                }
                smallvec![NONE]
            }
            "list" | "tuple" | "iter" | "reversed" | "sorted" | "set" | "filter" => {
                self.call_listing(name, args, first, c.span(e))
            }
            "enumerate" => {
                let start = (args.positional.get(1))
                    .and_then(|(v, _)| match v.as_slice() {
                        [one] => self.int_values.get(one).copied(),
                        _ => None,
                    })
                    .unwrap_or(0);
                self.enumerate(&first, start)
            }
            "zip" if let Some((tuples, exact)) = self.zip_slots(args) => {
                let slots = tuples
                    .into_iter()
                    .map(|t| smallvec![self.alloc(Obj::Seq(t))])
                    .collect();
                let zipped = self.alloc(Obj::Seq(slots));
                if exact {
                    self.exact_seqs.insert(zipped);
                }
                smallvec![zipped]
            }
            "zip" => {
                let mut cols = Vec::new();
                for (v, _) in &args.positional {
                    cols.push(self.elements(v));
                }
                let tuple = self.alloc(Obj::Seq(cols));
                smallvec![self.alloc(Obj::Seq(vec![smallvec![tuple]]))]
            }
            "next" => self.elements(&first),
            // `dict(act_layer=nn.ReLU, inplace=True)`: a dict with those keys.
            "dict" if args.positional.is_empty() => {
                let entries = args
                    .keywords
                    .iter()
                    .map(|(n, v, _, at)| (Some((*n, *at)), v.clone()))
                    .collect();
                smallvec![self.keyed_dict(entries)]
            }
            // `dict(d)` of a dict: a copy of it, entry by entry. (Not of a list of pairs:
            // `dict(zip(names, outs))` is not followed.)
            "dict"
                if args.positional.len() == 1
                    && args.keywords.is_empty()
                    && matches!(first.as_slice(), [one] if self.dict_objs.contains(one)) =>
            {
                smallvec![self.copy_seq(first[0], false)]
            }
            // `dict(model.named_modules())`, `dict([("a", x), ...])`: a dict of the pairs, with
            // the keys that are known strings.
            "dict" if args.positional.len() == 1 && args.keywords.is_empty() => {
                match self.dict_of_pairs(&first, call) {
                    Some(entries) => smallvec![self.keyed_dict(entries)],
                    None => self.opaque_call(args, call),
                }
            }
            // `super().__init__()` / `super().forward(x)`: the enclosing `self`.
            "super" => match self.state.env.get(&known::SELF).cloned() {
                Some(s) => s,
                None => smallvec![self.alloc(Obj::Unknown)],
            },
            _ => self.opaque_call(args, call),
        }
    }

    /// `copy.copy(x)` (`any`) or `OrderedDict(x)` of one argument: see [`Interp::call_path`];
    /// `None` for what it does not know.
    fn shallow_copy(&mut self, x: &Vals, args: &Args, call: Span, any: bool) -> Option<Vals> {
        let ([one], 1, true) = (
            x.as_slice(),
            args.positional.len(),
            args.keywords.is_empty(),
        ) else {
            return None;
        };
        match self.obj(*one) {
            _ if self.dict_objs.contains(one) => Some(smallvec![self.copy_seq(*one, false)]),
            Obj::Module(_) if any => Some(smallvec![*one]),
            // (Its own version counter, as `.data`'s: measured.)
            Obj::Tensor(_) if any => Some(smallvec![self.data_alias(*one, call)]),
            _ => None,
        }
    }

    /// The entries of `dict(pairs)` (called at `at`) when `pairs` is one list whose every
    /// element is one `(key, value)` pair (the key known when it is one string).
    fn dict_of_pairs(&self, pairs: &Vals, at: Span) -> Option<Vec<DictEntry>> {
        let [list] = pairs.as_slice() else {
            return None;
        };
        let Obj::Seq(slots) = self.obj(*list) else {
            return None;
        };
        slots
            .iter()
            .map(|slot| {
                let [pair] = slot.as_slice() else { return None };
                let Obj::Seq(kv) = self.obj(*pair) else {
                    return None;
                };
                let [k, v] = kv.as_slice() else { return None };
                let key = match k.as_slice() {
                    [k] => match self.obj(*k) {
                        Obj::Str(n) if !self.name(*n).contains(crate::ir::STR_HOLE) => {
                            Some((*n, at))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                Some((key, v.clone()))
            })
            .collect()
    }

    /// `torch.einsum(equation, a, b)`'s operand tensors split into those its backward reads
    /// as they are and those it reads a copy of ([`ops::einsum_operands`]); all are read when the
    /// equation or the operands are not known.
    fn einsum_operands(&mut self, args: &Args, tensors: Vals) -> (Vals, Vals) {
        let equation = args
            .positional
            .first()
            .and_then(|(v, _)| self.one_exact_str(v));
        let operands: Vec<Vals> = args
            .positional
            .iter()
            .skip(1)
            .map(|(v, _)| v.clone())
            .collect();
        let decided = equation.and_then(|eq| ops::einsum_operands(self.name(eq), operands.len()));
        let Some(plan) = decided else {
            return (tensors, Vals::new());
        };
        let (mut kept, mut copied) = (Vals::new(), Vals::new());
        for (operand, plan) in operands.iter().zip(plan) {
            let flat = self.flat_tensors(operand);
            // (An operand not laid out in order whose merged letters it cut is copied on the
            // way.)
            let merged =
                (flat.iter()).all(|t| self.tensor(*t).is_some_and(|t| plan.copies(t.strided)));
            if plan.saved && !merged {
                kept.extend(flat)
            } else {
                copied.extend(flat)
            }
        }
        (kept, copied)
    }

    /// `zip(xs, ys, ...)` where at least one argument is a list (or tuple) known slot by slot:
    /// its tuples in order (2 to 32 of them), the i-th holding the i-th slot of each known list
    /// and any element of each other argument (`zip(skips, extra_residuals)`). `zip` stops at
    /// the shortest list: known lists of different lengths are cut only where each is exact (its
    /// slots are its elements). `None` otherwise (then one tuple stands for all, each place any
    /// element).
    /// With whether every tuple is there, one per turn (each argument known exactly, of one
    /// length: `zip(self.resnets, self.attentions)`).
    fn zip_slots(&mut self, args: &Args) -> Option<(Vec<Vec<Vals>>, bool)> {
        if !args.keywords.is_empty() || args.positional.len() < 2 {
            return None;
        }
        // Each argument: its slots when it is one known list or tuple, else (an argument of
        // unknown length, `zip(skips, extra_residuals)`) any of its elements at every turn.
        let mut columns: Vec<Result<(Vec<Vals>, bool), Vals>> = Vec::new();
        let mut all_exact = true;
        let mut params = false;
        for (v, _) in &args.positional {
            // (A dict gives its keys: `zip(d, grads)`.)
            let keys = match v.as_slice() {
                [one] if self.dict_objs.contains(one) => self.dict_key_list(*one),
                _ => None,
            };
            let v = &keys.map_or_else(|| v.clone(), |k| smallvec![k]);
            let grown = self.grown_seq(v).map(|g| smallvec![g]);
            let known = match grown.as_ref().unwrap_or(v).as_slice() {
                [one] => match self.obj(*one) {
                    Obj::Seq(slots) if !self.dict_keys.contains_key(one) => {
                        all_exact &= self.exact_seqs.contains(one);
                        Some(slots.clone())
                    }
                    // `zip(model.parameters(), ...)`: one parameter per turn, in order.
                    Obj::Params { tensors, .. } => {
                        params = true;
                        Some(tensors.iter().map(|t| smallvec![*t]).collect())
                    }
                    // `zip(self.resnets, self.attentions)`: a `ModuleList`'s children, in order.
                    Obj::Module(m) if !m.children.is_empty() => {
                        Some(m.children.iter().map(|ch| smallvec![*ch]).collect())
                    }
                    _ => None,
                },
                _ => None,
            };
            let inexact = known.is_some()
                && !matches!(v.as_slice(), [one] if self.exact_seqs.contains(one) || matches!(self.obj(*one), Obj::Params { .. } | Obj::Module(_)));
            columns.push(known.ok_or_else(|| self.elements(v)).map(|k| (k, inexact)));
        }
        // (Beside the parameters, a list whose slots may stand for several elements, built by a
        // comprehension over them, gives any of its elements at each turn.)
        let columns: Vec<Result<Vec<Vals>, Vals>> = (columns.into_iter())
            .map(|c| match c {
                Ok((slots, true)) if params => Err(slots.into_iter().flatten().collect()),
                Ok((slots, _)) => Ok(slots),
                Err(any) => Err(any),
            })
            .collect();
        if params {
            all_exact = true;
        }
        let lens: SmallVec<[usize; 4]> = (columns.iter())
            .filter_map(|c| c.as_ref().ok())
            .map(Vec::len)
            .collect();
        let n = *lens.iter().min()?;
        if !(2..=32).contains(&n) || (!all_exact && lens.iter().any(|l| *l != n)) {
            return None;
        }
        let exact =
            !params && all_exact && lens.len() == columns.len() && lens.iter().all(|l| *l == n);
        let tuples = (0..n)
            .map(|i| {
                (columns.iter())
                    .map(|c| match c {
                        Ok(slots) => slots[i].clone(),
                        Err(any) => any.clone(),
                    })
                    .collect()
            })
            .collect();
        Some((tuples, exact))
    }

    /// `enumerate(xs)`: pairs of an index and an element.
    pub(super) fn enumerate(&mut self, xs: &Vals, start: i64) -> Vals {
        // (Over `model.parameters()`: a pair per parameter, in order, so a loop writing
        // `p` writes each in turn, as over the parameters themselves.)
        // (So over the layers of an `nn.Sequential` or `nn.ModuleList`, and over a list whose
        // elements are known one by one: `[i for i, m in enumerate(self.features) if
        // isinstance(m, nn.Conv2d)]` gives the positions of the convolutions.)
        if let [one] = xs.as_slice() {
            let items: Option<Vals> = match self.obj(*one) {
                Obj::Params { tensors, .. } => Some(tensors.clone()),
                Obj::Module(_) => self.layers_in_order(*one).map(Vals::from_vec),
                Obj::Seq(items)
                    if self.exact_seqs.contains(one) && items.iter().all(|i| i.len() == 1) =>
                {
                    Some(items.iter().map(|i| i[0]).collect())
                }
                _ => None,
            };
            if let Some(tensors) = items {
                if (1..=MAX_SLOTS).contains(&tensors.len()) {
                    let pairs = (tensors.into_iter().zip(start..))
                        .map(|(t, k)| {
                            let k = self.int(k);
                            smallvec![self.alloc(Obj::Seq(vec![smallvec![k], smallvec![t]]))]
                        })
                        .collect();
                    return smallvec![self.alloc(Obj::Seq(pairs))];
                }
            }
        }
        let e = self.elements(xs);
        let pair = self.alloc(Obj::Seq(vec![smallvec![OTHER], e]));
        smallvec![self.alloc(Obj::Seq(vec![smallvec![pair]]))]
    }

    /// `getattr(o, "name")`, `getattr(nn, act)`, `getattr(self, f"layer{i}", None)`: the
    /// attribute when its name is a known string, else unknown. The default stands in for an
    /// attribute a module does not have.
    fn call_getattr(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Vals {
        let (Some((owners, _)), Some(names)) = (
            args.positional.first(),
            args.positional.get(1).and_then(|(n, _)| self.str_values(n)),
        ) else {
            return smallvec![self.alloc(Obj::Unknown)];
        };
        let default = args.positional.get(2).map(|(v, _)| v.clone());
        let mut out = Vals::new();
        for o in owners.clone() {
            for &attr in &names {
                let missing = match (self.obj(o), &default) {
                    (Obj::Module(m), Some(_)) => {
                        let local = m.local.clone();
                        let method = local.as_ref().and_then(|k| self.find_method(k, attr));
                        !m.attrs.contains_key(&attr)
                            && method.is_none()
                            && local.is_none_or(|k| self.class_attribute(&k, attr).is_none())
                    }
                    _ => false,
                };
                let family = self.attrs_matching(o, attr);
                let vals = match (&default, missing) {
                    _ if !family.is_empty() => family,
                    (Some(d), true) => d.clone(),
                    _ => {
                        let mut vals = self.attribute_of(c, e, o, attr);
                        // `getattr(F, name, None)` of what the analysis does not list: the
                        // attribute, or `None` when it is missing.
                        let unlisted = !matches!(self.obj(o), Obj::Module(_));
                        if unlisted && default.as_ref().is_some_and(|d| d.as_slice() == [NONE]) {
                            vals.push(NONE);
                        }
                        vals
                    }
                };
                for v in vals {
                    if !out.contains(&v) {
                        out.push(v);
                    }
                }
            }
        }
        out
    }

    /// Whether `vals` are tensors that all surely require grad.
    pub(super) fn surely_grad(&self, vals: &Vals) -> bool {
        !vals.is_empty()
            && vals
                .iter()
                .all(|t| self.tensor(*t).is_some_and(|t| t.grad == Tri::Yes))
    }

    /// The attributes of module `o` a name with holes stands for (`f"bias_hh_l{i}"` with `i`
    /// unknown: every layer's `bias_hh_l0`, `bias_hh_l1`, ...); none for a plain name.
    fn attrs_matching(&self, o: ObjId, pattern: Name) -> Vals {
        let text = self.name(pattern);
        if !text.contains(STR_HOLE) {
            return Vals::new();
        }
        let Obj::Module(m) = self.obj(o) else {
            return Vals::new();
        };
        let mut names: Vec<&Name> = m
            .attrs
            .keys()
            .filter(|a| matches_pattern(text, self.name(**a)))
            .collect();
        names.sort();
        names.into_iter().flat_map(|a| m.attrs[a].clone()).collect()
    }

    /// `max(x, dim)` saves other tensors than `max(x)`: the table has a `.dim` entry for such
    /// reductions. `dim_pos` is the position of `dim` among the positional arguments.
    /// (`torch.max(a, b)` / `a.max(b)` of two tensors is the elementwise `maximum`: it saves
    /// both; likewise `min`.)
    pub(super) fn dim_variant(&self, name: &str, args: &Args, dim_pos: usize) -> String {
        if let Some(pairwise) = match name {
            "max" => Some("maximum"),
            "min" => Some("minimum"),
            _ => None,
        } {
            let other = (args.positional.get(dim_pos).map(|(v, _)| v))
                .or_else(|| args.keyword(known::OTHER).map(|(v, ..)| v));
            if other.is_some_and(|v| !v.is_empty() && v.iter().all(|x| self.tensor(*x).is_some())) {
                return pairwise.to_string();
            }
        }
        let variant = format!("{name}.dim");
        if ops::table().op(&variant).is_none() {
            return name.to_string();
        }
        let positional_dim = args
            .positional
            .get(dim_pos)
            .is_some_and(|(v, _)| !v.is_empty() && v.iter().all(|x| !self.maybe_tensor(*x)));
        if args.keyword(known::DIM).is_some() || positional_dim {
            variant
        } else {
            name.to_string()
        }
    }

    /// `isinstance(m, nn.Conv2d)` on a module we know.
    fn eval_isinstance(&mut self, args: &Args) -> Vals {
        let (Some((objs, _)), Some((classes, _))) =
            (args.positional.first(), args.positional.get(1))
        else {
            return smallvec![OTHER];
        };
        // The classes asked about: `torch.nn` classes by name, and classes of the file.
        let mut names = Vec::new();
        let mut locals = Vec::new();
        let mut flat = Vals::new();
        self.flatten(classes, &mut flat, &mut FxHashSet::default());
        if let Some(answer) = self.isinstance_builtin(objs, &flat) {
            return smallvec![if answer { TRUE } else { FALSE }];
        }
        for k in &flat {
            match self.obj(*k) {
                Obj::Path(p) if self.name(*p).starts_with("torch.nn.") => {
                    names.push(self.name(*p).rsplit('.').next().unwrap_or("").to_string())
                }
                Obj::Class(k) => locals.push(k.loc),
                _ => return smallvec![OTHER],
            }
        }
        let any_module = names.iter().any(|n| n == "Module");
        let mut answer = None;
        for o in objs {
            let this = match self.obj(*o) {
                Obj::Module(m) if any_module && m.local.is_none() => true,
                Obj::Module(m) => match &m.local {
                    None => names.iter().any(|n| *n == self.name(m.class)),
                    // (A class of the file: itself or a base is asked about; undecided when
                    // a base is not known.)
                    Some(k) => match self.class_is(k, &names, &locals, 0) {
                        Some(b) => b,
                        None => return smallvec![OTHER],
                    },
                },
                // A tensor is a `Parameter` when it is one the program made (not a stand-in for
                // what an unseen caller passes, which may be one). (`isinstance(x, Tensor)` is
                // left undecided: a stand-in may be anything an unseen caller passes.)
                Obj::Tensor(t) if names.iter().any(|n| n == "Parameter") => {
                    match (self.parameters.contains(o), t.grad_if) {
                        (true, _) => true,
                        (false, None) => false,
                        (false, Some(_)) => return smallvec![OTHER],
                    }
                }
                _ => return smallvec![OTHER],
            };
            if answer.is_some_and(|a| a != this) {
                return smallvec![OTHER];
            }
            answer = Some(this);
        }
        match answer {
            Some(true) => smallvec![TRUE],
            Some(false) => smallvec![FALSE],
            None => smallvec![OTHER],
        }
    }

    /// `isinstance(x, (list, tuple))`, `isinstance(x, str)`: decided for builtin types where
    /// every value of `x` is a string, a known integer, a list or tuple, a dict, or a tensor or
    /// layer of torch (lists and tuples are not told apart: asking for one of them alone is not
    /// decided).
    fn isinstance_builtin(&self, objs: &Vals, types: &Vals) -> Option<bool> {
        let mut asked = Vec::new();
        for k in types {
            let Obj::Path(p) = self.obj(*k) else {
                return None;
            };
            match self.name(*p).strip_prefix("builtins.") {
                Some(t @ ("list" | "tuple" | "dict" | "str" | "int" | "float" | "bool")) => {
                    asked.push(t)
                }
                _ => return None,
            }
        }
        let has = |t: &str| asked.contains(&t);
        let mut answer = None;
        for o in objs {
            let this = match self.obj(*o) {
                Obj::Str(_) => has("str"),
                Obj::Seq(_) if self.dict_objs.contains(o) => has("dict"),
                // (Only a list or tuple display, or a copy of one: sets, generators, `zip` and
                // `dict.items()` are sequences too here.)
                Obj::Seq(_) if self.exact_seqs.contains(o) && has("list") == has("tuple") => {
                    has("list")
                }
                Obj::Other if matches!(*o, TRUE | FALSE) => has("bool") || has("int"),
                Obj::Other if *o == FLOAT_ZERO => has("float"),
                Obj::Other if self.int_values.contains_key(o) => has("int"),
                Obj::Tensor(_) => false,
                Obj::Module(m) if m.local.is_none() => false,
                _ => return None,
            };
            if answer.is_some_and(|a| a != this) {
                return None;
            }
            answer = Some(this);
        }
        answer
    }

    /// Whether class `k` of the file is one of `locals`, or derives from one of them or from a
    /// `torch.nn` class named in `names`; `None` when a base is not known.
    fn class_is(
        &self,
        k: &ClassObj,
        names: &[String],
        locals: &[ClassLoc],
        depth: u32,
    ) -> Option<bool> {
        if locals.contains(&k.loc) {
            return Some(true);
        }
        if depth > 16 {
            return None;
        }
        let mut known = true;
        for b in &k.bases {
            let found = match self.obj(*b) {
                Obj::Class(base) => self.class_is(base, names, locals, depth + 1),
                Obj::Path(p) => {
                    let p = self.name(*p);
                    p.strip_prefix("torch.nn.")
                        .map(|n| names.iter().any(|x| n.rsplit('.').next() == Some(x)))
                        .or((p == "builtins.object").then_some(false))
                }
                _ => None,
            };
            match found {
                Some(true) => return Some(true),
                Some(false) => {}
                None => known = false,
            }
        }
        known.then_some(false)
    }

    /// `t = torch.from_numpy(a)` with `a` a local name holding an array: from here on `a` is
    /// the tensor's memory without its version counter, so `a *= 2` changes what autograd saved
    /// of `t` unseen (IP401). (An array read from anywhere else stays opaque.)
    fn share_with_array(&mut self, c: Code<'_>, args: &Args, t: ObjId, call: Span) {
        let Some((vals, Some(arg))) = args.positional.first() else {
            return;
        };
        let Expr::Name { name, .. } = *c.expr(*arg) else {
            return;
        };
        // (What an opaque call returned: numbers and strings are immutable.)
        let array = vals.iter().all(|v| matches!(self.obj(*v), Obj::Unknown));
        if array && !vals.is_empty() && self.state.env.contains_key(&name) {
            let alias = self.numpy_alias(t, call, false);
            // One array object (an argument its caller holds too) becomes the alias itself,
            // for every name that holds it (on every path: objects are not per branch, so a
            // `from_numpy` under a condition makes the array shared after it either way).
            let alias = match vals.as_slice() {
                [v] if *v != UNKNOWN => {
                    let obj = self.obj(alias).clone();
                    *self.obj_mut(*v) = obj;
                    *v
                }
                _ => alias,
            };
            self.bind_name(c, name, None, smallvec![alias], None);
        }
    }

    /// `checkpoint(block, *args, **kwargs)`: `block(*args, **kwargs)` runs without saving
    /// anything (it runs again at backward), and the checkpoint saves its tensor arguments
    /// (measured with torch 2.15, both `use_reentrant` modes: writing the block's input in place
    /// before backward raises, writing its output does not).
    fn call_checkpointed(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Vals {
        const OWN: &[&str] = &[
            "use_reentrant",
            "preserve_rng_state",
            "context_fn",
            "determinism_check",
            "debug",
        ];
        let call = c.span(e);
        let inner = Args {
            positional: args.positional[1..].to_vec(),
            keywords: args
                .keywords
                .iter()
                .filter(|(n, ..)| !OWN.contains(&self.name(*n)))
                .cloned()
                .collect(),
            spread: false,
        };
        let block = args.positional[0].0.clone();
        let inputs = self.flat_tensors(&inner.all_values().flatten().copied().collect());
        let label = OpLabel::Torch(self.intern("utils.checkpoint.checkpoint"));
        let layers = block.clone();
        self.checkpointed(inputs, &layers, label, call, |it| {
            it.call_one_of(c, e, &block, &inner)
        })
    }

    /// A run under a checkpoint: `inputs` saved as it starts (a write into one inside the run,
    /// `x.mul_(0.5)` or an in-place activation that starts it, changes what the recomputation
    /// at backward reads: measured, it raises), `run` with grad off as torch runs it (nothing
    /// inside is saved), and a result made by the checkpoint, requiring grad through `inputs`
    /// and the parameters of `layers` as it did in the run.
    fn checkpointed(
        &mut self,
        inputs: Vals,
        layers: &[ObjId],
        label: OpLabel,
        call: Span,
        run: impl FnOnce(&mut Self) -> Vals,
    ) -> Vals {
        let saves = self.save_inputs_now(&inputs, label, call);
        let outer = std::mem::replace(&mut self.grad_enabled, false);
        let implicit = std::mem::replace(&mut self.implicit_no_grad, true);
        let out = run(self);
        self.grad_enabled = outer;
        self.implicit_no_grad = implicit;
        let [one] = out.as_slice() else {
            return out;
        };
        if !self.tensor(*one).is_some_and(|t| t.known) {
            return out;
        }
        let mut params = Vals::new();
        for l in layers {
            self.module_params(*l, &mut params, &mut FxHashSet::default());
        }
        let result = self.derive(&[inputs, params], call, Saves::default(), Some(label), true);
        if let Some(n) = self.tensor(result).and_then(|t| t.node) {
            self.nodes.get_mut(n).saves.extend(saves);
        }
        smallvec![result]
    }

    /// `checkpoint_sequential(layers, segments, input)`: as torch runs it, the layers in
    /// `segments` runs of `len // segments`, each but the last under a checkpoint of its own
    /// (its input saved as it starts, the layers run without saving), the rest as usual. An
    /// in-place layer at the start of a run writes the input its checkpoint saved (measured:
    /// `nn.ReLU(inplace=True)` as a segment of its own raises). `None` when the layers or the
    /// count are not known.
    fn checkpoint_sequential(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Option<Vals> {
        let call = c.span(e);
        let [layers] = args.positional.first()?.0.as_slice() else {
            return None;
        };
        let children = match self.obj(*layers) {
            Obj::Module(m) if !m.children.is_empty() => m.children.clone(),
            Obj::Seq(slots) if slots.iter().all(|s| s.len() == 1) => {
                slots.iter().map(|s| s[0]).collect()
            }
            _ => return None,
        };
        let segments_kw = self.intern("segments");
        let input_kw = self.intern("input");
        let segments = args
            .named_or_at(segments_kw, 1)
            .and_then(|v| self.one_int(v))?;
        let mut x = args.named_or_at(input_kw, 2)?.clone();
        let size = usize::try_from(segments)
            .ok()
            .filter(|s| *s > 0)
            .map(|s| children.len() / s)?;
        let label = OpLabel::Torch(self.intern("utils.checkpoint.checkpoint_sequential"));
        let mut next = 0;
        if size > 0 {
            for start in (0..size * (segments as usize - 1)).step_by(size) {
                let segment = &children[start..start + size];
                let inputs = self.flat_tensors(&x);
                x = self.checkpointed(inputs, segment, label, call, |it| {
                    it.run_children(c, e, segment, x)
                });
                next = start + size;
            }
        }
        Some(self.run_children(c, e, &children[next..], x))
    }

    /// Saves of the tensors among `inputs` that may require grad, made now (before the code
    /// that uses them runs), by `label` at `at`.
    fn save_inputs_now(&mut self, inputs: &Vals, label: OpLabel, at: Span) -> Vec<SaveId> {
        if !self.grad_enabled {
            return Vec::new();
        }
        let assumes = self.assumption(std::slice::from_ref(inputs));
        let saved: Vec<ObjId> = (inputs.iter().copied())
            .filter(|v| self.tensor(*v).is_some_and(|t| t.grad.is_possible()))
            .collect();
        (saved.into_iter())
            .filter_map(|v| self.save_input(v, label, at, assumes))
            .collect()
    }

    /// `f(..., out=t)` (a torch function, or `F.normalize`): the op writes its result into `t`,
    /// in place, and returns it; `None` without an `out=` tensor.
    /// `f(..., out=t)` of the op at `path()` below `torch` (`mul`, `nn.functional.normalize`):
    /// a write into `t`, refused at the call, or its result left without a derivative, or
    /// neither (a composite that records a copy, `tensordot`), as the op table measured.
    fn write_out_arg(
        &mut self,
        c: Code<'_>,
        (f, path): (&str, &dyn Fn() -> String),
        args: &Args,
        call: Span,
    ) -> Option<Vals> {
        // (`out=None` is no `out=`: the op makes its result.)
        let out_arg = args
            .keyword(known::OUT)
            .filter(|(out, ..)| out.iter().any(|v| *v != NONE));
        let (out, value, span) = out_arg?;
        let out: Vals = out.iter().copied().filter(|v| *v != NONE).collect();
        let tensors = self.as_tensors(&out);
        let writes_grad = self.surely_grad(&tensors);
        // (Measured with inputs that require grad; an `out=` tensor that requires grad itself
        // is refused whatever the op.)
        let path = path();
        let raises = match ops::table().out_arg(&path) {
            Some(m) if !writes_grad => m.raises,
            _ => ops::OutRaises::Call,
        };
        let through = self.obj_name(c, value);
        let spec = WriteSpec::new(WriteKind::OutArg, span, call).through(through, through);
        // Autograd refuses the call (or leaves its result without a derivative) when one of
        // its tensors surely requires grad (the `out=` one included), whatever it is: nothing
        // is written then. (An op whose result is integers or booleans, `argmax`, `eq`, has no
        // gradient to refuse.)
        let refused = self.grad_enabled
            && raises != ops::OutRaises::Never
            && !ops::INDEX_RESULT.contains(&f)
            && !ops::NO_GRAD_OUT.contains(&f)
            && args
                .all_values()
                .any(|v| self.surely_grad(&self.flat_tensors(v)))
            && !self.raised();
        if refused && raises == ops::OutRaises::Call {
            // (Raised before the write is recorded: the write does nothing.)
            self.raised_in = Some(self.stmt_run);
        }
        let write = self.write(&tensors, spec);
        if refused {
            let op = self.intern(&path);
            self.report(Event::OutArgRefused {
                write,
                writes_grad,
                op,
            });
        }
        Some(out)
    }

    /// `torch.f(...)`; `qualified` may name a submodule (`linalg.vector_norm`): the op table
    /// knows the op by its last name, the messages by what was written.
    fn call_torch_fn(&mut self, c: Code<'_>, e: ExprId, qualified: &str, args: &Args) -> Vals {
        let f = qualified.rsplit('.').next().unwrap_or(qualified);
        let call = c.span(e);
        let first = args.first().cloned().unwrap_or_default();
        // `torch.stack(states)` reads every tensor the list holds: one a write changed since it
        // was appended is read stale (IP402).
        // (Read where the list is named, `history["returns"]` of `torch.stack(...)`.)
        if ops::JOINS_LIST.contains(&f) {
            let list = (args.positional.first()).and_then(|(_, arg)| arg.map(|a| c.span(a)));
            self.read_entries(&first, list.unwrap_or(call));
        }
        if let Some(out) = self.write_out_arg(c, (f, &|| qualified.to_string()), args, call) {
            return out;
        }
        // `torch.as_tensor(t)` / `torch.asarray(t)` of a tensor, with no dtype or device to
        // convert to (or those it has: `dtype=torch.float32` of a tensor in the graph of a
        // single-precision file): `t` itself (measured with torch 2.15: a write into it bumps
        // `t`'s version).
        if matches!(f, "as_tensor" | "asarray") {
            if let [(v, _)] = args.positional.as_slice() {
                let tensors = !v.is_empty() && v.iter().all(|x| self.tensor(*x).is_some());
                let same = args.keywords.is_empty()
                    || (self.surely_grad(v) && self.converts_to_same(c, args, false));
                if tensors && same {
                    return v.clone();
                }
            }
        }
        if ops::FACTORIES.contains(&f) {
            let grad = self.keyword_on(args, known::REQUIRES_GRAD);
            let t = self.new_leaf(grad, call);
            // `torch.from_numpy(self.arr[i])` shares the array's memory (so does `as_tensor`
            // without a dtype or device to convert to).
            let shares =
                f == "from_numpy" || (args.positional.len() == 1 && args.keywords.is_empty());
            if matches!(f, "from_numpy" | "as_tensor" | "asarray") && shares {
                let source = args.positional.first().and_then(|(_, e)| *e);
                let syntactic = source
                    .filter(|_| self.getitem_self.is_some())
                    .and_then(|s| self_attr_root(c, s));
                // (Or an array `__getitem__` read out of `self` and passed to a helper:
                // `to_tensor(self.data[i])` returning `torch.from_numpy(pic)`.)
                let stored = syntactic.or_else(|| {
                    let first = args.positional.first()?;
                    first
                        .0
                        .iter()
                        .find_map(|v| self.stored_arrays.get(v).copied())
                });
                if let Some((attr, read)) = stored {
                    self.remember_stored(&smallvec![t], attr, read);
                }
            }
            // (`as_tensor` and `asarray` without a dtype or device share an array's memory
            // too; `share_with_array` takes only what an opaque call returned, never a list,
            // which they copy.)
            if shares && matches!(f, "from_numpy" | "as_tensor" | "asarray") {
                self.share_with_array(c, args, t, call);
            }
            return smallvec![t];
        }
        let fname = self.intern(qualified);
        if matches!(
            f,
            "cat" | "stack" | "concat" | "hstack" | "vstack" | "einsum"
        ) {
            let tensors = self.flat_tensors(&args.all_values().flatten().copied().collect());
            let saves = if f == "einsum" {
                Saves {
                    input: true,
                    other: false,
                    result: false,
                }
            } else {
                Saves::default()
            };
            // `einsum` saves the operands that reach its product without a copy (the others
            // go in as inputs that are not saved).
            let (saved, copied) = if f == "einsum" {
                self.einsum_operands(args, tensors)
            } else {
                (tensors, Vals::new())
            };
            return smallvec![self.derive(
                &[saved, copied],
                call,
                saves,
                Some(OpLabel::Torch(fname)),
                false
            )];
        }
        if f == "detach" || ops::is_view_op(f) {
            let sizes = args.positional.get(1).is_some_and(|(v, _)| self.is_seq(v));
            let op = RefusedBy::of(f, sizes);
            let views: Vals = first
                .iter()
                .map(|v| {
                    if f == "detach" {
                        self.detach_of(*v, call)
                    } else {
                        self.view_op_result(c, (*v, call), op, f, (args, 1))
                    }
                })
                .collect();
            if ops::SPLITS.contains(&f) {
                return smallvec![self.alloc(Obj::Seq(vec![views]))];
            }
            return views;
        }
        if let Some(base) = strip_inplace(f) {
            return self.inplace_call(c, e, fname, base, args);
        }
        let mut inputs: Vec<Vals> = match self.indexed_source(f, args, CallForm::Torch) {
            Some(source) => vec![first.clone(), source],
            None => args.positional.iter().map(|(v, _)| v.clone()).collect(),
        };
        super::tensor::based_order(f, &mut inputs);
        let name = self.dim_variant(f, args, 1);
        let index = self.index_operand(f, args, CallForm::Torch);
        let out = self.op_result(&name, OpLabel::Torch(fname), &inputs, call, true);
        if let Some(index) = index {
            self.save_with(&out, &index, OpLabel::Torch(fname), call);
        }
        // `torch.stft(y, n_fft, ...)` with `center=True` (the default) pads `y` with its
        // `pad_mode`, reflection by default, which saves `y` (measured with torch 2.15: a write
        // into the waveform after an STFT loss raises at backward; `center=False` does not).
        if f == "stft" && self.stft_keeps_input(args, 1) {
            self.save_with(&out, &first, OpLabel::Torch(fname), call);
        }
        out
    }

    /// Whether `stft` (arguments `args`, the signal's own `skip` first) keeps the signal for
    /// backward (measured with torch 2.15): with `center=True` (the default) it pads it by
    /// reflection (its `pad_mode`), which saves it; without a `window` its FFT reads the
    /// signal's frames, a view of it, and saves them. A setting not known is taken not to.
    pub(super) fn stft_keeps_input(&self, args: &Args, skip: usize) -> bool {
        let arg = |kw: &str, at: usize| self.arg_named(args, kw, Some(at + skip - 1));
        // (Positions as `torch.stft` has them: the signal at 0.)
        let window = arg("window", 4).is_none_or(|v| v.as_slice() == [NONE]);
        let center = arg("center", 5).is_none_or(|v| v.as_slice() == [TRUE]);
        window || center && self.pads_keeping_input(args, 5 + skip, "pad_mode", "reflect")
    }

    /// The argument named `kw` (by its text: a name the analysis does not intern ahead), or
    /// the one at position `at`.
    pub(super) fn arg_named<'a>(
        &self,
        args: &'a Args,
        kw: &str,
        at: Option<usize>,
    ) -> Option<&'a Vals> {
        (args.keywords.iter())
            .find(|(n, ..)| self.name(*n) == kw)
            .map(|(_, v, ..)| v)
            .or_else(|| args.positional.get(at?).map(|(v, _)| v))
    }

    /// Whether a padding mode (the argument `kw`, or at position `at`, else `default`) is one
    /// that saves its input: `"reflect"` or `"replicate"`. A mode not known is taken not to.
    fn pads_keeping_input(&self, args: &Args, at: usize, kw: &str, default: &str) -> bool {
        let mode = match self.arg_named(args, kw, Some(at)) {
            None => default,
            Some(v) => match self.one_exact_str(v) {
                Some(m) => self.name(m),
                None => return false,
            },
        };
        matches!(mode, "reflect" | "replicate")
    }

    /// Whether the argument named `kw` (or at position `at`) is known to be zero (a float
    /// literal zero evaluates to the integer zero).
    pub(super) fn zero_arg(&self, args: &Args, kw: Name, at: usize) -> bool {
        args.named_or_at(kw, at)
            .is_some_and(|vals| self.one_int(vals) == Some(0))
    }

    /// `torch.relu_(h)`, `F.relu_(h)`: writes its first argument, returns it.
    fn inplace_call(&mut self, c: Code<'_>, e: ExprId, f: Name, base: &str, args: &Args) -> Vals {
        let call = c.span(e);
        let first = args.first().cloned().unwrap_or_default();
        let tensors = self.as_tensors(&first);
        let (through, keep) = self.first_arg_names(c, args, call);
        let spec = WriteSpec::new(WriteKind::TorchFn(f), call, call)
            .through(through, keep)
            .call(e);
        let w = self.write(&tensors, spec);
        let other = self
            .indexed_source(base, args, CallForm::Torch)
            .or_else(|| self.value_operand(base, args, CallForm::Torch))
            .or_else(|| args.positional.get(1).map(|(v, _)| v.clone()));
        self.inplace_saves_by_name(&tensors, base, other.as_ref(), (call, w));
        first
    }

    fn call_functional(&mut self, c: Code<'_>, e: ExprId, f: &str, args: &Args) -> Vals {
        let call = c.span(e);
        let first = args.first().cloned().unwrap_or_default();
        // `F.dropout(h, 0.0)`, `F.dropout(h, p, training=False)`: `h` itself.
        if let Some(trains) = ops::functional_dropout_trains(f) {
            let training = args.named_or_at(known::TRAINING, 2);
            let off = training.map_or(!trains, |t| t.as_slice() == [FALSE]);
            if off || self.zero_arg(args, known::P, 1) {
                return first;
            }
        }
        let (through, keep) = self.first_arg_names(c, args, call);
        // `inplace=True`, or `True` at the position of `inplace` (`F.leaky_relu(x, 0.2, True)`).
        let inplace_arg = self.inplace_arg(c, e, args, ops::functional_inplace_position(f));
        if let (Some(arg), true) = (inplace_arg, ops::functional_inplace_position(f).is_some()) {
            let tensors = self.as_tensors(&first);
            let spec = WriteSpec::new(WriteKind::InplaceFunctional, arg, call)
                .through(through, keep)
                .call(e);
            let w = self.write(&tensors, spec);
            self.inplace_saves_by_name(&tensors, f, None, (call, w));
            return first;
        }
        let fname = self.intern(f);
        if let Some(base) = strip_inplace(f) {
            return self.inplace_call(c, e, fname, base, args);
        }
        // (The op's path is spelled only for a call given `out=`.)
        let path = || format!("nn.functional.{f}");
        if let Some(out) = self.write_out_arg(c, (f, &path), args, call) {
            return out;
        }
        let mut inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        let bag = (f == "embedding_bag")
            .then(|| self.bag_weights(args, ops::FUNCTIONAL_BAG_WEIGHTS_AT))
            .flatten();
        inputs.extend(bag.clone());
        let index = self.index_operand(f, args, CallForm::Functional);
        // (Attention with dropout, `dropout_p=p` not surely 0, runs torch's math kernel on the
        // CPU, which keeps neither the result nor `q`: measured with torch 2.15.)
        let attention_dropout = f == "scaled_dot_product_attention"
            && args.named_or_at(known::DROPOUT_P, 4).is_some()
            && !self.zero_arg(args, known::DROPOUT_P, 4);
        let op = if attention_dropout { "" } else { f };
        let out = self.op_result(op, OpLabel::Functional(fname), &inputs, call, true);
        let label = OpLabel::Functional(fname);
        if let Some(index) = index {
            self.save_with(&out, &index, label, call);
        }
        if f == "scaled_dot_product_attention" {
            self.save_attention_operands(args, &out, attention_dropout, call);
        }
        // `F.pad(x, pads, mode="reflect")` (or `"replicate"`) saves `x`, as the modules
        // `ReflectionPad1d` and `ReplicationPad1d` do; constant and circular padding do not.
        if f == "pad" && self.pads_keeping_input(args, 2, "mode", "constant") {
            self.save_with(&out, &first, label, call);
        }
        if let Some(bag) = bag {
            let table = self.operand(args, CallForm::Functional, 1, &["weight"]);
            self.save_weighted_bag(&out, &bag, &table.unwrap_or_default(), label, call);
        }
        out
    }

    /// `F.scaled_dot_product_attention(q, k, v)` saves `k` and `v` too (the table measures `q`):
    /// measured with torch 2.15 on the CPU, writing any of the three in place before
    /// `backward()` raises, whichever of them requires grad, with a mask or `is_causal`. With
    /// dropout (torch's math kernel) only `v` is kept, for the gradient of `q` or `k`.
    fn save_attention_operands(&mut self, args: &Args, out: &Vals, dropout: bool, call: Span) {
        let label = OpLabel::Functional(self.intern("scaled_dot_product_attention"));
        let key = self.operand(args, CallForm::Functional, 1, &["key"]);
        let value = self.operand(args, CallForm::Functional, 2, &["value"]);
        if dropout {
            let query = self.operand(args, CallForm::Functional, 0, &["query"]);
            let (q, k) = (query.unwrap_or_default(), key.unwrap_or_default());
            if self.may_carry_grad(&q) || self.may_carry_grad(&k) {
                self.save_with(out, &value.unwrap_or_default(), label, call);
            }
            return;
        }
        for operand in [key, value].into_iter().flatten() {
            self.save_with(out, &operand, label, call);
        }
    }

    /// The name the first argument is written through, and the name that keeps its meaning.
    pub(super) fn first_arg_names(
        &self,
        c: Code<'_>,
        args: &Args,
        call: Span,
    ) -> (Option<Name>, Option<Name>) {
        let through = args
            .positional
            .first()
            .and_then(|(_, n)| *n)
            .and_then(|n| self.obj_name(c, n));
        (through, self.keep_name(call, through))
    }

    /// The name that keeps its meaning after an in-place call: the assignment target when the
    /// call is the whole right-hand side (`h = torch.relu_(feat)`), else the written name.
    pub(super) fn keep_name(&self, call: Span, through: Option<Name>) -> Option<Name> {
        match &self.assign_rhs {
            Some((range, names)) if *range == call && names.len() == 1 => Some(names[0]),
            _ => through,
        }
    }
}

/// An entry of a dict being made: its key when known (a string, with where it is written), and
/// its value.
type DictEntry = (Option<(Name, Span)>, Vals);

/// `self.attr`, possibly indexed (`self.arr[i]`, `self.arr[i, :]`): the attribute and where it
/// is read.
fn self_attr_root(c: Code<'_>, e: ExprId) -> Option<(Name, Span)> {
    match *c.expr(e) {
        Expr::Subscript { value, .. } => self_attr_root(c, value),
        Expr::Attr { value, attr, .. } => match *c.expr(value) {
            Expr::Name { name, .. } if name == known::SELF => Some((attr, c.span(e))),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `name` is one of the strings `pattern` stands for: each [`STR_HOLE`] any non-empty
/// run of characters, the rest literally.
fn matches_pattern(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split(STR_HOLE);
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    for (k, piece) in pieces.iter().enumerate() {
        let last = k + 1 == pieces.len();
        if last {
            return rest.len() > piece.len() && rest.ends_with(piece);
        }
        // (A hole takes at least one character.)
        let skip = rest.chars().next().map_or(0, char::len_utf8);
        let Some(at) = rest.get(skip..).and_then(|r| r.find(piece)) else {
            return false;
        };
        rest = &rest[skip + at + piece.len()..];
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_names_with_a_run_per_hole() {
        let p = format!("bias_hh_l{STR_HOLE}");
        assert!(matches_pattern(&p, "bias_hh_l0"));
        assert!(matches_pattern(&p, "bias_hh_l12"));
        assert!(!matches_pattern(&p, "bias_hh_l"));
        assert!(!matches_pattern(&p, "bias_ih_l0"));
        let q = format!("layer{STR_HOLE}_w{STR_HOLE}");
        assert!(matches_pattern(&q, "layer1_w2"));
        assert!(!matches_pattern(&q, "layer1_w"));
        assert!(!matches_pattern(&q, "layer_w2"));
        assert!(matches_pattern(&format!("{STR_HOLE}_w"), "é_w"));
    }
}
