//! What torch calls, tensor methods, modules and optimizers do to the abstract state.

use super::interp::{binary_op_name, named_children, obj_name, Args, Interp};
use super::model::*;
use crate::finding::TextRange;
use crate::ops::{self, ArgKind, Saves};
use crate::rules;
use crate::syntax::NodeExt;

/// Most positions a list keeps apart; later appends share the last one.
const MAX_SLOTS: usize = 64;
use rustc_hash::FxHashSet;
use smallvec::smallvec;
use tree_sitter::Node;

/// The `torch.nn.functional` spelling of an in-place function (`relu_` -> `relu`).
fn strip_inplace(name: &str) -> Option<&str> {
    name.strip_suffix('_')
        .filter(|n| !n.ends_with('_') && !n.is_empty())
}

impl<'t> Interp<'t> {
    // --------------------------------------------------------------------------------- calls

    pub fn eval_call(&mut self, node: Node<'t>) -> Vals {
        let Some(func) = node.field("function") else {
            return smallvec![self.unknown];
        };
        let args = self.eval_args(node);
        let call = TextRange::of(node);
        if func.k() == "attribute" {
            let (Some(recv), Some(meth)) = (func.field("object"), func.field("attribute")) else {
                return smallvec![self.unknown];
            };
            let recv_vals = self.eval(recv);
            let meth_name = self.text(meth);
            let mut out = Vals::new();
            let mut tensors = Vals::new();
            for r in recv_vals.iter().copied() {
                let res = match self.heap[r as usize].clone() {
                    Obj::Tensor(_) => {
                        tensors.push(r);
                        continue;
                    }
                    Obj::Unknown => self.unknown_method(r, meth_name, &args, node, recv),
                    Obj::Path(p) => {
                        let path = format!("{p}.{meth_name}");
                        self.call_path(&path, &args, node)
                    }
                    Obj::Module(_) => self.module_method(r, meth_name, &args, node),
                    Obj::Optimizer { params, .. } => {
                        self.optimizer_method(r, &params, meth_name, &args, node)
                    }
                    Obj::Seq(_) => self.seq_method(r, meth_name, &args),
                    Obj::Params { .. } => smallvec![r],
                    Obj::Class(c) => match self.find_method(&c, meth_name) {
                        Some(def) => self.inline(def, None, &args, call),
                        None => self.opaque_call(&args, call),
                    },
                    Obj::GradCtx(_) => smallvec![r],
                    Obj::Other => smallvec![self.other],
                    _ => self.opaque_call(&args, call),
                };
                out.extend(res);
            }
            if !tensors.is_empty() {
                out.extend(self.tensor_method(&tensors, meth_name, &args, node, recv));
            }
            if out.is_empty() {
                out.push(self.unknown);
            }
            return out;
        }
        let callee = self.eval(func);
        let mut out = Vals::new();
        for c in callee {
            out.extend(self.call_value(c, &args, node));
        }
        if out.is_empty() {
            out.push(self.unknown);
        }
        out
    }

    fn eval_args(&mut self, call: Node<'t>) -> Args<'t> {
        let mut args = Args::default();
        let Some(list) = call.field("arguments") else {
            return args;
        };
        if list.k() == "generator_expression" {
            let v = self.eval(list);
            args.positional.push((v, Some(list)));
            return args;
        }
        for a in named_children(list) {
            match a.k() {
                "keyword_argument" => {
                    let (Some(n), Some(v)) = (a.field("name"), a.field("value")) else {
                        continue;
                    };
                    let vals = self.eval(v);
                    args.keywords.push((self.text(n).into(), vals, a));
                }
                "list_splat" | "dictionary_splat" => {
                    if let Some(inner) = a.named_child(0) {
                        let v = self.eval(inner);
                        if a.k() == "list_splat" {
                            // `f(*layers)`: one argument per position of the list, in order
                            // (of the longest list when the name may hold several).
                            let longest = v
                                .iter()
                                .filter_map(|x| match &self.heap[*x as usize] {
                                    Obj::Seq(items) => Some(items.clone()),
                                    _ => None,
                                })
                                .max_by_key(|items| items.len());
                            match longest {
                                Some(items) if v.len() == 1 || !items.is_empty() => {
                                    args.positional.extend(items.into_iter().map(|i| (i, None)));
                                }
                                _ => {
                                    let e = self.elements(&v);
                                    args.positional.push((e, None));
                                }
                            }
                        }
                    }
                }
                _ => {
                    let v = self.eval(a);
                    args.positional.push((v, Some(a)));
                }
            }
        }
        args
    }

    pub fn call_value(&mut self, callee: ObjId, args: &Args<'t>, node: Node<'t>) -> Vals {
        let call = TextRange::of(node);
        match self.heap[callee as usize].clone() {
            Obj::Path(p) => self.call_path(&p, args, node),
            Obj::Func(def) => self.inline(def, None, args, call),
            Obj::Bound(s, def) => self.inline(def, Some(s), args, call),
            Obj::Class(c) => smallvec![self.instantiate(c, args, call)],
            Obj::Module(_) => self.call_module(callee, args, node),
            Obj::Other => smallvec![self.other],
            _ => self.opaque_call(args, call),
        }
    }

    /// A call we cannot see into: its result carries the history of every tensor argument.
    pub fn opaque_call(&mut self, args: &Args<'t>, call: TextRange) -> Vals {
        let mut inputs = Vals::new();
        let mut seen = FxHashSet::default();
        for v in args.all_values() {
            self.flatten(v, &mut inputs, &mut seen);
        }
        let tensors: Vals = inputs
            .iter()
            .copied()
            .filter(|v| self.maybe_tensor(*v))
            .collect();
        // `itertools.chain(a.parameters(), b.parameters())`, `filter(..., m.parameters())`: the
        // parameters themselves, not a new tensor.
        let from_params = args
            .all_values()
            .flatten()
            .any(|v| matches!(self.heap[*v as usize], Obj::Params { .. }));
        if from_params {
            return smallvec![self.alloc(Obj::Seq(vec![tensors]))];
        }
        if tensors.is_empty() {
            // Modules passed through wrappers (`torch.compile(model)`) stay themselves.
            let modules: Vals = inputs
                .iter()
                .copied()
                .filter(|v| matches!(self.heap[*v as usize], Obj::Module(_)))
                .collect();
            if !modules.is_empty() && args.positional.len() == 1 {
                return modules;
            }
            return smallvec![self.alloc(Obj::Unknown)];
        }
        // The result carries their history but may be anything (a list, a dict, a tensor).
        let out = self.derive(&[tensors], call, Saves::default(), "", false);
        if let Obj::Tensor(t) = &mut self.heap[out as usize] {
            t.known = false;
        }
        smallvec![out]
    }

    // ------------------------------------------------------------------------ torch by path

    pub fn call_path(&mut self, path: &str, args: &Args<'t>, node: Node<'t>) -> Vals {
        let call = TextRange::of(node);
        let last = path.rsplit('.').next().unwrap_or(path);
        let first_arg = args.first().cloned().unwrap_or_default();
        if let Some(b) = path.strip_prefix("builtins.") {
            return self.call_builtin(b, args, call);
        }
        if !path.starts_with("torch") {
            return self.opaque_call(args, call);
        }
        let lit = |it: &Self, i: usize, kw: &str| -> Option<&'t str> {
            args.keyword(kw)
                .map(|(_, n)| n.field("value").map(|v| it.text(v)).unwrap_or(""))
                .or_else(|| {
                    args.positional
                        .get(i)
                        .and_then(|(_, n)| n.map(|n| it.text(n)))
                })
        };
        match path {
            "torch.no_grad" | "torch.autograd.no_grad" | "torch.autograd.grad_mode.no_grad" => {
                return smallvec![self.alloc(Obj::GradCtx(GradCtx::NoGrad))]
            }
            "torch.enable_grad" | "torch.autograd.enable_grad" => {
                return smallvec![self.alloc(Obj::GradCtx(GradCtx::EnableGrad))]
            }
            "torch.inference_mode" | "torch.autograd.inference_mode" => {
                let on = lit(self, 0, "mode") != Some("False");
                let g = if on {
                    GradCtx::NoGrad
                } else {
                    GradCtx::EnableGrad
                };
                return smallvec![self.alloc(Obj::GradCtx(g))];
            }
            "torch.set_grad_enabled" | "torch.autograd.set_grad_enabled" => {
                let on = lit(self, 0, "mode") != Some("False");
                return smallvec![self.alloc(Obj::GradCtx(GradCtx::Set(on)))];
            }
            "torch.autograd.set_detect_anomaly"
            | "torch.autograd.detect_anomaly"
            | "torch.autograd.anomaly_mode.set_detect_anomaly"
            | "torch.autograd.anomaly_mode.detect_anomaly" => {
                let off = lit(self, 0, "mode") == Some("False");
                if !off && self.inlining.len() <= 1 {
                    let f = rules::ip501_anomaly_mode_left_on::finding(&self.ctx, call);
                    self.report(f);
                }
                return smallvec![self.alloc(Obj::GradCtx(GradCtx::Anomaly))];
            }
            "torch.autograd.backward" => {
                let retain = self.retains(args);
                self.check_graph(&first_arg, call, retain, true);
                return smallvec![self.other];
            }
            "torch.autograd.grad" => {
                let outputs = args
                    .keyword("outputs")
                    .map(|(v, _)| v.clone())
                    .unwrap_or(first_arg);
                let retain = self.retains(args) || args.keyword("create_graph").is_some();
                self.check_graph(&outputs, call, retain, true);
                return smallvec![self.alloc(Obj::Unknown)];
            }
            "torch.nn.Parameter" | "torch.nn.parameter.Parameter" | "torch.nn.Buffer" => {
                let grad =
                    path.ends_with("Parameter") && lit(self, 1, "requires_grad") != Some("False");
                return smallvec![self.new_leaf(grad, call)];
            }
            _ => {}
        }
        if path.starts_with("torch.optim.")
            && !path.contains("lr_scheduler")
            && !path.contains("swa_utils")
        {
            let params = args
                .keyword("params")
                .map(|(v, _)| v.clone())
                .unwrap_or(first_arg);
            return smallvec![self.new_optimizer(&params, call)];
        }
        if path.starts_with("torch.nn.init.") {
            if !first_arg.is_empty() {
                let tensors = self.as_tensors(&first_arg);
                self.write(
                    &tensors,
                    WriteKind::TorchFn(last.into()),
                    call,
                    call,
                    None,
                    None,
                    None,
                    false,
                );
            }
            return first_arg;
        }
        if let Some(f) = path.strip_prefix("torch.nn.functional.") {
            return self.call_functional(f, args, node);
        }
        let is_nn_class = path.starts_with("torch.nn.")
            && last.chars().next().is_some_and(|c| c.is_ascii_uppercase());
        if is_nn_class
            && !path.starts_with("torch.nn.functional")
            && !path.starts_with("torch.nn.utils")
        {
            return smallvec![self.new_module(last, args, node)];
        }
        if let Some(f) = path.strip_prefix("torch.") {
            if !f.contains('.') || f.starts_with("special.") || f.starts_with("linalg.") {
                let f = f.rsplit('.').next().unwrap_or(f);
                return self.call_torch_fn(f, args, node);
            }
        }
        self.opaque_call(args, call)
    }

    fn retains(&self, args: &Args<'t>) -> bool {
        args.keyword("retain_graph")
            .is_some_and(|(_, n)| n.field("value").is_some_and(|v| self.text(v) != "False"))
    }

    fn call_builtin(&mut self, name: &str, args: &Args<'t>, call: TextRange) -> Vals {
        let first = args.first().cloned().unwrap_or_default();
        match name {
            "isinstance" => self.eval_isinstance(args),
            // Over numbers these give numbers; over tensors, a tensor with their history.
            "min" | "max" | "abs" | "pow" | "divmod" => {
                let any_tensor = args.all_values().flatten().any(|v| self.maybe_tensor(*v));
                if any_tensor {
                    self.opaque_call(args, call)
                } else {
                    smallvec![self.other]
                }
            }
            "range" | "len" | "int" | "float" | "str" | "bool" | "print" | "hasattr" | "round"
            | "type" | "repr" | "format" | "id" | "hash" | "open" | "input" | "issubclass"
            | "callable" | "setattr" | "vars" | "dir" => {
                smallvec![self.other]
            }
            "list" | "tuple" | "iter" | "reversed" | "sorted" | "set" | "filter" => {
                let source = if name == "filter" {
                    args.positional
                        .get(1)
                        .map(|(v, _)| v.clone())
                        .unwrap_or_default()
                } else {
                    first
                };
                let e = self.elements(&source);
                smallvec![self.alloc(Obj::Seq(vec![e]))]
            }
            "enumerate" => {
                let e = self.elements(&first);
                let pair = self.alloc(Obj::Seq(vec![smallvec![self.other], e]));
                smallvec![self.alloc(Obj::Seq(vec![smallvec![pair]]))]
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
            "getattr" => smallvec![self.alloc(Obj::Unknown)],
            "super" => {
                // `super().__init__()` / `super().forward(x)`: the enclosing `self`.
                match self.state.env.get("self").cloned() {
                    Some(s) => s,
                    None => smallvec![self.alloc(Obj::Unknown)],
                }
            }
            _ => self.opaque_call(args, call),
        }
    }

    /// `max(x, dim)` saves other tensors than `max(x)`: the table has a `.dim` entry for such
    /// reductions. `dim_pos` is the position of `dim` among the positional arguments.
    fn dim_variant(&self, name: &str, args: &Args<'t>, dim_pos: usize) -> String {
        let variant = format!("{name}.dim");
        if ops::table().op(&variant).is_none() {
            return name.to_string();
        }
        let positional_dim = args
            .positional
            .get(dim_pos)
            .is_some_and(|(v, _)| !v.is_empty() && v.iter().all(|x| !self.maybe_tensor(*x)));
        if args.keyword("dim").is_some() || positional_dim {
            variant
        } else {
            name.to_string()
        }
    }

    /// `isinstance(m, nn.Conv2d)` on a module we know.
    fn eval_isinstance(&mut self, args: &Args<'t>) -> Vals {
        let (Some((objs, _)), Some((classes, _))) =
            (args.positional.first(), args.positional.get(1))
        else {
            return smallvec![self.other];
        };
        let mut names = Vec::new();
        let mut flat = Vals::new();
        self.flatten(classes, &mut flat, &mut FxHashSet::default());
        for c in &flat {
            match &self.heap[*c as usize] {
                Obj::Path(p) if p.starts_with("torch.nn.") => {
                    names.push(p.rsplit('.').next().unwrap_or("").to_string())
                }
                _ => return smallvec![self.other],
            }
        }
        let mut answer = None;
        for o in objs {
            let this = match &self.heap[*o as usize] {
                Obj::Module(m) if m.local.is_none() => names.iter().any(|n| **n == *m.class),
                _ => return smallvec![self.other],
            };
            if answer.is_some_and(|a| a != this) {
                return smallvec![self.other];
            }
            answer = Some(this);
        }
        match answer {
            Some(true) => smallvec![self.true_obj],
            Some(false) => smallvec![self.false_obj],
            None => smallvec![self.other],
        }
    }

    fn call_torch_fn(&mut self, f: &str, args: &Args<'t>, node: Node<'t>) -> Vals {
        let call = TextRange::of(node);
        let first = args.first().cloned().unwrap_or_default();
        if let Some((out, kw)) = args.keyword("out") {
            let out = out.clone();
            let tensors = self.as_tensors(&out);
            let through = kw.field("value").and_then(|v| obj_name(self, v));
            self.write(
                &tensors,
                WriteKind::OutArg,
                TextRange::of(kw),
                call,
                through.clone(),
                through,
                None,
                true,
            );
            return out;
        }
        if ops::FACTORIES.contains(&f) {
            let grad = args
                .keyword("requires_grad")
                .is_some_and(|(_, n)| n.field("value").is_some_and(|v| self.text(v) != "False"));
            return smallvec![self.new_leaf(grad, call)];
        }
        if f == "cat"
            || f == "stack"
            || f == "concat"
            || f == "hstack"
            || f == "vstack"
            || f == "einsum"
        {
            let mut inputs = Vals::new();
            let mut seen = FxHashSet::default();
            for v in args.all_values() {
                self.flatten(v, &mut inputs, &mut seen);
            }
            let tensors: Vals = inputs
                .into_iter()
                .filter(|v| self.maybe_tensor(*v))
                .collect();
            let saves = if f == "einsum" {
                Saves {
                    input: true,
                    other: false,
                    result: false,
                }
            } else {
                Saves::default()
            };
            return smallvec![self.derive(&[tensors], call, saves, &format!("torch.{f}"), false)];
        }
        if f == "detach" || ops::VIEW_OPS.contains(&f) {
            return first
                .iter()
                .map(|v| {
                    if f == "detach" {
                        self.detach_of(*v, call)
                    } else {
                        self.view_of(*v, call)
                    }
                })
                .collect();
        }
        if let Some(base) = strip_inplace(f) {
            return self.inplace_call(f, base, args, node);
        }
        let inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        let name = self.dim_variant(f, args, 1);
        smallvec![self.apply_op(&name, &format!("torch.{f}"), &inputs, node, true)]
    }

    /// `torch.relu_(h)`, `F.relu_(h)`: writes its first argument, returns it.
    fn inplace_call(&mut self, f: &str, base: &str, args: &Args<'t>, node: Node<'t>) -> Vals {
        let call = TextRange::of(node);
        let first = args.first().cloned().unwrap_or_default();
        let tensors = self.as_tensors(&first);
        let (through, keep) = self.first_arg_names(args, node);
        self.write(
            &tensors,
            WriteKind::TorchFn(f.into()),
            call,
            call,
            through,
            keep,
            None,
            true,
        );
        let other = args.positional.get(1).map(|(v, _)| v.clone());
        self.inplace_saves_by_name(&tensors, base, other.as_ref(), node);
        first
    }

    fn call_functional(&mut self, f: &str, args: &Args<'t>, node: Node<'t>) -> Vals {
        let call = TextRange::of(node);
        let first = args.first().cloned().unwrap_or_default();
        let (through, keep) = self.first_arg_names(args, node);
        // `inplace=True`, or `True` at the position of `inplace` (`F.leaky_relu(x, 0.2, True)`).
        let by_position = ops::functional_inplace_position(f)
            .and_then(|i| args.positional.get(i))
            .filter(|(v, _)| v.contains(&self.true_obj))
            .and_then(|(_, n)| *n);
        let inplace_kw = args
            .keyword("inplace")
            .filter(|(v, _)| v.contains(&self.true_obj))
            .map(|(_, n)| n)
            .or(by_position);
        if let (Some(kw), true) = (inplace_kw, ops::functional_inplace_position(f).is_some()) {
            let tensors = self.as_tensors(&first);
            self.write(
                &tensors,
                WriteKind::InplaceFunctional,
                TextRange::of(kw),
                call,
                through,
                keep,
                None,
                true,
            );
            self.inplace_saves_by_name(&tensors, f, None, node);
            return first;
        }
        if let Some(base) = strip_inplace(f) {
            return self.inplace_call(f, base, args, node);
        }
        let inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        let display = format!("F.{f}");
        let mut inputs = inputs;
        if let (1, Some((w, _))) = (inputs.len(), args.keyword("weight")) {
            inputs.push(w.clone());
        }
        smallvec![self.apply_op(f, &display, &inputs, node, true)]
    }

    /// The name the first argument is written through, and the name that keeps its meaning.
    fn first_arg_names(&self, args: &Args<'t>, node: Node<'t>) -> (Option<Name>, Option<Name>) {
        let through = args
            .positional
            .first()
            .and_then(|(_, n)| *n)
            .and_then(|n| obj_name(self, n));
        let keep = self.keep_name(node, through.clone());
        (through, keep)
    }

    /// The name that keeps its meaning after an in-place call: the assignment target when the
    /// call is the whole right-hand side (`h = torch.relu_(feat)`), else the written name.
    fn keep_name(&self, call: Node<'t>, through: Option<Name>) -> Option<Name> {
        match &self.assign_rhs {
            Some((range, name)) if *range == TextRange::of(call) => Some(name.clone()),
            _ => through,
        }
    }

    // --------------------------------------------------------------------- tensor methods

    fn tensor_method(
        &mut self,
        recv: &Vals,
        meth: &str,
        args: &Args<'t>,
        node: Node<'t>,
        recv_node: Node<'t>,
    ) -> Vals {
        let call = TextRange::of(node);
        match meth {
            "backward" => {
                let retain = self.retains(args);
                self.check_graph(recv, call, retain, true);
                return smallvec![self.other];
            }
            "detach" => return recv.iter().map(|v| self.detach_of(*v, call)).collect(),
            "detach_" => {
                // Cuts the history in place; the data and its version stay as they are.
                for v in recv {
                    if let Obj::Tensor(t) = &mut self.heap[*v as usize] {
                        t.grad = Tri::No;
                        t.leaf = false;
                        t.node = None;
                    }
                }
                return recv.clone();
            }
            "requires_grad_" => {
                let on = args.first().is_none()
                    || args
                        .positional
                        .first()
                        .and_then(|(_, n)| *n)
                        .is_none_or(|n| self.text(n) != "False");
                for v in recv {
                    if let Obj::Tensor(t) = &mut self.heap[*v as usize] {
                        t.grad = if on { Tri::Yes } else { Tri::No };
                        t.leaf = on && t.node.is_none();
                    }
                }
                return recv.clone();
            }
            "retain_grad" | "register_hook" | "share_memory_" => return smallvec![self.other],
            "clone" | "to" | "cuda" | "cpu" | "float" | "double" | "half" | "bfloat16" | "type"
            | "type_as" | "contiguous" | "long" | "int" | "bool" => {
                return smallvec![self.derive(
                    std::slice::from_ref(recv),
                    call,
                    Saves::default(),
                    "",
                    false
                )];
            }
            _ => {}
        }
        if ops::NON_TENSOR.contains(&meth) {
            return smallvec![self.other];
        }
        if ops::VIEW_OPS.contains(&meth) {
            let views: Vals = recv.iter().map(|v| self.view_of(*v, call)).collect();
            if matches!(
                meth,
                "unbind"
                    | "split"
                    | "chunk"
                    | "tensor_split"
                    | "split_with_sizes"
                    | "hsplit"
                    | "vsplit"
            ) {
                return smallvec![self.alloc(Obj::Seq(vec![views]))];
            }
            return views;
        }
        if let Some(base) = strip_inplace(meth) {
            let through = obj_name(self, recv_node);
            let keep = self.keep_name(node, through.clone());
            let value = args.first().cloned();
            self.write(
                recv,
                WriteKind::Method(meth.into()),
                call,
                call,
                through,
                keep,
                value.as_ref(),
                true,
            );
            self.inplace_saves_by_name(recv, base, value.as_ref(), node);
            return recv.clone();
        }
        let mut inputs = vec![recv.clone()];
        inputs.extend(args.positional.iter().map(|(v, _)| v.clone()));
        if ops::table().op(meth).is_some() || binary_op_name_rev(meth) {
            let display = format!(".{meth}()");
            let name = self.dim_variant(meth, args, 0);
            return smallvec![self.apply_op(&name, &display, &inputs, node, false)];
        }
        smallvec![self.derive(&inputs, call, Saves::default(), "", false)]
    }

    /// A method on a value we do not model: module and optimizer idioms, else a tensor guess.
    fn unknown_method(
        &mut self,
        recv: ObjId,
        meth: &str,
        args: &Args<'t>,
        node: Node<'t>,
        recv_node: Node<'t>,
    ) -> Vals {
        let call = TextRange::of(node);
        match meth {
            "parameters" | "named_parameters" => {
                return smallvec![self.alloc(Obj::Params {
                    owners: smallvec![recv],
                    tensors: Vals::new()
                })]
            }
            "backward" => {
                let retain = self.retains(args);
                self.check_graph(&smallvec![recv], call, retain, true);
                return smallvec![self.other];
            }
            // `scaler.step(optimizer)` (AMP) steps that optimizer.
            "step"
                if args.first().is_some_and(|v| {
                    v.iter()
                        .any(|o| matches!(self.heap[*o as usize], Obj::Optimizer { .. }))
                }) =>
            {
                let opts = args.first().cloned().unwrap_or_default();
                for o in opts {
                    if let Obj::Optimizer { params, .. } = self.heap[o as usize].clone() {
                        self.optimizer_method(o, &params, "step", &Args::default(), node);
                    }
                }
                return smallvec![self.other];
            }
            "step" | "zero_grad" | "update" | "append" | "extend" | "items" | "keys" | "values"
            | "get" | "pop" => {
                return self.opaque_call(args, call);
            }
            _ => {}
        }
        if strip_inplace(meth).is_some() && !meth.starts_with('_') {
            // Only tensors have `add_`-style methods: this value is one.
            if let Obj::Unknown = self.heap[recv as usize] {
                self.heap[recv as usize] = Obj::Tensor(TensorObj::fresh(
                    recv,
                    Tri::Maybe,
                    false,
                    TextRange::of(recv_node),
                ));
            }
            return self.tensor_method(&smallvec![recv], meth, args, node, recv_node);
        }
        // The receiver's own history is not known; the arguments' is.
        self.opaque_call(args, call)
    }

    // ------------------------------------------------------------------ ops and their saves

    pub fn binary(&mut self, op: &str, a: &Vals, b: &Vals, node: Node<'t>) -> Vals {
        let any_tensor = a.iter().chain(b.iter()).any(|v| self.maybe_tensor(*v));
        if !any_tensor {
            // `list(a.parameters()) + list(b.parameters())`: the items of both lists.
            let seqs: Vec<Vec<Vals>> = a
                .iter()
                .chain(b.iter())
                .filter_map(|v| match &self.heap[*v as usize] {
                    Obj::Seq(items) => Some(items.clone()),
                    _ => None,
                })
                .collect();
            if op == "+" && !seqs.is_empty() {
                let mut items = seqs.concat();
                if items.len() > MAX_SLOTS {
                    // Keep lists bounded (`x = x + x` in a loop): the rest share the last slot.
                    let rest: Vals = items.drain(MAX_SLOTS - 1..).flatten().take(32).collect();
                    items.push(rest);
                }
                return smallvec![self.alloc(Obj::Seq(items))];
            }
            return smallvec![self.alloc(Obj::Unknown)];
        }
        let Some(name) = binary_op_name(op) else {
            return smallvec![self.derive(
                &[a.clone(), b.clone()],
                TextRange::of(node),
                Saves::default(),
                "",
                false
            )];
        };
        smallvec![self.apply_op(name, op, &[a.clone(), b.clone()], node, false)]
    }

    fn arg_kind(&self, vals: &Vals) -> ArgKind {
        let mut kind = ArgKind::Scalar;
        for v in vals {
            match &self.heap[*v as usize] {
                Obj::Tensor(t) if t.grad.is_possible() => return ArgKind::Grad,
                Obj::Tensor(_) => kind = ArgKind::Const,
                _ => {}
            }
        }
        kind
    }

    /// Apply an op from the table: a new result tensor whose node records what the op saved.
    pub fn apply_op(
        &mut self,
        name: &str,
        display: &str,
        inputs: &[Vals],
        node: Node<'t>,
        known: bool,
    ) -> ObjId {
        let a = inputs
            .first()
            .map(|v| self.arg_kind(v))
            .unwrap_or(ArgKind::Scalar);
        let b = inputs.get(1).map(|v| self.arg_kind(v));
        let saves = if self.grad_enabled {
            ops::table().saves(name, a, b)
        } else {
            Saves::default()
        };
        let display = if display.is_empty() {
            name.to_string()
        } else {
            display.to_string()
        };
        self.derive(inputs, TextRange::of(node), saves, &display, known)
    }

    /// A new tensor computed from `inputs`; `saves` says which of them (and itself) its backward reads.
    pub fn derive(
        &mut self,
        inputs: &[Vals],
        origin: TextRange,
        saves: Saves,
        op: &str,
        known: bool,
    ) -> ObjId {
        let mut grad = Tri::No;
        let mut parents = smallvec::SmallVec::<[NodeId; 2]>::new();
        // The result is known to be a tensor when a torch function made it or an input is one.
        let mut known = known;
        for vals in inputs {
            for v in vals {
                if let Obj::Tensor(t) = &self.heap[*v as usize] {
                    known |= t.known;
                    grad = grad.max(t.grad);
                    if let Some(n) = t.node {
                        if !parents.contains(&n) {
                            parents.push(n);
                        }
                    }
                }
            }
        }
        if !self.grad_enabled {
            grad = Tri::No;
        }
        let id = self.heap.len() as ObjId;
        let mut node_saves = smallvec::SmallVec::<[SaveId; 2]>::new();
        if grad.is_possible() {
            if saves.result {
                node_saves.push(self.record_save(id, true, op, origin));
            }
            for (i, flag) in [(0usize, saves.input), (1usize, saves.other)] {
                if !flag {
                    continue;
                }
                if let Some(vals) = inputs.get(i) {
                    for v in vals.clone() {
                        if let Obj::Tensor(t) = &self.heap[v as usize] {
                            let storage = t.storage;
                            node_saves.push(self.record_save(storage, false, op, origin));
                        }
                    }
                }
            }
        }
        let node = if grad.is_possible() {
            self.graph.push(GraphNode {
                saves: node_saves,
                parents,
            });
            Some((self.graph.len() - 1) as NodeId)
        } else {
            None
        };
        let mut t = TensorObj::fresh(id, grad, known, origin);
        t.node = node;
        self.alloc(Obj::Tensor(t))
    }

    fn record_save(&mut self, storage: ObjId, output: bool, op: &str, range: TextRange) -> SaveId {
        self.saves.push(Save {
            storage,
            output,
            op: op.to_string(),
            range,
        });
        let id = (self.saves.len() - 1) as SaveId;
        self.state.live.entry(storage).or_default().push(id);
        id
    }

    /// Saves made by an in-place op on its own result (`sigmoid_` saves the result, `mul_(w)`
    /// saves `w`), recorded after the write so they carry the new version.
    pub fn inplace_saves_by_name(
        &mut self,
        targets: &Vals,
        base: &str,
        other: Option<&Vals>,
        node: Node<'t>,
    ) {
        if !self.grad_enabled {
            return;
        }
        let a = self.arg_kind(targets);
        let b = other.map(|o| self.arg_kind(o));
        let s = ops::table().saves(base, a, b);
        let grad_any = a == ArgKind::Grad || b == Some(ArgKind::Grad);
        if !grad_any || !(s.result || s.other) {
            return;
        }
        let origin = TextRange::of(node);
        let op = format!("{}_", base);
        let mut saves = smallvec::SmallVec::<[SaveId; 2]>::new();
        for t in targets.clone() {
            if let Obj::Tensor(tt) = &self.heap[t as usize] {
                let storage = tt.storage;
                if s.result {
                    saves.push(self.record_save(storage, true, &op, origin));
                }
            }
        }
        if let (true, Some(o)) = (s.other, other) {
            for v in o.clone() {
                if let Obj::Tensor(tt) = &self.heap[v as usize] {
                    let storage = tt.storage;
                    saves.push(self.record_save(storage, false, &op, origin));
                }
            }
        }
        self.extend_history(targets, saves, other);
    }

    /// After an in-place op, the written tensors' history includes the op.
    fn extend_history(
        &mut self,
        targets: &Vals,
        saves: smallvec::SmallVec<[SaveId; 2]>,
        other: Option<&Vals>,
    ) {
        let mut parents = smallvec::SmallVec::<[NodeId; 2]>::new();
        for v in targets.iter().chain(other.into_iter().flatten()) {
            if let Obj::Tensor(t) = &self.heap[*v as usize] {
                if let Some(n) = t.node {
                    if !parents.contains(&n) {
                        parents.push(n);
                    }
                }
            }
        }
        self.graph.push(GraphNode { saves, parents });
        let n = (self.graph.len() - 1) as NodeId;
        for v in targets {
            if let Obj::Tensor(t) = &mut self.heap[*v as usize] {
                t.node = Some(n);
                if t.grad == Tri::No {
                    t.grad = Tri::Maybe;
                }
            }
        }
    }

    // ----------------------------------------------------------- views, detach, data, grad

    pub fn view_of(&mut self, base: ObjId, origin: TextRange) -> ObjId {
        let Obj::Tensor(t) = &self.heap[base as usize] else {
            return self.alloc(Obj::Unknown);
        };
        let mut v = t.clone();
        v.view_of_leaf = (t.leaf || t.view_of_leaf) && t.counter && self.grad_enabled;
        v.leaf = false;
        v.view_origin = Some(origin);
        v.origin = origin;
        v.grad_tensor = None;
        if !self.grad_enabled {
            v.grad = Tri::No;
        }
        self.alloc(Obj::Tensor(v))
    }

    pub fn detach_of(&mut self, base: ObjId, origin: TextRange) -> ObjId {
        let Obj::Tensor(t) = &self.heap[base as usize] else {
            return self.alloc(Obj::Unknown);
        };
        let mut v = t.clone();
        v.grad = Tri::No;
        v.leaf = false;
        v.view_of_leaf = false;
        v.node = None;
        v.view_origin = Some(origin);
        v.origin = origin;
        v.grad_tensor = None;
        self.alloc(Obj::Tensor(v))
    }

    pub fn data_alias(&mut self, base: ObjId, origin: TextRange) -> ObjId {
        let id = self.detach_of(base, origin);
        if let Obj::Tensor(t) = &mut self.heap[id as usize] {
            t.counter = false;
            t.view_origin = None;
        }
        id
    }

    pub fn new_leaf(&mut self, grad: bool, origin: TextRange) -> ObjId {
        let id = self.heap.len() as ObjId;
        let mut t = TensorObj::fresh(id, if grad { Tri::Yes } else { Tri::No }, true, origin);
        t.leaf = grad;
        self.alloc(Obj::Tensor(t))
    }

    /// The tensors among `vals`; unknown values written in place are taken for tensors.
    pub fn as_tensors(&mut self, vals: &Vals) -> Vals {
        let mut out = Vals::new();
        for v in vals {
            match self.heap[*v as usize] {
                Obj::Tensor(_) => out.push(*v),
                Obj::Unknown if *v != self.unknown => {
                    let origin = TextRange::default();
                    self.heap[*v as usize] =
                        Obj::Tensor(TensorObj::fresh(*v, Tri::Maybe, false, origin));
                    out.push(*v);
                }
                _ => {}
            }
        }
        out
    }

    pub fn attribute_of(&mut self, o: ObjId, attr: &str, node: Node<'t>) -> Vals {
        let range = TextRange::of(node);
        match self.heap[o as usize].clone() {
            Obj::Path(p) => {
                if let Some(v) = self.loose_attrs.get(&(o, Name::from(attr))) {
                    return smallvec![*v];
                }
                smallvec![self.alloc(Obj::Path(format!("{p}.{attr}").into()))]
            }
            Obj::Tensor(t) => match attr {
                "data" => {
                    let alias = self.data_alias(o, range);
                    if t.known || t.grad == Tri::Yes {
                        self.data_reads.entry(range).or_insert(false);
                    }
                    smallvec![alias]
                }
                "grad" => {
                    if let Some(g) = t.grad_tensor {
                        return smallvec![g];
                    }
                    let g = self.new_leaf(false, range);
                    if let Obj::Tensor(t) = &mut self.heap[o as usize] {
                        t.grad_tensor = Some(g);
                    }
                    smallvec![g]
                }
                a if ops::VIEW_ATTRS.contains(&a) => smallvec![self.view_of(o, range)],
                a if ops::NON_TENSOR.contains(&a) => smallvec![self.other],
                _ => smallvec![self.alloc(Obj::Unknown)],
            },
            Obj::Module(m) => {
                if let Some(v) = m.attrs.get(attr) {
                    return v.clone();
                }
                if let Some(c) = &m.local {
                    if let Some(def) = self.find_method(c, attr) {
                        return smallvec![self.alloc(Obj::Bound(o, def))];
                    }
                }
                if attr == "training" {
                    return smallvec![self.other];
                }
                let key = (o, Name::from(attr));
                if let Some(v) = self.loose_attrs.get(&key) {
                    return smallvec![*v];
                }
                let v = self.alloc(Obj::Unknown);
                self.loose_attrs.insert(key, v);
                smallvec![v]
            }
            Obj::Class(c) => match self.find_method(&c, attr) {
                Some(def) => smallvec![self.alloc(Obj::Func(def))],
                None => smallvec![self.alloc(Obj::Unknown)],
            },
            Obj::Other => smallvec![self.other],
            _ => {
                let key = (o, Name::from(attr));
                if let Some(v) = self.loose_attrs.get(&key) {
                    return smallvec![*v];
                }
                let v = self.alloc(Obj::Unknown);
                self.loose_attrs.insert(key, v);
                smallvec![v]
            }
        }
    }

    // -------------------------------------------------------------------------------- writes

    /// An in-place write into `targets`. `keep` is the name that rightly sees the new value.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &mut self,
        targets: &Vals,
        kind: WriteKind,
        range: TextRange,
        site: TextRange,
        through: Option<Name>,
        keep: Option<Name>,
        value: Option<&Vals>,
        checks_leaf: bool,
    ) -> WriteId {
        self.steps += targets.len() as u64;
        let no_grad = !self.grad_enabled || !checks_leaf;
        let first = targets.first().copied().unwrap_or(self.unknown);
        let view_origin = match &self.heap[first as usize] {
            Obj::Tensor(t) => t.view_origin,
            _ => None,
        };
        let through_bound = through
            .as_ref()
            .and_then(|n| self.state.bound_at.get(n).copied());
        self.writes.push(Write {
            range,
            site,
            target: first,
            kind: kind.clone(),
            view_origin,
            call_site: self.call_site,
            through_bound,
            under_no_grad: !self.grad_enabled,
        });
        let wid = (self.writes.len() - 1) as WriteId;
        self.record_site(range, targets);
        let value_grad = value.map(|v| {
            v.iter()
                .fold(Tri::No, |g, x| match &self.heap[*x as usize] {
                    Obj::Tensor(t) => g.max(t.grad),
                    _ => g,
                })
        });
        // A write through a name that may point to several tensors counts only where every
        // possibility agrees: all are leaves (forms ①②), all carry a live save (form ③), or
        // there is just one (IP402).
        let tensors: Vec<TensorObj> = targets
            .iter()
            .filter_map(|t| match &self.heap[*t as usize] {
                Obj::Tensor(tt) => Some(tt.clone()),
                _ => None,
            })
            .collect();
        let single = tensors.len() == 1;
        // A buffer without grad (`torch.zeros(...)`) that is filled with tensors that have history.
        let plain_buffer = !tensors.is_empty()
            && tensors
                .iter()
                .all(|t| t.grad == Tri::No && t.node.is_none() && t.counter);
        let all_leaf = tensors.iter().all(|t| t.leaf || t.view_of_leaf);
        let all_saved = tensors.iter().all(|t| {
            self.state
                .live
                .get(&t.storage)
                .is_some_and(|s| !s.is_empty())
        });
        for t in targets {
            let Obj::Tensor(tt) = self.heap[*t as usize].clone() else {
                continue;
            };
            // Forms ① and ②: a leaf that requires grad, written while grad mode is on.
            if !no_grad && tt.counter && all_leaf {
                let leaf_view = tt.view_of_leaf || (tt.leaf && kind == WriteKind::Subscript);
                if leaf_view {
                    let f = rules::ip201_leaf_view_inplace::finding(
                        &self.ctx,
                        &self.writes[wid as usize],
                        tt.view_origin,
                    );
                    self.report(f);
                } else if tt.leaf {
                    let f =
                        rules::ip101_leaf_inplace::finding(&self.ctx, &self.writes[wid as usize]);
                    self.report(f);
                }
            }
            if !tt.counter {
                // Form ④: the write does not bump the counter autograd checks.
                if let Some(r) = self.data_reads.get_mut(&tt.origin) {
                    *r = true;
                }
                // `x.data = v` swaps the storage; what autograd saved keeps the old one.
                let live = kind != WriteKind::DataAssign
                    && self
                        .state
                        .live
                        .get(&tt.storage)
                        .is_some_and(|s| !s.is_empty());
                let f = rules::ip401_data_bypass::write_finding(
                    &self.ctx,
                    &self.writes[wid as usize],
                    live,
                );
                self.report(f);
                continue;
            }
            // A step writes every parameter for certain (they are not alternatives).
            let must = single || all_saved || kind == WriteKind::Step;
            if let Some(saves) = self.state.live.get(&tt.storage).cloned().filter(|_| must) {
                for s in saves {
                    let entry = self.state.clobbered.entry(s).or_default();
                    if !entry.contains(&wid) {
                        entry.push(wid);
                    }
                }
            }
            // IP402: other names bound to this very object now see the new value (an
            // optimizer step is meant to be seen).
            if tt.known && single && kind != WriteKind::Step {
                let stale: Vec<Name> = self
                    .state
                    .env
                    .iter()
                    .filter(|(n, vs)| vs.contains(t) && Some(*n) != keep.as_ref())
                    .map(|(n, _)| n.clone())
                    .collect();
                for n in stale {
                    let e = self.state.stale.entry(n).or_default();
                    if !e.contains(&wid) {
                        e.push(wid);
                    }
                }
            }
            if let (Some(g), Obj::Tensor(tm)) = (value_grad, &mut self.heap[*t as usize]) {
                if g.is_possible() && self.grad_enabled && tm.grad == Tri::No {
                    tm.grad = g;
                }
            }
        }
        // Copying a tensor with history into a plain buffer (`buf[t] = h`, `buf.copy_(h)`) makes
        // that history part of the buffer's (autograd's CopySlices).
        if let Some(v) = value {
            let carries = v
                .iter()
                .any(|x| matches!(&self.heap[*x as usize], Obj::Tensor(t) if t.node.is_some()));
            if carries && plain_buffer && self.grad_enabled {
                let tensors: Vals = targets
                    .iter()
                    .copied()
                    .filter(|t| self.maybe_tensor(*t))
                    .collect();
                self.extend_history(&tensors, smallvec::SmallVec::new(), Some(v));
            }
        }
        wid
    }

    /// Remember which names share the version counter a write bumps (for hover).
    fn record_site(&mut self, range: TextRange, targets: &Vals) {
        let storages: Vec<ObjId> = targets
            .iter()
            .filter_map(|t| match &self.heap[*t as usize] {
                Obj::Tensor(tt) if tt.counter => Some(tt.storage),
                _ => None,
            })
            .collect();
        let names = self.sites.entry(range).or_default();
        for (name, vals) in &self.state.env {
            let shares = vals.iter().any(|v| matches!(&self.heap[*v as usize], Obj::Tensor(t) if t.counter && storages.contains(&t.storage)));
            if shares {
                names.insert(name.to_string());
            }
        }
    }

    // ------------------------------------------------------------- backward and liveness

    /// `backward()` (or a graph returned out of a function) through `roots`: every save it
    /// reaches that a write clobbered is a form ③ finding at that write.
    pub fn check_graph(
        &mut self,
        roots: &Vals,
        trigger: TextRange,
        retain: bool,
        is_backward: bool,
    ) {
        let mut flat = Vals::new();
        let mut seen = FxHashSet::default();
        self.flatten(roots, &mut flat, &mut seen);
        let mut stack: Vec<NodeId> = flat
            .iter()
            .filter_map(|v| match &self.heap[*v as usize] {
                Obj::Tensor(t) => t.node,
                _ => None,
            })
            .collect();
        let mut visited = FxHashSet::default();
        let mut reached = Vec::new();
        while let Some(n) = stack.pop() {
            if !visited.insert(n) {
                continue;
            }
            let node = &self.graph[n as usize];
            reached.extend(node.saves.iter().copied());
            stack.extend(node.parents.iter().copied());
        }
        for s in &reached {
            let Some(ws) = self.state.clobbered.get(s).cloned() else {
                continue;
            };
            for w in ws {
                let write = self.writes[w as usize].clone();
                let save = self.saves[*s as usize].clone();
                let f = rules::form3_finding(&self.ctx, &write, &save, trigger, is_backward);
                self.report(f);
            }
        }
        if !retain {
            for s in reached {
                self.state.clobbered.remove(&s);
                let storage = self.saves[s as usize].storage;
                if let Some(live) = self.state.live.get_mut(&storage) {
                    live.retain(|x| *x != s);
                }
            }
        }
    }

    pub fn report_stale_read(&mut self, name: &str, writes: &[WriteId], read: TextRange) {
        for w in writes {
            let write = self.writes[*w as usize].clone();
            let mut bindings: Vec<TextRange> = write.through_bound.into_iter().collect();
            bindings.extend(self.state.bound_at.get(name).copied());
            let f = rules::ip402_clobbered_alias::finding(&self.ctx, &write, name, read, &bindings);
            self.report(f);
        }
    }

    // ------------------------------------------------------------------ rebinding (IP403)

    pub fn check_rebind(&mut self, name: &Name, name_node: Node<'t>, new: &Vals, stmt: Node<'t>) {
        let old = self.state.env.get(name).cloned().unwrap_or_default();
        self.check_rebind_objs(&old, new, name_node, stmt, name);
    }

    pub fn check_rebind_objs(
        &mut self,
        old: &Vals,
        new: &Vals,
        target: Node<'t>,
        stmt: Node<'t>,
        name: &str,
    ) {
        for o in old {
            if new.contains(o) {
                continue;
            }
            let held_by = self.state.held.get(o).copied();
            let new_is_leaf = new
                .iter()
                .any(|n| matches!(&self.heap[*n as usize], Obj::Tensor(t) if t.leaf));
            let rhs = stmt.field("right");
            let reads_grad = rhs.is_some_and(|r| mentions_grad_of(self, r, name));
            match (&self.heap[*o as usize], held_by) {
                (Obj::Module(_), Some(opt)) => {
                    // A wrapper that keeps the old parameters is fine (`DataParallel(model)`).
                    let mut old_params = Vals::new();
                    self.module_params(*o, &mut old_params, &mut FxHashSet::default());
                    let mut new_params = Vals::new();
                    for n in new {
                        self.module_params(*n, &mut new_params, &mut FxHashSet::default());
                    }
                    if old_params.iter().all(|p| new_params.contains(p)) && !old_params.is_empty() {
                        continue;
                    }
                    let origin = self.optimizer_origin(opt);
                    let f = rules::ip403_param_rebind::finding(
                        &self.ctx, stmt, target, name, origin, false,
                    );
                    // Reported once the optimizer is used again (a new one may replace it).
                    self.state.orphan(opt, f);
                    return;
                }
                (Obj::Tensor(_), Some(opt)) => {
                    let origin = self.optimizer_origin(opt);
                    let f = rules::ip403_param_rebind::finding(
                        &self.ctx, stmt, target, name, origin, reads_grad,
                    );
                    self.state.orphan(opt, f);
                    return;
                }
                // A new leaf that requires grad (`(x + d).detach().requires_grad_()`) is the
                // right way to restart from an update.
                (Obj::Tensor(t), None) if t.leaf && reads_grad && !new_is_leaf => {
                    let f = rules::ip403_param_rebind::finding(
                        &self.ctx, stmt, target, name, None, true,
                    );
                    self.report(f);
                    return;
                }
                _ => {}
            }
        }
    }

    fn optimizer_origin(&self, opt: ObjId) -> Option<TextRange> {
        match &self.heap[opt as usize] {
            Obj::Optimizer { origin, .. } => Some(*origin),
            _ => None,
        }
    }

    // ------------------------------------------------------------ modules and optimizers

    fn new_module(&mut self, class: &str, args: &Args<'t>, node: Node<'t>) -> ObjId {
        let origin = TextRange::of(node);
        let inplace = args
            .keyword("inplace")
            .filter(|(v, _)| v.contains(&self.true_obj))
            .map(|(_, n)| TextRange::of(n))
            .or_else(|| {
                // `nn.ReLU(True)`, `nn.LeakyReLU(0.2, True)`: `inplace` given by position.
                let (v, n) = args.positional.get(ops::module_inplace_position(class)?)?;
                v.contains(&self.true_obj)
                    .then(|| n.map(TextRange::of))
                    .flatten()
            });
        let mut children = Vec::new();
        let mut attrs = rustc_hash::FxHashMap::default();
        match class {
            "Sequential" | "ModuleList" => {
                let mut flat = Vals::new();
                let mut seen = FxHashSet::default();
                for (v, _) in &args.positional {
                    self.flatten(v, &mut flat, &mut seen);
                }
                children = flat
                    .into_iter()
                    .filter(|v| matches!(self.heap[*v as usize], Obj::Module(_)))
                    .collect();
            }
            "ModuleDict" | "ParameterList" | "ParameterDict" => {
                let mut flat = Vals::new();
                let mut seen = FxHashSet::default();
                for (v, _) in &args.positional {
                    self.flatten(v, &mut flat, &mut seen);
                }
                children = flat.into_vec();
            }
            _ => {
                let params: Vec<String> = match ops::table().module(class) {
                    Some(spec) => spec.params.clone(),
                    None if ops::module_has_params(class) => vec!["weight".into(), "bias".into()],
                    None => Vec::new(),
                };
                for p in params {
                    let t = self.new_leaf(true, origin);
                    attrs.insert(Name::from(p.as_str()), smallvec![t]);
                }
                // Wrappers (`DataParallel(model)`) hold the wrapped module.
                if let Some((v, _)) = args.positional.first() {
                    for m in v {
                        if matches!(self.heap[*m as usize], Obj::Module(_)) {
                            children.push(*m);
                            attrs.insert(Name::from("module"), smallvec![*m]);
                        }
                    }
                }
            }
        }
        self.alloc(Obj::Module(ModuleObj {
            class: class.into(),
            local: None,
            inplace,
            attrs,
            children,
            origin,
            hooks: Vec::new(),
        }))
    }

    pub fn call_module(&mut self, m: ObjId, args: &Args<'t>, node: Node<'t>) -> Vals {
        self.call_module_at(m, args, node, None)
    }

    /// Call a module; `site` is where its saves are reported (its constructor inside a
    /// `Sequential`, else the call).
    fn call_module_at(
        &mut self,
        m: ObjId,
        args: &Args<'t>,
        node: Node<'t>,
        site: Option<TextRange>,
    ) -> Vals {
        let out = self.call_module_body(m, args, node, site);
        let hooks = match &self.heap[m as usize] {
            Obj::Module(module) => module.hooks.clone(),
            _ => Vec::new(),
        };
        if hooks.is_empty() {
            return out;
        }
        // Forward hooks run as `hook(module, inputs, output)`; a result that is not None
        // replaces the output.
        let inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        let input_tuple = self.alloc(Obj::Seq(inputs));
        let mut result = out;
        for hook in hooks {
            let hook_args = Args {
                positional: vec![
                    (smallvec![m], None),
                    (smallvec![input_tuple], None),
                    (result.clone(), None),
                ],
                keywords: Vec::new(),
            };
            let returned = self.call_value(hook, &hook_args, node);
            if returned.iter().any(|v| self.maybe_tensor(*v)) {
                result = returned;
            }
        }
        result
    }

    fn call_module_body(
        &mut self,
        m: ObjId,
        args: &Args<'t>,
        node: Node<'t>,
        site: Option<TextRange>,
    ) -> Vals {
        let call = TextRange::of(node);
        let save_at = site.unwrap_or(call);
        let Obj::Module(module) = self.heap[m as usize].clone() else {
            return smallvec![self.unknown];
        };
        if let Some(c) = &module.local {
            return match self
                .find_method(c, "forward")
                .or_else(|| self.find_method(c, "__call__"))
            {
                Some(def) => self.inline(def, Some(m), args, call),
                None => self.opaque_call(args, call),
            };
        }
        let input = args.first().cloned().unwrap_or_default();
        match &*module.class {
            "Sequential" => {
                let mut x = input;
                for child in module.children.clone() {
                    let mut a = Args::default();
                    a.positional.push((x, None));
                    let origin = self.heap_origin(child);
                    x = self.call_module_at(child, &a, node, Some(origin));
                }
                return x;
            }
            "DataParallel" | "DistributedDataParallel" => {
                if let Some(inner) = module.children.first() {
                    return self.call_module(*inner, args, node);
                }
            }
            _ => {}
        }
        let display = self.module_display(&module);
        let spec = ops::table().module(&module.class);
        if let Some(kw) = module.inplace {
            let tensors = self.as_tensors(&input);
            let (through, keep) = self.first_arg_names(args, node);
            self.write(
                &tensors,
                WriteKind::InplaceModule { call },
                kw,
                call,
                through,
                keep,
                None,
                true,
            );
            if spec.is_some_and(|s| s.result) && self.grad_enabled {
                let mut saves = smallvec::SmallVec::<[SaveId; 2]>::new();
                for t in tensors.clone() {
                    if let Obj::Tensor(tt) = &self.heap[t as usize] {
                        if tt.grad.is_possible() {
                            let st = tt.storage;
                            saves.push(self.record_save(st, true, &display, save_at));
                        }
                    }
                }
                self.extend_history(&tensors, saves, None);
            }
            return input;
        }
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        let input_grad = self.arg_kind(&input) == ArgKind::Grad;
        let saves = Saves {
            result: spec.is_some_and(|s| s.result),
            input: spec.is_some_and(|s| s.input),
            other: false,
        };
        let mut inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        if inputs.is_empty() {
            inputs.push(Vals::new());
        }
        let grad_params: Vals = if self.grad_enabled {
            params.clone()
        } else {
            Vals::new()
        };
        let out = self.derive(
            &[inputs.concat().into_iter().collect(), grad_params],
            call,
            Saves::default(),
            &display,
            true,
        );
        // Record the saves against the real inputs and parameters.
        if self.grad_enabled {
            let out_grad =
                matches!(&self.heap[out as usize], Obj::Tensor(t) if t.grad.is_possible());
            if out_grad {
                let mut new_saves = smallvec::SmallVec::<[SaveId; 2]>::new();
                if saves.result {
                    new_saves.push(self.record_save(out, true, &display, save_at));
                }
                if saves.input {
                    for v in input.clone() {
                        if let Obj::Tensor(t) = &self.heap[v as usize] {
                            let st = t.storage;
                            new_saves.push(self.record_save(st, false, &display, save_at));
                        }
                    }
                }
                if input_grad {
                    for p in params.clone() {
                        if let Obj::Tensor(t) = &self.heap[p as usize] {
                            let st = t.storage;
                            new_saves.push(self.record_save(st, false, &display, save_at));
                        }
                    }
                }
                if let Obj::Tensor(t) = &self.heap[out as usize] {
                    if let Some(n) = t.node {
                        self.graph[n as usize].saves.extend(new_saves);
                    }
                }
            }
        }
        smallvec![out]
    }

    fn module_display(&self, m: &ModuleObj<'t>) -> String {
        let text = &self.ctx.src[m.origin.start..m.origin.end];
        if !text.is_empty() && text.len() <= 48 && !text.contains('\n') {
            text.to_string()
        } else {
            format!("nn.{}", m.class)
        }
    }

    /// All parameters of a module and its submodules.
    pub fn module_params(&self, m: ObjId, out: &mut Vals, seen: &mut FxHashSet<ObjId>) {
        if !seen.insert(m) {
            return;
        }
        match &self.heap[m as usize] {
            Obj::Module(module) => {
                for vals in module.attrs.values() {
                    for v in vals {
                        self.module_params(*v, out, seen);
                    }
                }
                for c in &module.children {
                    self.module_params(*c, out, seen);
                }
            }
            Obj::Tensor(t) if t.leaf => out.push(m),
            Obj::Seq(items) => {
                for v in items.iter().flatten() {
                    self.module_params(*v, out, seen);
                }
            }
            _ => {}
        }
    }

    fn module_method(&mut self, m: ObjId, meth: &str, args: &Args<'t>, node: Node<'t>) -> Vals {
        let call = TextRange::of(node);
        if let Obj::Module(module) = &self.heap[m as usize] {
            if let Some(v) = module.attrs.get(meth).cloned() {
                let mut out = Vals::new();
                for c in v {
                    out.extend(self.call_value(c, args, node));
                }
                return out;
            }
            if let Some(c) = module.local.clone() {
                if let Some(def) = self.find_method(&c, meth) {
                    return self.inline(def, Some(m), args, call);
                }
            }
        }
        match meth {
            "parameters" | "named_parameters" => {
                let mut ps = Vals::new();
                self.module_params(m, &mut ps, &mut FxHashSet::default());
                let params = self.alloc(Obj::Params {
                    owners: smallvec![m],
                    tensors: ps.clone(),
                });
                if meth == "named_parameters" {
                    let pair = self.alloc(Obj::Seq(vec![smallvec![self.other], ps]));
                    let seq = self.alloc(Obj::Seq(vec![smallvec![pair]]));
                    return smallvec![seq];
                }
                smallvec![params]
            }
            "forward" => self.call_module(m, args, node),
            "children" | "modules" => {
                let ch = match &self.heap[m as usize] {
                    Obj::Module(module) => {
                        let mut v: Vals = module.children.iter().copied().collect();
                        for vals in module.attrs.values() {
                            v.extend(
                                vals.iter()
                                    .copied()
                                    .filter(|x| matches!(self.heap[*x as usize], Obj::Module(_))),
                            );
                        }
                        v
                    }
                    _ => Vals::new(),
                };
                smallvec![self.alloc(Obj::Seq(vec![ch]))]
            }
            "add_module" | "register_module" => {
                if let (Some((n, Some(nn))), Some((v, _))) =
                    (args.positional.first(), args.positional.get(1))
                {
                    let _ = n;
                    let key: Name = self
                        .text(*nn)
                        .trim_matches(|c| c == '"' || c == '\'')
                        .into();
                    if let Obj::Module(module) = &mut self.heap[m as usize] {
                        module.attrs.insert(key, v.clone());
                    }
                }
                smallvec![self.other]
            }
            "register_parameter" | "register_buffer" => smallvec![self.other],
            "append" => {
                if let Some(v) = args.first() {
                    let v = v.clone();
                    if let Obj::Module(module) = &mut self.heap[m as usize] {
                        module.children.extend(v);
                    }
                }
                smallvec![self.other]
            }
            _ if ops::MODULE_RETURNS_SELF.contains(&meth) => smallvec![m],
            "register_forward_hook" => {
                if let Some(hook) = args.first() {
                    let hook = hook.clone();
                    if let Obj::Module(module) = &mut self.heap[m as usize] {
                        module.hooks.extend(hook);
                    }
                }
                smallvec![self.alloc(Obj::Unknown)]
            }
            "zero_grad" | "state_dict" | "load_state_dict" | "register_full_backward_hook" => {
                smallvec![self.other]
            }
            _ => self.opaque_call(args, call),
        }
    }

    fn new_optimizer(&mut self, params: &Vals, origin: TextRange) -> ObjId {
        let mut flat = Vals::new();
        let mut seen = FxHashSet::default();
        self.flatten(params, &mut flat, &mut seen);
        let mut tensors = Vals::new();
        let mut owners = Vals::new();
        let mut stack: Vec<ObjId> = params.iter().copied().collect();
        let mut seen2 = FxHashSet::default();
        while let Some(v) = stack.pop() {
            if !seen2.insert(v) {
                continue;
            }
            match &self.heap[v as usize] {
                Obj::Params { owners: o, .. } => owners.extend(o.iter().copied()),
                Obj::Seq(items) => stack.extend(items.iter().flatten().copied()),
                _ => {}
            }
        }
        for v in flat {
            if let Obj::Tensor(_) = &self.heap[v as usize] {
                tensors.push(v);
            }
        }
        let opt = self.alloc(Obj::Optimizer {
            params: tensors.clone(),
            origin,
        });
        for t in tensors {
            self.state.held.insert(t, opt);
        }
        for o in owners {
            if matches!(self.heap[o as usize], Obj::Module(_)) {
                self.state.held.insert(o, opt);
            }
        }
        opt
    }

    fn optimizer_method(
        &mut self,
        opt: ObjId,
        params: &Vals,
        meth: &str,
        args: &Args<'t>,
        node: Node<'t>,
    ) -> Vals {
        if let Some(fs) = self.state.orphaned.remove(&opt) {
            for f in fs {
                self.report(f);
            }
        }
        let call = TextRange::of(node);
        match meth {
            "step" => {
                // Every held parameter is written in place (under no_grad, so no form ①).
                let tensors: Vals = params.clone();
                if !tensors.is_empty() {
                    self.write(
                        &tensors,
                        WriteKind::Step,
                        call,
                        call,
                        None,
                        None,
                        None,
                        false,
                    );
                }
                let _ = opt;
                smallvec![self.other]
            }
            "add_param_group" => {
                let mut flat = Vals::new();
                for v in args.all_values() {
                    self.flatten(v, &mut flat, &mut FxHashSet::default());
                }
                let new: Vals = flat.into_iter().filter(|v| self.maybe_tensor(*v)).collect();
                for t in &new {
                    self.state.held.insert(*t, opt);
                }
                if let Obj::Optimizer { params, .. } = &mut self.heap[opt as usize] {
                    params.extend(new);
                }
                smallvec![self.other]
            }
            _ => smallvec![self.other],
        }
    }

    fn seq_method(&mut self, s: ObjId, meth: &str, args: &Args<'t>) -> Vals {
        match meth {
            "append" | "extend" | "insert" | "add" => {
                let mut add = Vals::new();
                for v in args.all_values() {
                    if meth == "extend" {
                        add.extend(self.elements(v));
                    } else {
                        add.extend(v.iter().copied());
                    }
                }
                let slot = match &self.heap[s as usize] {
                    Obj::Seq(items) => items.len().min(MAX_SLOTS - 1),
                    _ => 0,
                };
                self.seq_insert(s, slot, &add);
                smallvec![self.other]
            }
            "pop" | "get" | "values" | "copy" => {
                let e = self.elements(&smallvec![s]);
                if meth == "values" || meth == "copy" {
                    return smallvec![self.alloc(Obj::Seq(vec![e]))];
                }
                e
            }
            "items" => {
                let e = self.elements(&smallvec![s]);
                let pair = self.alloc(Obj::Seq(vec![smallvec![self.other], e]));
                smallvec![self.alloc(Obj::Seq(vec![smallvec![pair]]))]
            }
            _ => smallvec![self.other],
        }
    }
}

fn binary_op_name_rev(meth: &str) -> bool {
    matches!(meth, "add" | "sub" | "mul" | "div" | "matmul" | "pow")
}

/// Whether `expr` reads `name.grad` (an update like `w - lr * w.grad`).
fn mentions_grad_of(it: &Interp<'_>, expr: Node<'_>, name: &str) -> bool {
    let mut stack = vec![expr];
    while let Some(n) = stack.pop() {
        if n.k() == "attribute" {
            if let (Some(o), Some(a)) = (n.field("object"), n.field("attribute")) {
                if it.text(a) == "grad" && it.text(o) == name {
                    return true;
                }
            }
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    false
}
