//! Expressions: names, attributes, subscripts, operators, literals, containers,
//! comprehensions.

use super::*;

/// What a subscript's index selects.
pub struct IndexOf {
    pub index: Index,
    /// A constant string key (`d["act"]`).
    pub key: Option<Name>,
    /// Index arrays (`x[idx]`, `x[mask]`, `x[:, [1, 3]]`): the read gathers a copy; the tensors
    /// it indexes with.
    pub gather: Option<Vals>,
    /// Every part an index array or a whole dimension, at least one an array (`x[mask]`,
    /// `x[:, [0]]`): a write goes into the tensor itself (`index_put_`), not into a view of it
    /// (measured with torch 2.15: on a leaf, form ① even for `x[mask] += v`).
    pub arrays_only: bool,
    /// A known integer index (`self.blocks[i]` with `i` from `for i in (0, 2)`): it pins down
    /// a child of a module container, whose children are known one by one (not an element of
    /// a list, whose slots may each stand for many elements).
    pub int: Option<i64>,
    /// The modules or tensors a one-part index evaluates to (`d[module]`): a dict keyed by
    /// them keeps them as its keys.
    pub objects: Vals,
}

impl IndexOf {
    /// The index into a list: the known integer's position when the subscript's own form did
    /// not give one (`self.states[layer_idx]` with `layer_idx` a known integer), as a read and
    /// an assignment there both take it.
    pub fn list_index(&self) -> Index {
        match (self.index, self.int) {
            (Index::Other, Some(k)) => Index::At(k),
            (index, _) => index,
        }
    }
}

impl Interp<'_, '_> {
    pub fn eval(&mut self, c: Code<'_>, e: ExprId) -> Vals {
        if self.depth > MAX_DEPTH || self.exhausted() {
            return smallvec![UNKNOWN];
        }
        self.depth += 1;
        let v = self.eval_inner(c, e);
        self.depth -= 1;
        self.bounded(v)
    }

    /// `eval`, or unknown for a missing expression.
    pub fn eval_opt(&mut self, c: Code<'_>, e: ExprId) -> Vals {
        match e.get() {
            Some(e) => self.eval(c, e),
            None => smallvec![UNKNOWN],
        }
    }

    fn eval_inner(&mut self, c: Code<'_>, e: ExprId) -> Vals {
        match *c.expr(e) {
            Expr::Name { name, reads } => self.lookup(c, e, name, reads),
            Expr::Attr { value, attr, .. } => {
                // (`self.feat.shape`: only metadata of what the slot holds is read.)
                let metadata = crate::ops::metadata_attr(self.name(attr));
                let owners = self.eval_metadata(c, value, metadata);
                let mut out = Vals::new();
                for o in owners {
                    for x in self.attribute_of(c, e, o, attr) {
                        if !out.contains(&x) {
                            out.push(x);
                        }
                    }
                }
                out
            }
            Expr::Call { func, args } => self.eval_call(c, e, func, args),
            Expr::Subscript { value, sub } => self.eval_subscript(c, e, value, sub),
            Expr::Binary { op, left, right } => {
                let a = self.eval_opt(c, left);
                let b = self.eval_opt(c, right);
                if op == BinOp::Sub && !self.step_log.is_empty() {
                    self.difference_with_itself(c, (left, &a), (right, &b));
                }
                self.operand_read_again(c, left);
                self.binary(op, &a, &b, c.span(e))
            }
            Expr::Unary { operand } => {
                let a = self.eval_opt(c, operand);
                if a.iter().any(|v| self.maybe_tensor(*v)) {
                    let t = self.apply_op("neg", OpLabel::Static("-"), &[a], c.span(e), false);
                    smallvec![t]
                } else {
                    smallvec![OTHER]
                }
            }
            Expr::Not(x) => {
                let v = self.eval_opt(c, x);
                match self.truth(&v) {
                    Some(true) => smallvec![FALSE],
                    Some(false) => smallvec![TRUE],
                    None => smallvec![OTHER],
                }
            }
            Expr::Bool { and, left, right } => {
                let raised = self.raised_in;
                let a = self.eval_opt(c, left);
                // (A write that raises on the left may not run: the right side may run alone.)
                self.raised_in = raised;
                let b = self.eval_opt(c, right);
                self.raised_in = raised;
                bool_op(and, a, b)
            }
            Expr::Compare { operands, op } => self.eval_comparison(c, e, operands, op),
            Expr::Seq { items, kind } => self.eval_seq(c, items, kind),
            Expr::Starred(inner) => {
                self.eval_opt(c, inner);
                smallvec![self.alloc(Obj::Unknown)]
            }
            Expr::Dict { keys, values } => self.eval_dict(c, e, keys, values),
            Expr::Comp {
                elt,
                value,
                gens,
                kind,
            } => {
                let out = self.eval_comprehension(c, elt, value, gens);
                if matches!(kind, CompKind::List | CompKind::Dict) {
                    self.lists.extend(out.iter().copied());
                }
                out
            }
            Expr::Lambda(f) => smallvec![self.new_func(DefLoc {
                item: c.item,
                func: f
            })],
            Expr::IfExp { body, test, orelse } => self.eval_if_exp(c, body, test, orelse),
            Expr::Named { target, value } => {
                let v = self.eval_opt(c, value);
                self.bind_name(c, target, None, v.clone(), None);
                v
            }
            Expr::Await(x) => match x.get() {
                Some(x) => self.eval(c, x),
                None => smallvec![UNKNOWN],
            },
            Expr::Yield(x) => {
                let yielded = match x.get().map(|x| (x, c.expr(x))) {
                    Some((_, &Expr::Starred(inner))) => {
                        let from = self.eval_opt(c, inner);
                        self.elements(&from)
                    }
                    Some((x, _)) => self.eval(c, x),
                    None => smallvec![NONE],
                };
                if let Some(frame) = self.frames.last_mut() {
                    for v in &yielded {
                        if !frame.yields.contains(v) && frame.yields.len() < MAX_VALUES {
                            frame.yields.push(*v);
                        }
                    }
                }
                // (What the consumer sends in.)
                smallvec![UNKNOWN]
            }
            Expr::True => smallvec![TRUE],
            Expr::False => smallvec![FALSE],
            Expr::None => smallvec![NONE],
            Expr::Str(n) => smallvec![self.string(n)],
            Expr::StrPattern { pattern, parts } => self.eval_fstring(c, pattern, parts),
            Expr::Int(n) => smallvec![self.int(n)],
            // A float literal zero (`0.0`, `0.`, `0e0`): the one float whose value the model
            // keeps (a dropout rate left at its default `p=0.0` makes `inplace=True` a no-op;
            // `if p > 0:` and `if p:` are false).
            Expr::Float if self.float_literal_is_zero(c, e) => smallvec![FLOAT_ZERO],
            Expr::Float | Expr::OtherStr | Expr::Ellipsis | Expr::Slice { .. } => smallvec![OTHER],
            Expr::Other(list) => {
                for x in c.body.exprs_of(list) {
                    self.eval(c, x);
                }
                smallvec![self.alloc(Obj::Unknown)]
            }
        }
    }

    /// Whether path `p` names a torch callable: a class (`torch.nn.ReLU`), a function of
    /// `torch.nn.functional`, or an op of the measured table (`torch.sigmoid`).
    fn callable_path(&self, p: Name) -> bool {
        let path = self.name(p);
        let last = path.rsplit('.').next().unwrap_or(path);
        last.starts_with(|ch: char| ch.is_ascii_uppercase())
            || path.starts_with("torch.nn.functional.")
            || (path.starts_with("torch.") && crate::ops::table().op(last).is_some())
    }

    /// The truth value of `vals` when every value has the same known one: `True`/`False`,
    /// `None`; functions, classes, optimizers and layers other than containers are true, and so
    /// are instances of the file's classes that define neither `__len__` nor `__bool__` and
    /// derive from nothing but `nn.Module` (`if self.act:` with `self.act =
    /// nn.ReLU(inplace=True) if act else None`).
    pub(super) fn truth(&self, vals: &Vals) -> Option<bool> {
        let one = |v: ObjId| -> Option<bool> {
            match v {
                TRUE => return Some(true),
                FALSE | NONE => return Some(false),
                _ => {}
            }
            match self.obj(v) {
                Obj::Func(_) | Obj::Class(_) | Obj::Bound(..) | Obj::Optimizer { .. } => Some(true),
                Obj::Partial { .. } | Obj::Record(_) => Some(true),
                // (A container layer's truth is its length, which appends in loops that may
                // run zero times leave unknown.)
                Obj::Module(m) => match &m.local {
                    None => super::module::Container::of(self.name(m.class))
                        .is_none()
                        .then_some(true),
                    Some(k) => {
                        let sized = self.find_method(k, known::LEN).is_some()
                            || self.find_method(k, known::BOOL).is_some()
                            || self.derives_from(
                                k,
                                &|p| !(p.ends_with(".Module") || p == "object"),
                                0,
                            );
                        (!sized).then_some(true)
                    }
                },
                _ => None,
            }
        };
        let mut out = None;
        for v in vals {
            let t = one(*v)?;
            if out.is_some_and(|o| o != t) {
                return None;
            }
            out = Some(t);
        }
        out
    }

    /// `x is None` / `x is not None` on values we know; other comparisons are unknown.
    fn eval_comparison(&mut self, c: Code<'_>, e: ExprId, operands: List, op: CmpOp) -> Vals {
        let is = match op {
            CmpOp::Is => Some(true),
            CmpOp::IsNot => Some(false),
            _ => None,
        };
        let exprs: SmallVec<[ExprId; 2]> = c.body.exprs_of(operands).collect();
        let parts: SmallVec<[Vals; 2]> = (exprs.iter())
            .map(|p| self.eval_metadata(c, *p, is.is_some()))
            .collect();
        if let ([a, b], Some(is)) = (parts.as_slice(), is) {
            if b.as_slice() == [NONE] && !a.is_empty() {
                // (Every modelled object is not `None`: tensors, modules, containers (a state
                // list passed back in: `if state is None: state = [zeros, zeros]`), strings,
                // callables; booleans and known integers neither. `OTHER` may be: it stands for
                // an argument whose default is `None` too.)
                // (`getattr(torch.nn.functional, name, None)` gives the path and `None`; a path
                // is not `None` when it names a callable: `torch.version.cuda` may be.)
                let known = |v: &ObjId| match self.obj(*v) {
                    Obj::Unknown | Obj::Other => {
                        matches!(*v, TRUE | FALSE) || self.int_values.contains_key(v)
                    }
                    Obj::Path(p) => self.callable_path(*p),
                    _ => true,
                };
                let is_none = if a.iter().all(|v| *v == NONE) {
                    Some(true)
                } else if a.iter().all(known) {
                    Some(false)
                } else {
                    None
                };
                if let Some(n) = is_none {
                    let truth = if is { n } else { !n };
                    return smallvec![if truth { TRUE } else { FALSE }];
                }
            }
        }
        if let Some(truth) = self.same_object(op, &parts) {
            return smallvec![if truth { TRUE } else { FALSE }];
        }
        if let [a, b] = parts.as_slice() {
            if let Some(truth) = self.compare_strings(op, a, b) {
                return smallvec![if truth { TRUE } else { FALSE }];
            }
        }
        // `i == 0` with `i` a loop position (`for i, block in enumerate(self.blocks)`), or any
        // two known integers (`self.depth == 1`, `n < 0`). (Not an ordering of a sampled
        // position: a loop over a container built from a generator runs its one summary slot,
        // whose position is not the last: `F.relu(layer(x)) if i < self.num_layers - 1 else
        // layer(x)` would take the first arm only. A `range` loop run turn by turn binds each
        // true position.)
        if let [a, b] = parts.as_slice() {
            if let (Some(x), Some(y)) = (self.one_int(a), self.one_int(b)) {
                // (Nor of an attribute: a counter a method moves, `if self.epoch > 4:`, is
                // known only as `__init__` set it; inside `__init__` itself it is what was
                // just set, `if self.num_convs > 1:` choosing the layers to build.)
                let attribute = (exprs.iter()).any(|x| matches!(*c.expr(*x), Expr::Attr { .. }));
                let position = (a.iter().chain(b))
                    .any(|v| self.positions.contains(v) && !self.every_position.contains(v))
                    || (attribute && !self.in_init());
                let truth = match op {
                    CmpOp::Eq => Some(x == y),
                    CmpOp::NotEq => Some(x != y),
                    CmpOp::Lt if !position => Some(x < y),
                    CmpOp::LtE if !position => Some(x <= y),
                    CmpOp::Gt if !position => Some(x > y),
                    CmpOp::GtE if !position => Some(x >= y),
                    _ => None,
                };
                if let Some(truth) = truth {
                    return smallvec![if truth { TRUE } else { FALSE }];
                }
            }
        }
        // `v == 'M'` with `v` a known integer (`for v in [64, 'M', 128]`, VGG's config): an
        // integer never equals a string.
        if let ([a, b], CmpOp::Eq | CmpOp::NotEq) = (parts.as_slice(), op) {
            let int_vs_str = |x: &Vals, y: &Vals| {
                self.one_int(x).is_some()
                    && !y.is_empty()
                    && y.iter().all(|v| self.exact_str(*v).is_some())
            };
            if int_vs_str(a, b) || int_vs_str(b, a) {
                return smallvec![if op == CmpOp::NotEq { TRUE } else { FALSE }];
            }
        }
        // `x > 0`, `labels == -100` of a tensor: a new boolean tensor (a mask), without history.
        let tensor = |v: &ObjId| self.tensor(*v).is_some_and(|t| t.known);
        if !matches!(op, CmpOp::Is | CmpOp::IsNot | CmpOp::In | CmpOp::NotIn)
            && parts.iter().flatten().any(tensor)
        {
            let mask = self.derive(&[], c.span(e), Default::default(), None, true);
            return smallvec![mask];
        }
        smallvec![OTHER]
    }

    /// `query is key` of the one object, or `q.data_ptr() == k.data_ptr() == v.data_ptr()` of
    /// tensors of one storage (fairseq's self-attention test, given the same tensor three
    /// times): true for `is` and `==`, false for `is not` and `!=`. Anything else is not decided
    /// (two names of distinct objects may still be one at run time), nor is a value that stands
    /// for several (a comprehension's element).
    fn same_object(&self, op: CmpOp, parts: &[Vals]) -> Option<bool> {
        if parts.len() < 2 || parts.iter().any(|p| p.len() != 1) {
            return None;
        }
        if parts.iter().any(|p| self.summaries.objs.contains(&p[0])) {
            return None;
        }
        let first = parts[0][0];
        let same = match op {
            CmpOp::Is | CmpOp::IsNot => {
                !matches!(self.obj(first), Obj::Other | Obj::Unknown)
                    && parts.iter().all(|p| p[0] == first)
            }
            CmpOp::Eq | CmpOp::NotEq => {
                let storage = *self.data_ptrs.get(&first)?;
                (parts.iter()).all(|p| self.data_ptrs.get(&p[0]) == Some(&storage))
            }
            _ => return None,
        };
        match (same, op) {
            (true, CmpOp::Is | CmpOp::Eq) => Some(true),
            (true, _) => Some(false),
            (false, _) => None,
        }
    }

    /// Whether `test` is `isinstance(x, list)` (or `tuple`, `dict`, `set`, or a tuple of those)
    /// and `value` is that same name `x`.
    fn is_container_test(&self, c: Code<'_>, test: ExprId, value: ExprId) -> bool {
        let (Some(test), Some(value)) = (test.get(), value.get()) else {
            return false;
        };
        let Expr::Call { func, args } = *c.expr(test) else {
            return false;
        };
        if !self.is_name(c, func, "isinstance") {
            return false;
        }
        let a = &c.body.args[args as usize];
        let positional: Vec<ExprId> = c.body.exprs_of(a.positional).collect();
        let [x, class] = positional[..] else {
            return false;
        };
        let same = match (*c.expr(x), *c.expr(value)) {
            (Expr::Name { name: a, .. }, Expr::Name { name: b, .. }) => a == b,
            _ => false,
        };
        let container = |e: ExprId| {
            ["list", "tuple", "dict", "set"]
                .iter()
                .any(|k| self.is_name(c, e, k))
        };
        let classes_ok = match *c.expr(class) {
            Expr::Seq { items, .. } => c.body.exprs_of(items).all(container),
            _ => container(class),
        };
        same && classes_ok
    }

    /// `a == "relu"`, `a != "relu"`, `a in ("relu", "gelu")` between string values known on
    /// every path; `None` when any side is not such a string.
    /// Whether a class's `__init__` is running (itself, or a method it calls: mmdet's
    /// `_init_layers`).
    fn in_init(&mut self) -> bool {
        (self.inlining.clone().into_iter().rev())
            .any(|def| (self.resolve_def(def)).is_some_and(|(b, f)| b.func(f).name == known::INIT))
    }

    fn compare_strings(&self, op: CmpOp, a: &Vals, b: &Vals) -> Option<bool> {
        let strs = |vals: &Vals| -> Option<SmallVec<[Name; 2]>> {
            vals.iter().map(|v| self.exact_str(*v)).collect()
        };
        let left = strs(a).filter(|l| !l.is_empty())?;
        let decide = |f: &dyn Fn(Name) -> bool| {
            let all = left.iter().all(|l| f(*l));
            let none = left.iter().all(|l| !f(*l));
            all.then_some(true).or(none.then_some(false))
        };
        match op {
            CmpOp::Eq | CmpOp::NotEq => {
                let right = strs(b).filter(|r| r.len() == 1)?[0];
                decide(&|l| l == right).map(|t| t == (op == CmpOp::Eq))
            }
            // `"bias" in name`: a substring of a known string.
            CmpOp::In | CmpOp::NotIn if strs(b).is_some_and(|r| r.len() == 1) => {
                let right = self.name(strs(b)?[0]);
                decide(&|l| right.contains(self.name(l))).map(|t| t == (op == CmpOp::In))
            }
            CmpOp::In | CmpOp::NotIn => {
                let [seq] = b.as_slice() else { return None };
                let Obj::Seq(items) = self.obj(*seq) else {
                    return None;
                };
                let mut members = SmallVec::<[Name; 4]>::new();
                for slot in items {
                    members.extend(strs(slot).filter(|s| s.len() == 1)?);
                }
                decide(&|l| members.contains(&l)).map(|t| t == (op == CmpOp::In))
            }
            _ => None,
        }
    }

    /// A dict of these entries; its keys are remembered when some are known strings.
    pub(super) fn keyed_dict(&mut self, entries: Vec<(Option<(Name, Span)>, Vals)>) -> ObjId {
        let keys: Vec<Option<(Name, Span)>> = entries.iter().map(|(k, _)| *k).collect();
        let d = self.alloc(Obj::Seq(entries.into_iter().map(|(_, v)| v).collect()));
        self.dict_objs.insert(d);
        if keys.iter().any(Option::is_some) {
            self.dict_keys.insert(d, keys);
        }
        d
    }

    /// The entries of the one dict in `vals` when every key of it is a known string.
    /// (An empty dict has none: `params.update(kwargs)` of a `**kwargs` no call filled.)
    pub(super) fn keyed_entries(&self, vals: &Vals) -> Option<Vec<(Name, Vals, Span)>> {
        let [d] = vals.as_slice() else { return None };
        let Some(keys) = self.dict_keys.get(d) else {
            let empty = matches!(self.obj(*d), Obj::Seq(items) if items.is_empty());
            return (empty && self.dict_objs.contains(d)).then(Vec::new);
        };
        let Obj::Seq(slots) = self.obj(*d) else {
            return None;
        };
        keys.iter()
            .zip(slots)
            .map(|(k, v)| k.map(|(k, at)| (k, v.clone(), at)))
            .collect()
    }

    /// Where `key` sits in dict `d` whose keys are known, and whether it is there: `None` when
    /// `d` is no such dict.
    pub(super) fn key_slot(&self, d: ObjId, key: Name) -> Option<Option<usize>> {
        let keys = self.dict_keys.get(&d)?;
        Some(keys.iter().position(|k| k.is_some_and(|(n, _)| n == key)))
    }

    /// The object of an integer constant (one per value; a plain value whose value is known).
    /// Unlike a loop position it does not pin down an element of a list built by a loop or a
    /// comprehension (`xs[i]` with `i = 1` stands for any element).
    fn float_literal_is_zero(&self, c: Code<'_>, e: ExprId) -> bool {
        (self.prog.text_of(c.span(e)).replace('_', ""))
            .parse::<f64>()
            .is_ok_and(|x| x == 0.0)
    }

    pub(super) fn int(&mut self, n: i64) -> ObjId {
        if let Some(o) = self.ints.get(&n) {
            return *o;
        }
        let o = self.alloc(Obj::Other);
        self.ints.insert(n, o);
        self.int_values.insert(o, n);
        o
    }

    /// The integer, when `vals` is one known integer on every path.
    pub(super) fn one_int(&self, vals: &Vals) -> Option<i64> {
        match vals.as_slice() {
            [one] => self.int_values.get(one).copied(),
            _ => None,
        }
    }

    /// An f-string: each hole filled with its value's text where that is one known integer or
    /// string (`f"bias_hh_l{i}"` with `i = 0` names `bias_hh_l0`), else left a hole.
    fn eval_fstring(&mut self, c: Code<'_>, pattern: Name, parts: List) -> Vals {
        let values: Vec<Option<String>> = c
            .body
            .list(parts)
            .iter()
            .map(|p| {
                let v = self.eval_opt(c, ExprId(*p));
                if let Some(n) = self.one_int(&v) {
                    return Some(if v[0] == FLOAT_ZERO {
                        "0.0".into()
                    } else {
                        n.to_string()
                    });
                }
                self.one_exact_str(&v).map(|s| self.name(s).to_string())
            })
            .collect();
        let mut values = values.into_iter();
        let mut text = String::new();
        for ch in self.name(pattern).to_string().chars() {
            match (ch == STR_HOLE).then(|| values.next().flatten()) {
                Some(Some(v)) => text.push_str(&v),
                _ => text.push(ch),
            }
        }
        let name = self.intern(&text);
        smallvec![self.string(name)]
    }

    /// The one object of a string value in this unit.
    pub(super) fn string(&mut self, n: Name) -> ObjId {
        if let Some(o) = self.strings.get(&n) {
            return *o;
        }
        let o = self.alloc(Obj::Str(n));
        self.strings.insert(n, o);
        o
    }

    /// A string value without holes.
    pub(super) fn exact_str(&self, o: ObjId) -> Option<Name> {
        match self.obj(o) {
            Obj::Str(n) if !self.name(*n).contains(STR_HOLE) => Some(*n),
            _ => None,
        }
    }

    /// The string, when `vals` is that one string on every path.
    pub(super) fn one_exact_str(&self, vals: &Vals) -> Option<Name> {
        match vals.as_slice() {
            [one] => self.exact_str(*one),
            _ => None,
        }
    }

    /// The string values of `vals`, holes kept (`None` when one may be anything else).
    pub(super) fn str_values(&self, vals: &Vals) -> Option<SmallVec<[Name; 2]>> {
        let names: SmallVec<[Name; 2]> = vals
            .iter()
            .map(|v| match self.obj(*v) {
                Obj::Str(n) => Some(*n),
                _ => None,
            })
            .collect::<Option<_>>()?;
        (!names.is_empty()).then_some(names)
    }

    /// `"layer%d" % i`, `"layer" + str(i)`, `"layer{}".format(i)`: the string with its unknown
    /// parts as holes, when the left side is a string (`None` otherwise).
    pub(super) fn string_op(&mut self, op: BinOp, a: &Vals, b: &Vals) -> Option<Vals> {
        let [left] = a.as_slice() else { return None };
        let Obj::Str(l) = *self.obj(*left) else {
            return None;
        };
        let text = self.name(l).to_string();
        let joined = match op {
            // (`"layer%d" % i`, `"%s_%d" % (name, i)`: each known value in its place.)
            BinOp::Mod => {
                let tuple = match b.as_slice() {
                    [r] if !self.dict_objs.contains(r) => match self.obj(*r) {
                        Obj::Seq(items) => Some(items.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                let values: Vec<Option<String>> = match tuple {
                    Some(items) => items.iter().map(|v| self.text_of(v)).collect(),
                    None => vec![self.text_of(b)],
                };
                with_values(&text, Placeholders::Percent, &values)
            }
            BinOp::Add => {
                let right = match b.as_slice() {
                    [r] => match self.obj(*r) {
                        Obj::Str(r) => self.name(*r).to_string(),
                        _ => STR_HOLE.to_string(),
                    },
                    _ => STR_HOLE.to_string(),
                };
                text + &right
            }
            _ => return None,
        };
        let n = self.intern(&joined);
        Some(smallvec![self.string(n)])
    }

    /// The text `str(v)` gives of one known integer or string (a string with holes is none).
    pub(super) fn text_of(&self, v: &Vals) -> Option<String> {
        if let Some(n) = self.one_int(v) {
            return Some(n.to_string());
        }
        let s = self.name(self.one_exact_str(v)?);
        (!s.contains(STR_HOLE)).then(|| s.to_string())
    }

    /// `"layer{}".format(i)`, `name.lower()`: string methods whose result is a string again.
    pub(super) fn str_method(&mut self, n: Name, meth: Name, args: &Args) -> Vals {
        let text = self.name(n);
        if matches!(self.name(meth), "split" | "rsplit") && !text.contains(STR_HOLE) {
            return self.str_split(n, meth, args);
        }
        if matches!(self.name(meth), "startswith" | "endswith") {
            return self.str_affix(n, meth, args);
        }
        let out = match self.name(meth) {
            "format" => {
                let text = text.to_string();
                let values: Vec<Option<String>> = (args.positional.iter())
                    .map(|(v, _)| self.text_of(v))
                    .collect();
                with_values(&text, Placeholders::Braces, &values)
            }
            "lower" | "casefold" => text.to_lowercase(),
            "upper" => text.to_uppercase(),
            "strip" => text.trim().to_string(),
            _ => return smallvec![OTHER],
        };
        let out = self.intern(&out);
        smallvec![self.string(out)]
    }

    /// `name.startswith("fc")`, `name.endswith(("bias", "bn"))` of a known string with known
    /// affixes (one or a tuple of them): `True` or `False`; else not known.
    fn str_affix(&mut self, n: Name, meth: Name, args: &Args) -> Vals {
        let text = self.name(n);
        let affixes: Option<Vec<Name>> = match args.positional.as_slice() {
            [(v, _)] if !text.contains(STR_HOLE) => match v.as_slice() {
                [one] => match self.obj(*one) {
                    Obj::Seq(items) => items.iter().map(|i| self.one_exact_str(i)).collect(),
                    _ => self.exact_str(*one).map(|a| vec![a]),
                },
                _ => None,
            },
            _ => None,
        };
        let Some(affixes) = affixes else {
            return smallvec![OTHER];
        };
        let starts = self.name(meth) == "startswith";
        let hit = affixes.iter().any(|a| {
            let a = self.name(*a);
            if starts {
                text.starts_with(a)
            } else {
                text.ends_with(a)
            }
        });
        smallvec![if hit { TRUE } else { FALSE }]
    }

    /// `name.split(".")`, `name.rsplit(".", 1)` of a known string (a dotted module path): the
    /// parts, each a known string, in an exact list; not decided for a separator or count that
    /// is not known.
    fn str_split(&mut self, n: Name, meth: Name, args: &Args) -> Vals {
        let sep_vals = args.positional.first().map(|(v, _)| v.clone()).or_else(|| {
            let kw = self.intern("sep");
            args.keyword(kw).map(|(v, ..)| v.clone())
        });
        let sep = match sep_vals.as_deref() {
            None | Some([NONE]) => None,
            Some(v) => match self.one_exact_str(&v.into()) {
                Some(s) if !self.name(s).is_empty() => Some(self.name(s).to_string()),
                _ => return smallvec![self.alloc(Obj::Unknown)],
            },
        };
        let count_vals = args.positional.get(1).map(|(v, _)| v.clone()).or_else(|| {
            let kw = self.intern("maxsplit");
            args.keyword(kw).map(|(v, ..)| v.clone())
        });
        let max = match count_vals {
            None => -1,
            Some(v) => match self.one_int(&v) {
                Some(k) => k,
                None => return smallvec![self.alloc(Obj::Unknown)],
            },
        };
        let text = self.name(n).to_string();
        let rsplit = self.name(meth) == "rsplit";
        let parts: Vec<String> = match (sep.as_deref(), max < 0) {
            (Some(sep), true) => text.split(sep).map(str::to_string).collect(),
            (Some(sep), false) if rsplit => {
                let mut p: Vec<String> = text
                    .rsplitn(max as usize + 1, sep)
                    .map(str::to_string)
                    .collect();
                p.reverse();
                p
            }
            (Some(sep), false) => text
                .splitn(max as usize + 1, sep)
                .map(str::to_string)
                .collect(),
            (None, true) => text.split_whitespace().map(str::to_string).collect(),
            (None, false) => return smallvec![self.alloc(Obj::Unknown)],
        };
        let slots: Vec<Vals> = parts
            .iter()
            .map(|p| {
                let name = self.intern(p);
                smallvec![self.string(name)]
            })
            .collect();
        let seq = self.alloc(Obj::Seq(slots));
        self.exact_seqs.insert(seq);
        smallvec![seq]
    }

    /// `w - w0` (or `torch.equal(w, w0)`) where both sides are the parameters the last optimizer step wrote, read
    /// through two different expressions (`w0` from `w0 = list(model.parameters())`, `before
    /// = model.weight`): the code meant one side as the weights before the step, but it is the
    /// parameter itself, so the difference is zero after every step (FedProx's proximal term,
    /// a drift measure). A stale read of the side read through a plain name (IP402).
    pub(super) fn difference_with_itself(
        &mut self,
        c: Code<'_>,
        (left, a): (ExprId, &Vals),
        (right, b): (ExprId, &Vals),
    ) {
        let Some((written, wid, now)) = self.step_log.last() else {
            return;
        };
        let (wid, now) = (*wid, *now);
        let written: SmallVec<[ObjId; 8]> = written
            .iter()
            .filter_map(|w| Some(self.tensor(*w)?.storage))
            .collect();
        // (By memory: a loop over `zip(model.parameters(), w0)` reads each parameter on both
        // sides as an element stand-in of its own, `w.data` as an alias. Not a `.detach()` or
        // `.data` alias made before the step: a snapshot the step marks stale itself.)
        let storages = |vs: &Vals| -> Option<SmallVec<[ObjId; 4]>> {
            let mut out = SmallVec::new();
            for v in vs {
                let t = self.tensor(*v)?;
                if t.detached_from.is_some() && *v < now || !written.contains(&t.storage) {
                    return None;
                }
                if !out.contains(&t.storage) {
                    out.push(t.storage);
                }
            }
            out.sort_unstable();
            Some(out)
        };
        let (Some(p), Some(q)) = (storages(a), storages(b)) else {
            return;
        };
        if p.is_empty() || p.len() > 8 || p != q {
            return;
        }
        // (Not the same expression, nor one and its `.detach()` or `.data`: `p - p.detach()` is
        // zero on purpose, a straight-through estimator.)
        let plain = |e: ExprId| {
            let t = self.prog.text_of(c.span(e));
            t.strip_suffix(".detach()")
                .or_else(|| t.strip_suffix(".data"))
                .unwrap_or(t)
        };
        if plain(left) == plain(right) {
            return;
        }
        // (Several parameters on each side only as a pair one loop binds, `for w, s in
        // zip(...)`; never two loops' elements, `p - q` of two loops over the same list, the
        // pairwise distances.)
        match one_loop_binds(c, left, right) {
            Some(false) => return,
            None if p.len() > 1 => return,
            _ => {}
        }
        // (The side read through a name: `w_t`, `w_t.data`, `w.detach()`.)
        let root = |e: ExprId| read_root(c, e);
        // (A plain name over an attribute's root, `before` of `torch.equal(before,
        // model.weight)`; of two names, the one bound first, `before` of `(before, after)`.)
        let plain_name = |e: ExprId| match *c.expr(e) {
            Expr::Name { name, .. } => Some((name, c.span(e))),
            _ => None,
        };
        let bound = |n: Name| {
            let b = self.state.bound_at.get(&n)?;
            Some(self.prog.range(b.stmt)?.start)
        };
        let named = match (plain_name(left), plain_name(right)) {
            (Some(l), Some(r)) => match (bound(l.0), bound(r.0)) {
                (Some(a), Some(b)) if a < b => Some(l),
                _ => Some(r),
            },
            (l, r) => r.or(l),
        };
        let Some((name, read)) = named.or_else(|| root(right)).or_else(|| root(left)) else {
            return;
        };
        // Where the "snapshot" was made: a list of the parameters made before the step that a
        // name of the scope keeps (`w0 = list(model.parameters())`), unless the name read is
        // bound to something else (`before = model.weight`).
        let alias = (self.state.bound_at.get(&name))
            .and_then(|b| b.alias_of)
            .map(|at| self.prog.text_of(at));
        let snapshot = (self.state.env.iter())
            .filter(|(n, _)| {
                alias.is_none_or(|t| {
                    let n = self.name(**n);
                    t.strip_prefix(n)
                        .is_some_and(|r| r.is_empty() || r.starts_with('['))
                })
            })
            .flat_map(|(_, vs)| vs.iter())
            .filter(|v| **v < now)
            .find_map(|v| {
                let at = self.param_lists.get(v)?;
                let Obj::Seq(items) = self.obj(*v) else {
                    return None;
                };
                let held = |x: &ObjId| {
                    (items.iter().flatten())
                        .any(|s| self.tensor(*s).is_some_and(|t| t.storage == *x))
                };
                p.iter().all(held).then_some(*at)
            });
        let Some(made) = snapshot else {
            return self.report_stale_read(name, &[wid], read, None);
        };
        self.report(Event::StaleRead {
            write: wid,
            name,
            read,
            bindings: self
                .state
                .bound_at
                .get(&name)
                .copied()
                .into_iter()
                .collect(),
            next_call: None,
            view: None,
            view_copyable: false,
            nested: false,
            snapshot: Some(made),
            shared: None,
        });
    }

    /// A list or tuple display: one slot per item (a `*xs` item: a slot for any of its
    /// elements, and the sequence is no longer exact).
    fn eval_seq(&mut self, c: Code<'_>, items: List, kind: crate::ir::SeqKind) -> Vals {
        let mut slots = Vec::new();
        let mut exact = true;
        let mut star = None;
        for i in c.body.exprs_of(items) {
            if let Expr::Starred(inner) = *c.expr(i) {
                let v = self.eval_opt(c, inner);
                // (One star: its slot stands for however many elements it spreads.)
                star = if exact { Some(slots.len()) } else { None };
                slots.push(self.elements(&v));
                exact = false;
            } else {
                slots.push(self.eval(c, i));
            }
        }
        // (`torch.cat([x, self.block(x)], 1)`: the list holds the tensor `x` names, which the
        // call in the later item wrote in place.)
        for i in c.body.exprs_of(items) {
            self.operand_read_again(c, i);
        }
        let seq = self.alloc(Obj::Seq(slots));
        if let Some(at) = star {
            self.starred_slots.insert(seq, at);
        }
        match kind {
            crate::ir::SeqKind::Tuple => self.tuples.insert(seq),
            crate::ir::SeqKind::List => self.lists.insert(seq),
            _ => false,
        };
        // (A set display may hold fewer: `{a, a}`.)
        if exact && kind != crate::ir::SeqKind::Set {
            self.exact_seqs.insert(seq);
        }
        smallvec![seq]
    }

    /// A dict display: its entries with their keys where they are known strings.
    fn eval_dict(&mut self, c: Code<'_>, e: ExprId, keys: List, values: List) -> Vals {
        let mut slots = Vec::new();
        let pairs: SmallVec<[(u32, u32); 8]> = c
            .body
            .list(keys)
            .iter()
            .copied()
            .zip(c.body.list(values).iter().copied())
            .collect();
        for (k, v) in pairs {
            let (k, v) = (ExprId(k), ExprId(v));
            match k.get() {
                Some(k) => {
                    let key = self.eval(c, k);
                    let key = self.one_exact_str(&key);
                    let at = v.get().map_or(c.span(e), |v| c.span(v));
                    slots.push((key.map(|k| (k, at)), self.eval_opt(c, v)));
                }
                None => {
                    // `**other`: its entries, when its keys are known.
                    let other = self.eval_opt(c, v);
                    match self.keyed_entries(&other) {
                        Some(entries) => {
                            slots.extend(entries.into_iter().map(|(k, v, at)| (Some((k, at)), v)))
                        }
                        None => slots.push((None, smallvec![self.alloc(Obj::Unknown)])),
                    }
                }
            }
        }
        smallvec![self.keyed_dict(slots)]
    }

    /// `body if test else orelse`.
    fn eval_if_exp(&mut self, c: Code<'_>, body: ExprId, test: ExprId, orelse: ExprId) -> Vals {
        // A test known to be true or false takes one arm only (`nn.Sigmoid() if i == 1
        // else nn.Identity()` in a loop run once per `i`).
        if let Some(t) = test.get() {
            let v = self.eval(c, t);
            match self.truth(&v) {
                Some(true) => return self.eval_opt(c, body),
                Some(false) => return self.eval_opt(c, orelse),
                None => {}
            }
        }
        let raised = self.raised_in;
        let stale = self.stmt_stale.len();
        // (What a call in one arm made stale, `Swish()(x) if act else x * sigmoid(x)`, is not so
        // in the other; after the expression it may be.)
        let stale_before = self.state.stale.clone();
        let mut out = self.eval_opt(c, body);
        let body_stale = std::mem::replace(&mut self.state.stale, stale_before);
        // (What an in-place call in one arm made stale for the statement is not so in the
        // other, `relu_(z) if act else z`, but is again after the expression.)
        let arm: SmallVec<[_; 1]> = self.stmt_stale[stale..].iter().copied().collect();
        self.expire_stmt_stale(stale);
        // `xs if isinstance(xs, list) else [xs]`: the first branch is not a tensor.
        if self.is_container_test(c, test, body) {
            out.retain(|o| !matches!(self.obj(*o), Obj::Tensor(_) | Obj::Module(_)));
        }
        // (A write that raises in one arm does not stop the other.)
        self.raised_in = raised;
        out.extend(self.eval_opt(c, orelse));
        self.raised_in = raised;
        for (name, writes) in body_stale {
            let entry = self.state.stale.entry(name).or_default();
            for w in writes {
                super::write::note_write(entry, w);
            }
        }
        self.mark_stmt_stale(&arm);
        out
    }

    fn eval_comprehension(&mut self, c: Code<'_>, elt: ExprId, value: ExprId, gens: List) -> Vals {
        self.steps += 1 + self.state.env.len() as u64 / 16;
        let saved_env = self.state.env.clone();
        let mut first_iter = None;
        if let Some(d) = self.unrolled_dict_comprehension(c, (elt, value), gens, &mut first_iter) {
            self.state.env = saved_env;
            return smallvec![d];
        }
        if let Some((slots, exact)) =
            self.unrolled_comprehension(c, elt, value, gens, &mut first_iter)
        {
            self.state.env = saved_env;
            if !exact {
                self.summaries.objs.extend(slots.iter().flatten().copied());
            }
            let seq = self.alloc(Obj::Seq(slots));
            if exact {
                self.exact_seqs.insert(seq);
            }
            return smallvec![seq];
        }
        for g in c.body.list(gens) {
            let g = c.body.generators[*g as usize];
            // (The first iterable is evaluated once, by the unrolling attempt when it made one.)
            let iter = match first_iter.take() {
                Some(iter) => iter,
                None => {
                    let iter = self.eval_opt(c, g.iter);
                    self.iterated(iter, g.iter.get().map(|e| c.span(e)))
                }
            };
            let mut elems = self.elements(&iter);
            // `[m for m in model if isinstance(m, nn.Linear)]`: the elements whose conditions
            // are decided false are dropped (each bound on its own to decide).
            if g.ifs.len > 0 && !g.target.is_none() && !elems.is_empty() && elems.len() <= 16 {
                let conds: SmallVec<[ExprId; 2]> = c.body.exprs_of(g.ifs).collect();
                let mut kept = Vals::new();
                for el in elems.clone() {
                    self.bind_target(c, g.target, smallvec![el], None);
                    let dropped = conds
                        .iter()
                        .any(|cond| self.eval(c, *cond).as_slice() == [FALSE]);
                    if !dropped {
                        kept.push(el);
                    }
                }
                elems = kept;
            }
            if !g.target.is_none() {
                self.bind_target(c, g.target, elems, None);
            }
            for cond in c.body.exprs_of(g.ifs) {
                self.eval(c, cond);
            }
        }
        // An element that reads by its position, over a range of known bounds, runs at its
        // first position, and again (below) at the next (`[step(emb(wave[t])) for t in
        // range(6)]`: the second call writes into the cache the first one's conv saved).
        // (Over a range whose bounds are not known, `range(h.shape[0])`, it runs again as a
        // loop's body does, reading by the same position: one of the positions it takes.)
        let mut bounds_unknown = false;
        let positions = match (c.body.list(gens), value.get()) {
            ([g], None) if self.reads_by_position(c, gens, elt.get()) => {
                let g = c.body.generators[*g as usize];
                let bounds = self.range_bounds(c, g.iter);
                bounds_unknown = bounds.is_none() && self.rows_by_position(c, g.target, elt);
                // (Not with a condition: the next position may be one it skips.)
                bounds
                    .filter(|_| g.ifs.len == 0)
                    .filter(|(lo, hi)| hi.saturating_sub(*lo) >= 2)
                    .map(|(lo, _)| (g.target, lo))
            }
            _ => None,
        };
        if let Some((target, lo)) = positions {
            let at = self.position(lo);
            self.bind_target(c, target, smallvec![at], None);
        }
        let before = self.heap.len() as ObjId;
        let result = match (elt.get(), value.get()) {
            (_, Some(v)) => self.eval(c, v),
            (Some(e), None) => self.eval(c, e),
            (None, None) => Vals::new(),
        };
        let mut slots = vec![result];
        // The element runs again, as a loop body does (it runs twice): a call in it can write
        // into what the call before it saved (`[attn(x, t) for t in range(n)]` filling a
        // cache). Only when the element made something (a call, an op), with one generator,
        // and not inside another comprehension's second run (nested ones would multiply). The
        // list keeps the first run's value as its one slot (an element read at a variable index
        // is that value, not a choice between two), except modules made afresh:
        // `nn.ModuleList([Block() for _ in range(n)])` holds as many blocks as a loop that
        // appends them (a block can write into what the one before it saved).
        let one_generator = gens.len == 1;
        let made = self.heap.len() as ObjId > before;
        let again_runs = value.is_none()
            && one_generator
            && made
            && !self.unrolling_comprehension
            && !self.exhausted()
            && (positions.is_some()
                || bounds_unknown
                || !self.reads_by_position(c, gens, elt.get()));
        if let (Some(e), true) = (elt.get(), again_runs) {
            if let Some((target, lo)) = positions {
                let at = self.position(lo + 1);
                self.bind_target(c, target, smallvec![at], None);
            }
            self.unrolling_comprehension = true;
            let again = self.eval(c, e);
            self.unrolling_comprehension = false;
            let fresh_modules = !slots[0].is_empty()
                && (slots[0].iter().chain(&again))
                    .all(|m| *m >= before && matches!(self.obj(*m), Obj::Module(_)));
            if fresh_modules {
                slots.push(again);
            }
        }
        self.state.env = saved_env;
        // (Each value of the slot stands for every element the comprehension makes: not one
        // object, for `is` and `data_ptr()`.)
        self.summaries.objs.extend(slots.iter().flatten().copied());
        let seq = self.alloc(Obj::Seq(slots));
        self.summaries.made_per_element.insert(seq, before);
        smallvec![seq]
    }

    /// Whether every subscript of `elt` by the comprehension's variable `target` (`h[i]`,
    /// `h[i].T`) takes a row of what may be a tensor, whose rows share one version counter (not
    /// of a name bound to a list, whose elements are tensors of their own).
    fn rows_by_position(&mut self, c: Code<'_>, target: ExprId, elt: ExprId) -> bool {
        let (Expr::Name { name: k, .. }, Some(e)) = (*c.expr(target), elt.get()) else {
            return false;
        };
        let within = c.body.expr_span(e);
        // (The subscripts' bases, found once per element: a scan of the item's expressions.)
        let key = c.span(e);
        let bases = match self.row_bases.get(&key) {
            Some(known) => known.clone(),
            None => {
                let mut found = SmallVec::<[Option<Name>; 2]>::new();
                for (x, sp) in c.body.exprs.iter().zip(&c.body.expr_spans) {
                    let Expr::Subscript { value, .. } = *x else {
                        continue;
                    };
                    if !within.contains(*sp) || !super::stmt::uses_position_within(c, *sp, k, None)
                    {
                        continue;
                    }
                    // (`h[i][0:2]`: the row of `h`; `self.h[i]`: an attribute, taken for a
                    // tensor.)
                    let mut base = value;
                    while let Expr::Subscript { value, .. } = *c.expr(base) {
                        base = value;
                    }
                    found.push(match *c.expr(base) {
                        Expr::Name { name, .. } => Some(name),
                        _ => None,
                    });
                }
                self.row_bases.insert(key, found.clone());
                found
            }
        };
        let listed = |name: &Name| {
            (self.state.env.get(name))
                .is_some_and(|vs| vs.iter().any(|v| matches!(self.obj(*v), Obj::Seq(_))))
        };
        !bases.is_empty() && !bases.iter().flatten().any(listed)
    }

    /// Whether a comprehension's element `elt` reads by the position its one generator binds
    /// (`bufs[t] for t in range(2)`): a loop would run once per position, each reading its own
    /// element; run again with every element bound at once, it would read the same one twice.
    /// (Decided once per element, as for loop bodies.)
    fn reads_by_position(&mut self, c: Code<'_>, gens: List, elt: Option<ExprId>) -> bool {
        let (Some(g), Some(e)) = (c.body.list(gens).first(), elt) else {
            return false;
        };
        let Expr::Name { name, .. } = *c.expr(c.body.generators[*g as usize].target) else {
            return false;
        };
        let key = c.span(e);
        if let Some(known) = self.position_bodies.get(&key) {
            return *known;
        }
        let range = self.intern("range");
        let found = super::stmt::uses_position_within(c, key.rel, name, Some(range));
        self.position_bodies.insert(key, found);
        found
    }

    /// `[opt_for(h) for h in self.heads]`, `[blk(x) for blk in self.blocks]`: a list
    /// comprehension with one generator and no condition over children a loop would run one by
    /// one ([`Self::unrollable`]) makes one slot per child, each evaluated with its own child,
    /// as the loop would (a later `zip` pairs them slot by slot).
    /// So does one over a range of a known count up to 16 (`[Block(c) for _ in range(3)]`):
    /// one slot per position, and the list's length is known (`range(len(outs))` then runs
    /// position by position). The flag says the slots are the elements one by one.
    /// `evaluated`: its iterable, when it was evaluated but not unrolled (a comprehension inside
    /// one being unrolled is not unrolled: its element would run up to 32 x 32 times).
    fn unrolled_comprehension(
        &mut self,
        c: Code<'_>,
        elt: ExprId,
        value: ExprId,
        gens: List,
        evaluated: &mut Option<Vals>,
    ) -> Option<(Vec<Vals>, bool)> {
        let ([g], Some(e), None) = (c.body.list(gens), elt.get(), value.get()) else {
            return None;
        };
        let g = c.body.generators[*g as usize];
        if g.target.is_none() || self.unrolling_comprehension {
            return None;
        }
        let filtered = g.ifs.len > 0;
        let counted = (self.range_bounds(c, g.iter))
            .filter(|(l, h)| !filtered && l < h && h.saturating_sub(*l) <= 16);
        // (The element's callee is judged with the variable bound to the first position.)
        // (Or an element that reads by the position, `[self.branches[i](x[i]) for i in
        // range(n)]`: one slot per branch, each its own tensor, as a loop appending them makes.)
        let builds = counted.is_some_and(|(lo, _)| {
            let at = self.position(lo);
            self.bind_target(c, g.target, smallvec![at], None);
            self.builds_module(c, e) || subscripts_by_position(c, g.target, e)
        });
        if let (Some((lo, hi)), true) = (counted, builds) {
            self.unrolling_comprehension = true;
            let mut slots = Vec::with_capacity((hi - lo) as usize);
            for k in lo..hi {
                let at = self.position(k);
                self.every_position.insert(at);
                self.bind_target(c, g.target, smallvec![at], None);
                slots.push(self.eval(c, e));
            }
            self.unrolling_comprehension = false;
            return Some((slots, true));
        }
        let iter = self.eval_opt(c, g.iter);
        let iter = self.iterated(iter, g.iter.get().map(|e| c.span(e)));
        let Some(mut children) = (self.unrollable(&iter))
            .or_else(|| self.known_ints(&iter))
            .or_else(|| {
                self.known_tensors(&iter)
                    .filter(|_| !self.calls_own_code(c, e))
            })
        else {
            *evaluated = Some(iter);
            return None;
        };
        // `[i for i, m in enumerate(self.features) if isinstance(m, nn.Conv2d)]`: the children
        // whose conditions are decided true, one slot each (any undecided: not unrolled).
        if filtered {
            let conds: SmallVec<[ExprId; 2]> = c.body.exprs_of(g.ifs).collect();
            let mut kept = Vec::with_capacity(children.len());
            for child in children {
                self.bind_target(c, g.target, smallvec![child], None);
                let mut keep = true;
                for cond in &conds {
                    match self.eval(c, *cond).as_slice() {
                        [TRUE] => {}
                        [FALSE] => keep = false,
                        _ => {
                            *evaluated = Some(iter);
                            return None;
                        }
                    }
                }
                if keep {
                    kept.push(child);
                }
            }
            children = kept;
        }
        self.unrolling_comprehension = true;
        let mut slots = Vec::with_capacity(children.len());
        for child in children {
            self.bind_target(c, g.target, smallvec![child], None);
            slots.push(self.eval(c, e));
        }
        self.unrolling_comprehension = false;
        // (As many slots as a module's children, as `len` of it counts them, or as a list's
        // elements one by one.)
        let exact = matches!(iter.as_slice(), [one] if matches!(self.obj(*one), Obj::Module(_)) || self.exact_seqs.contains(one));
        Some((slots, exact))
    }

    /// The elements of a list of known integers, one by one (`[int(x) for x in sizes]` over
    /// `[16, 8]`: as many slots as sizes, so `len(...)` of the result is known).
    fn known_ints(&self, iter: &Vals) -> Option<Vec<ObjId>> {
        let [one] = iter.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*one) else {
            return None;
        };
        let ints = self.exact_seqs.contains(one)
            && (1..=16).contains(&items.len())
            && (items.iter())
                .all(|i| matches!(i.as_slice(), [v] if self.int_values.contains_key(v)));
        ints.then(|| items.iter().map(|i| i[0]).collect())
    }

    /// The tensors of a list holding a few (and plain values: a loss left at `0`), one by one
    /// (`[torch.mean(x) for x in losses]` over `[loss_g, loss_d]`: each result keeps its own
    /// graph, and unpacking the result gives each name its own loss).
    fn known_tensors(&self, iter: &Vals) -> Option<Vec<ObjId>> {
        let [one] = iter.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*one) else {
            return None;
        };
        let tensor = |v: &ObjId| self.tensor(*v).is_some();
        let known = self.exact_seqs.contains(one)
            && (2..=8).contains(&items.len())
            && items.iter().any(|i| i.iter().any(tensor))
            && (items.iter()).all(
                |i| matches!(i.as_slice(), [v] if tensor(v) || *v == NONE || matches!(self.obj(*v), Obj::Other)),
            );
        known.then(|| items.iter().map(|i| i[0]).collect())
    }

    /// Whether expression `e` calls a function, class or module of the program (a name or an
    /// attribute bound to one): run once per element, it would be inlined once per element.
    fn calls_own_code(&self, c: Code<'_>, e: ExprId) -> bool {
        let within = c.body.expr_span(e);
        let own = |v: &ObjId| match self.obj(*v) {
            Obj::Func(_) | Obj::Bound(..) | Obj::Class(_) | Obj::Unknown => true,
            Obj::Module(m) => m.local.is_some(),
            _ => false,
        };
        // (Looked up without reading: locals, a closure's, the enclosing code's, the file's
        // globals; a name none binds is a builtin. An imported module's code is judged as
        // calling its own.)
        let imported = self.prog.segments.len() > 1 && self.prog.segment_of(c.item) != 0;
        let bound = |name: Name| {
            let found = (self.state.env.get(&name))
                .or_else(|| (self.frames.last()?.captured.as_ref())?.get(&name))
                .or_else(|| self.outer_envs.first()?.get(&name))
                .or_else(|| self.globals.get(&name));
            imported || found.is_some_and(|vs| vs.iter().any(own))
        };
        (c.body.exprs.iter().zip(&c.body.expr_spans))
            .filter(|(_, sp)| within.contains(**sp))
            .any(|(x, _)| match *x {
                Expr::Call { func, .. } => match *c.expr(func) {
                    Expr::Name { name, .. } => bound(name),
                    // (`self.criterion(x)`, `self.head(x)`: a method or a layer of the program;
                    // a tensor's method, `x.mean()`, is not.)
                    Expr::Attr { value, .. } => match *c.expr(value) {
                        Expr::Name { name, .. } => {
                            (self.state.env.get(&name)).is_some_and(|vs| {
                                vs.iter()
                                    .any(|v| matches!(self.obj(*v), Obj::Module(_) | Obj::Unknown))
                            }) || imported
                        }
                        _ => true,
                    },
                    _ => true,
                },
                _ => false,
            })
    }

    /// `{key: f(key) for key in keys}` over known string keys (a dict's, a tuple's): a dict
    /// with those keys, each value computed with the variable bound to its element
    /// (`{key: AdamW(model[key].parameters()) for key in model}`: `optimizers["wd"]` is the
    /// one over `model["wd"]`, not any of them). `evaluated`: the iterable, when it was
    /// evaluated and the comprehension is not unrolled.
    fn unrolled_dict_comprehension(
        &mut self,
        c: Code<'_>,
        (key, value): (ExprId, ExprId),
        gens: List,
        evaluated: &mut Option<Vals>,
    ) -> Option<ObjId> {
        let ([g], Some(k), Some(v)) = (c.body.list(gens), key.get(), value.get()) else {
            return None;
        };
        let g = c.body.generators[*g as usize];
        if g.ifs.len > 0 || g.target.is_none() || self.unrolling_comprehension {
            return None;
        }
        let iter = self.eval_opt(c, g.iter);
        let iter = self.iterated(iter, g.iter.get().map(|e| c.span(e)));
        let Some(children) = self.unrollable(&iter) else {
            *evaluated = Some(iter);
            return None;
        };
        // (The keys first: a key that is no known string leaves the comprehension to the
        // general run, before any value is computed.)
        let mut keys = Vec::with_capacity(children.len());
        for child in &children {
            self.bind_target(c, g.target, smallvec![*child], None);
            let kv = self.eval(c, k);
            let Some(name) = self.one_exact_str(&kv) else {
                *evaluated = Some(iter);
                return None;
            };
            keys.push(name);
        }
        self.unrolling_comprehension = true;
        let mut entries = Vec::with_capacity(children.len());
        for (child, name) in children.into_iter().zip(keys) {
            self.bind_target(c, g.target, smallvec![child], None);
            entries.push((Some((name, c.span(k))), self.eval(c, v)));
        }
        self.unrolling_comprehension = false;
        Some(self.keyed_dict(entries))
    }

    /// Whether `e` calls a module class (`nn.Conv2d(...)`, a class of the program deriving
    /// from `nn.Module`): each run makes a layer of its own. (Tensors made in a comprehension
    /// stay one summary slot: an element read at an unknown index is then the same tensor.)
    fn builds_module(&mut self, c: Code<'_>, e: ExprId) -> bool {
        let Expr::Call { func, .. } = *c.expr(e) else {
            return false;
        };
        let callee = self.eval(c, func);
        !callee.is_empty()
            && callee.iter().all(|v| match self.obj(*v) {
                Obj::Class(k) => self.class_is_module(k),
                Obj::Path(p) => {
                    let p = self.name(*p);
                    let last = p.rsplit('.').next().unwrap_or(p);
                    // (`nn.Parameter`, `nn.Buffer` make tensors.)
                    p.starts_with("torch.nn.")
                        && last.starts_with(|ch: char| ch.is_ascii_uppercase())
                        && !matches!(last, "Parameter" | "Buffer")
                }
                _ => false,
            })
    }

    /// The part of a tensor the subscript `e` (`value[...]`) shows: all of it for `x[:]`,
    /// else its index, by its text without spaces (a read `x[..., :d]` and a write
    /// `x[..., :d] = v` name the same part).
    pub(super) fn subscript_part(&self, c: Code<'_>, e: ExprId, value: ExprId, sub: u32) -> Part {
        if c.body.subscripts[sub as usize].whole {
            return Part::Whole;
        }
        let (all, base) = (c.span(e), c.span(value));
        let text = self.prog.text_of(all);
        let index = text
            .get((base.rel.end.saturating_sub(all.rel.start)) as usize..)
            .unwrap_or(text);
        use std::hash::Hasher;
        let mut h = rustc_hash::FxHasher::default();
        for b in index.bytes().filter(|b| !b.is_ascii_whitespace()) {
            h.write_u8(b);
        }
        Part::Index(h.finish())
    }

    /// The dimensions of subscript `sub`'s view that it cuts after another it keeps (`x[:, :3]`,
    /// `x[1:, :2]`, `x[:, 0, :3]`: bit 1), as [`TensorObj::strided`] counts them: its view is
    /// not laid out in order there. After an ellipsis (`x[..., :d]`) which dimension is cut is
    /// not known: [`ANY_ORDER`]. (An integer drops its dimension and a `None` adds one: `x[:, 0]`
    /// may well be one dimension, laid out in order as far as `flatten` goes.)
    fn strided_index(&self, c: Code<'_>, sub: u32) -> u32 {
        let s = &c.body.subscripts[sub as usize];
        let (mut kept, mut dim, mut known, mut cut) = (false, 0u32, true, 0u32);
        for (k, p) in c.body.exprs_of(s.parts).enumerate().take(32) {
            let whole = s.whole_parts & (1 << k) != 0;
            let text = || self.prog.text_of(c.span(p));
            let slice = whole
                || match *c.expr(p) {
                    Expr::Slice { .. } => true,
                    Expr::Other(_) => text().contains(':'),
                    _ => false,
                };
            let added = matches!(*c.expr(p), Expr::None);
            if matches!(*c.expr(p), Expr::Ellipsis) {
                known = false;
            }
            if slice && !whole && kept {
                cut |= if known && dim < 32 {
                    1 << dim
                } else {
                    ANY_ORDER
                };
            }
            kept |= slice;
            dim += u32::from(slice || added);
        }
        cut
    }

    /// Evaluate `e`; with `metadata`, when it reads an attribute or an element only its
    /// metadata is read of (`self.feat is None`, `feats[0].shape`): no stale read is reported.
    pub(super) fn eval_metadata(&mut self, c: Code<'_>, e: ExprId, metadata: bool) -> Vals {
        let slot = matches!(c.expr(e), Expr::Attr { .. } | Expr::Subscript { .. });
        let outer = std::mem::replace(&mut self.metadata_read, metadata && slot);
        let v = self.eval(c, e);
        self.metadata_read = outer;
        v
    }

    fn lookup(&mut self, c: Code<'_>, e: ExprId, name: Name, reads: bool) -> Vals {
        if reads && self.state.stale.contains_key(&name) {
            let writes = self.state.stale.remove(&name).unwrap_or_default();
            self.report_stale_read(name, &writes, c.span(e), None);
        }
        if let Some(v) = self.state.env.get(&name) {
            let v = v.clone();
            if !self.state.orphaned.is_empty() {
                for o in &v {
                    if let Some(evs) = self.state.orphaned.remove(o) {
                        for ev in evs {
                            // A called function's own rebinding waits for a real use of the
                            // optimizer (a step), not a mere read of it (`for obj in args:`).
                            if self.frames.iter().any(|f| f.local_rebinds.contains(&ev)) {
                                self.state.orphan(*o, ev);
                            } else if !self.given_back.contains(&ev) {
                                self.read_reported.push((*o, ev.clone()));
                                self.report(ev);
                            }
                        }
                    }
                }
            }
            return v;
        }
        // A closure reads the names of the function it was defined in.
        if let Some(v) = (self.frames.last())
            .and_then(|f| f.captured.as_ref())
            .and_then(|env| env.get(&name))
        {
            return v.clone();
        }
        if self.prog.segments.len() > 1 {
            let seg = self.prog.segment_of(c.item);
            if seg != 0 {
                // Code of an imported module reads its own module's globals.
                if let Some(v) = self.segment_global(seg, name) {
                    return v;
                }
                return self.builtin(name);
            }
        }
        if let Some(env) = self.outer_envs.first() {
            if let Some(v) = env.get(&name) {
                return v.clone();
            }
        }
        if let Some(v) = self.globals.get(&name) {
            self.deps.globals.insert(name);
            return v.clone();
        }
        self.deps.globals.insert(name);
        self.builtin(name)
    }

    /// The left operand `x_s` of `x_s + self.lin(self.act(x))`, a name, was looked up before
    /// the right one ran; the operator reads its tensor after, and sees what a call in the
    /// right operand wrote in place (an in-place `act` on `x`, which `x_s` also names). So do a
    /// call's arguments (`torch.add(x, self.seq(x))`) and a display's items, evaluated in turn
    /// and read when the call runs.
    pub(super) fn operand_read_again(&mut self, c: Code<'_>, operand: ExprId) {
        let Some(e) = operand.get() else { return };
        let Expr::Name { name, reads: true } = *c.expr(e) else {
            return;
        };
        // (Stale before the operand was looked up, the lookup reported it and took it off.)
        if let Some(writes) = self.state.stale.remove(&name) {
            self.report_stale_read(name, &writes, c.span(e), None);
        }
    }

    /// A name no scope binds: a constant, or a builtin.
    fn builtin(&mut self, name: Name) -> Vals {
        match name {
            known::TRUE => smallvec![TRUE],
            known::FALSE => smallvec![FALSE],
            known::NONE => smallvec![NONE],
            _ => {
                let builtins = self.intern("builtins");
                let p = self.path_join(builtins, name);
                smallvec![self.alloc(Obj::Path(p))]
            }
        }
    }

    /// `m._parameters["weight"]` (or `_buffers`, `_modules`) with a key known as one string:
    /// the owner expression and the key. An entry of these dicts is the module's attribute of
    /// that name (hand-made spectral norm moves a weight with them).
    pub(super) fn registry_slot(
        &mut self,
        c: Code<'_>,
        value: ExprId,
        sub: u32,
    ) -> Option<(ExprId, Name)> {
        let Expr::Attr {
            value: owner, attr, ..
        } = *c.expr(value)
        else {
            return None;
        };
        if !matches!(self.name(attr), "_parameters" | "_buffers" | "_modules") {
            return None;
        }
        let mut parts = c.body.exprs_of(c.body.subscripts[sub as usize].parts);
        let (Some(key), None) = (parts.next(), parts.next()) else {
            return None;
        };
        let key = self.eval(c, key);
        Some((owner, self.one_exact_str(&key)?))
    }

    fn eval_subscript(&mut self, c: Code<'_>, e: ExprId, value: ExprId, sub: u32) -> Vals {
        if let Some((owner, key)) = self.registry_slot(c, value, sub) {
            // (An entry read out, as of a dict: `m._parameters["w"] += 1` writes it whole.)
            self.element_reads.insert(c.span(e));
            let mut out = Vals::new();
            for o in self.eval(c, owner) {
                for x in self.attribute_of(c, e, o, key) {
                    if !out.contains(&x) {
                        out.push(x);
                    }
                }
            }
            return out;
        }
        // (Only this subscript is the target of `x[a][mask] += v`: `x[a]` is read as usual.)
        let target = std::mem::replace(&mut self.index_target, false);
        let base = self.eval_opt(c, value);
        self.index_target = target;
        let at = self.index_of(c, sub);
        let list_index = at.list_index();
        let IndexOf {
            index,
            key,
            gather,
            arrays_only,
            int,
            ..
        } = at;
        if arrays_only {
            self.array_indexed.insert(c.span(e));
        }
        let mut out = Vals::new();
        for b in base {
            if out.len() > MAX_VALUES {
                return smallvec![UNKNOWN];
            }
            // (`td["reward"]` of an instance of a `dict` subclass: its entries.)
            let b = self.dict_items(b).unwrap_or(b);
            // A key a `defaultdict` does not hold yet: added, with a new empty list or dict.
            if let (Some(k), Some(&list)) = (key, self.default_factories.get(&b)) {
                self.add_default_entry(b, k, list, c.span(e));
            }
            // `cfg["act"]` of a dict whose keys are known: that entry.
            if let (Some(at), Obj::Seq(items)) =
                (key.and_then(|k| self.key_slot(b, k)).flatten(), self.obj(b))
            {
                out.extend(items[at].iter().copied());
                self.element_reads.insert(c.span(e));
                self.read_slot(b, Slot::At(at as u32), c.span(e));
                continue;
            }
            match self.obj(b) {
                // A string key means a dict (or a mapping-like output), never tensor indexing.
                Obj::Tensor(_) if index == Index::Key => out.push(self.alloc(Obj::Unknown)),
                // Indexing with tensors or lists (`x[idx]`, `x[mask]`, `x[:, [1, 3]]`) gathers a
                // copy, not a view, and its backward reads the index tensors (measured with
                // torch 2.15: writing `idx` or `mask` in place before `backward()` raises).
                Obj::Tensor(_) if gather.is_some() => {
                    if let Some(index) = &gather {
                        self.never_requires_grad(index);
                    }
                    let saves = crate::ops::Saves {
                        input: false,
                        other: true,
                        result: false,
                    };
                    let inputs = [smallvec![b], gather.clone().unwrap_or_default()];
                    let label = Some(OpLabel::Indexing(c.span(e)));
                    out.push(self.derive(&inputs, c.span(e), saves, label, true));
                }
                // The target of `x[mask] += v` is `x` itself (the sum is put back into it).
                Obj::Tensor(_) if arrays_only && self.index_target => out.push(b),
                Obj::Tensor(_) => {
                    let part = self.subscript_part(c, e, value, sub);
                    let view = self.view_of(b, c.span(e), part);
                    let cut = self.strided_index(c, sub);
                    if cut != 0 {
                        self.mark_strided(view, cut);
                    }
                    out.push(view);
                }
                Obj::Seq(items) => {
                    let items = items.clone();
                    self.element_reads.insert(c.span(e));
                    if self.tuples.contains(&b) {
                        self.tuple_element_reads.insert(c.span(e));
                    } else if !self.lists.contains(&b) && !self.dict_objs.contains(&b) {
                        // (Not known to be a list or dict: a `chunk()`'s pieces, a pair a
                        // `zip()` makes, `torch.max`'s values and indices.)
                        self.fixed_element_reads.insert(c.span(e));
                    }
                    let index = list_index;
                    match (index_at(index, items.len()), index) {
                        (Some(k), _) => self.read_slot(b, Slot::At(k as u32), c.span(e)),
                        // (A slice reads the slots it covers: `outs[:-1]` not the last; of
                        // a list whose slots are its elements, one by one.)
                        (None, Index::Range(lo, hi)) if self.exact_seqs.contains(&b) => {
                            let (lo, hi) = super::slice_bounds(lo, hi, items.len());
                            for k in lo..hi {
                                self.read_slot(b, Slot::At(k as u32), c.span(e));
                            }
                        }
                        (None, _) => self.read_any_slot(b, c.span(e)),
                    }
                    self.steps += items.iter().map(|i| i.len() as u64).sum::<u64>() / 16;
                    if self.seq_element(b, &items, index, &mut out) {
                        return smallvec![UNKNOWN];
                    }
                }
                // `self.blocks["conv"]`, `self.blocks[name]` of an `nn.ModuleDict`.
                Obj::Module(m) if key.is_some_and(|k| m.attrs.contains_key(&k)) => {
                    out.extend(
                        key.and_then(|k| m.attrs.get(&k))
                            .into_iter()
                            .flatten()
                            .copied(),
                    );
                }
                // `ds[i]` of a dataset (other classes' `__getitem__` are not followed: they
                // index shapes and specs the analysis cannot tell from tensors).
                Obj::Module(m)
                    if m.children.is_empty()
                        && (m.local.as_ref().is_some_and(|k| self.is_dataset(k))
                            || self.is_tensor_dataset(m)) =>
                {
                    // (The index was evaluated above; its value is not followed.)
                    match self.get_item(b, smallvec![OTHER], c.span(e)) {
                        Some(v) => out.extend(v),
                        None => out.push(UNKNOWN),
                    }
                }
                Obj::Module(m) if !m.children.is_empty() => {
                    let m = m.clone();
                    let index = match (index, int) {
                        (Index::Other, Some(k)) => Index::At(k),
                        _ => index,
                    };
                    out.extend(self.children_at(&m, index));
                }
                Obj::Params { tensors, .. } => out.extend(tensors.clone()),
                Obj::Other | Obj::Str(_) => out.push(OTHER),
                _ => {
                    let element = self.alloc(Obj::Unknown);
                    // (An element of an array a dataset keeps is kept by it too.)
                    if let Some(&stored) = self.stored_arrays.get(&b) {
                        self.stored_arrays.insert(element, stored);
                    }
                    out.push(element);
                }
            }
        }
        if out.is_empty() {
            out.push(UNKNOWN);
        }
        out
    }

    /// A key a `defaultdict` does not hold yet, read: added, with a new empty list or dict.
    fn add_default_entry(&mut self, b: ObjId, k: Name, list: bool, at: Span) {
        let len = match self.obj(b) {
            Obj::Seq(items) => items.len(),
            _ => MAX_SLOTS,
        };
        if self.key_slot(b, k).flatten().is_none() && len < MAX_SLOTS {
            let new = match list {
                true => self.alloc(Obj::Seq(Vec::new())),
                false => self.keyed_dict(Vec::new()),
            };
            if let Obj::Seq(items) = self.obj_mut(b) {
                items.push(smallvec![new]);
            }
            let keys = self.dict_keys.entry(b).or_default();
            keys.resize(len, None);
            keys.push(Some((k, at)));
        }
    }

    /// The children of a container module at `index` (`self.blocks[-1]`: the last;
    /// `self.blocks[:-1]`: a container of the same kind holding the others; all of them at
    /// an unknown index).
    fn children_at(&mut self, m: &ModuleObj, index: Index) -> Vals {
        let ch = &m.children;
        match (index, index_at(index, ch.len())) {
            (_, Some(k)) => smallvec![ch[k]],
            (Index::Range(lo, hi), _) => {
                let (lo, hi) = slice_bounds(lo, hi, ch.len());
                let mut part = Box::new(m.clone());
                part.children = ch[lo..hi].to_vec();
                part.attrs.retain(|_, vs| {
                    vs.iter()
                        .all(|v| !ch.contains(v) || part.children.contains(v))
                });
                smallvec![self.alloc(Obj::Module(part))]
            }
            _ => ch.iter().copied().collect(),
        }
    }

    /// The element(s) of container `seq` at `index`; true when there are too many to keep.
    fn seq_element(&mut self, seq: ObjId, items: &[Vals], index: Index, out: &mut Vals) -> bool {
        match (index, index_at(index, items.len())) {
            // A slot that holds one element: that element (a literal's), or the stand-in an
            // earlier read of the position made, while the list held one slot for many
            // (`states = []; states.append(h)`, read as `states[0]`, then appended to again).
            (_, Some(k)) if items.len() > 1 || self.exact_seqs.contains(&seq) => {
                for v in &items[k] {
                    let standin = self.elements_at.get(&(seq, k as i64, *v));
                    out.push(standin.copied().unwrap_or(*v));
                }
            }
            (Index::Range(lo, hi), _) => {
                let (lo, hi) = slice_bounds(lo, hi, items.len());
                out.push(self.alloc(Obj::Seq(items[lo..hi].to_vec())));
            }
            _ => {
                // An element we cannot pin down. At an unknown index (`xs[i]`, `d[key]`): each
                // candidate as itself (memory, counter, history, leaf), so a write through it
                // reaches what autograd saved of it, but as another object, so that different
                // elements never look like names of one tensor (IP402). At a known position of
                // a slot that stands for many elements (a comprehension's): a stand-in with the
                // history but its own memory, since `xs[0]` and `xs[1]` are different tensors,
                // and the same one each time `xs[0]` is read.
                let position = match index {
                    Index::At(i) => Some(i),
                    _ => None,
                };
                let slotted = items
                    .iter()
                    .enumerate()
                    .flat_map(|(k, slot)| slot.iter().map(move |v| (k, v)));
                for (k, v) in slotted {
                    if out.len() > MAX_VALUES {
                        return true;
                    }
                    if let Some(&same) = position.and_then(|i| self.elements_at.get(&(seq, i, *v)))
                    {
                        out.push(same);
                        continue;
                    }
                    // (An element read out of this container and written, which the slot then
                    // took in: itself, where it may be the element read.)
                    if let Some(&(from, _, at)) = self.read_from_slot.get(v) {
                        if from == seq {
                            if position.is_none() || at.is_none() || at == position {
                                out.push(*v);
                            }
                            continue;
                        }
                    }
                    match self.obj(*v) {
                        Obj::Tensor(t) => {
                            let from = t.storage;
                            let t = if position.is_some() {
                                // (Each element of a list of leaves is a leaf; of a
                                // split's views, one of its views.)
                                TensorObj {
                                    leaf: t.leaf,
                                    view_of_leaf: t.view_of_leaf,
                                    refused_view: t.refused_view,
                                    ..t.sibling(self.heap.len() as ObjId)
                                }
                            } else {
                                t.alias()
                            };
                            let o = self.alloc(Obj::Tensor(t));
                            if let Some(i) = position {
                                self.elements_at.insert((seq, i, *v), o);
                                self.own_element_history(o, from);
                            }
                            self.read_from_slot.insert(o, (seq, k, position));
                            out.push(o);
                        }
                        _ => out.push(*v),
                    }
                }
            }
        }
        false
    }

    /// The stand-in `o` for one element of a slot whose tensor (memory `from`) stands for
    /// many: what was saved of the slot is saved of this element too (a write into `xs[0]`
    /// clobbers the saves `sigmoid` or a loop over `xs` made of it), and the op that made it
    /// is its own copy, saving this element's memory: a backward through `xs[0]` alone does
    /// not reach what a write into `xs[1]` clobbers.
    fn own_element_history(&mut self, o: ObjId, from: ObjId) {
        if let Some(saves) = self.state.live.get(&from).cloned() {
            self.state.live.insert(o, saves);
        }
        let Some(n) = self.tensor(o).and_then(|t| t.node) else {
            return;
        };
        let node = self.nodes.get(n).clone();
        let mut saves = SmallVec::<[SaveId; 2]>::new();
        for s in node.saves {
            let save = self.saves.get(s).clone();
            saves.push(if save.storage == from {
                let own = self.record_save(o, save.output, save.op, save.range, save.assumes);
                self.saves.get_mut(own).through_data = save.through_data;
                own
            } else {
                s
            });
        }
        let own = self.nodes.push(GraphNode {
            saves,
            parents: node.parents,
            leaves: node.leaves,
        });
        if let Some(t) = self.tensor_mut(o) {
            t.node = Some(own);
        }
    }

    /// What a subscript indexes with, after evaluating its parts, and the key when it is one
    /// known string (`d["act"]`, `d[name]`).
    pub fn index_of(&mut self, c: Code<'_>, sub: u32) -> IndexOf {
        let s = c.body.subscripts[sub as usize];
        let mut position = None;
        let mut key = None;
        let mut parts = 0;
        let mut tensors = Vals::new();
        // `x[[0, 2]]`, `x[:, [1, 3]]`: a list is an index array too (a gather, nothing saved).
        let mut list = false;
        // Every part an index array or a whole dimension, at least one an array.
        let mut advanced = true;
        let mut arrays = 0;
        let mut int = None;
        let mut objects = Vals::new();
        for (k, p) in c.body.exprs_of(s.parts).enumerate() {
            let is_list = matches!(
                c.expr(p),
                Expr::Seq {
                    kind: SeqKind::List,
                    ..
                }
            );
            list |= is_list;
            let target = std::mem::replace(&mut self.index_target, false);
            let v = self.eval(c, p);
            self.index_target = target;
            parts += 1;
            let mut array = is_list;
            if let [one] = v.as_slice() {
                // (An element or slice of another tensor, `for i in perm: x[i]`, may be a 0-dim
                // integer, which indexes like an int: a view. Only a tensor made whole counts.)
                if self
                    .tensor(*one)
                    .is_some_and(|t| t.known && t.view_origin.is_none())
                {
                    array = true;
                    if !self.index_target {
                        tensors.push(*one);
                    }
                }
                position = Some(*one)
                    .filter(|o| self.positions.contains(o))
                    .and_then(|o| self.int_values.get(&o).copied());
                int = self.int_values.get(one).copied();
            }
            arrays += usize::from(array);
            advanced &= array || (k < 32 && s.whole_parts & (1 << k) != 0);
            key = self.one_exact_str(&v);
            objects = (v.iter().copied())
                .filter(|o| match self.obj(*o) {
                    Obj::Module(_) => true,
                    Obj::Tensor(t) => t.known,
                    _ => false,
                })
                .collect();
        }
        let key = key.filter(|_| parts == 1);
        // `xs[k]` with `k` bound by a loop over known positions.
        // (The target of `x[[0, 2]] += v` is written through, as with a tensor index.)
        let gather = ((list && !self.index_target) || !tensors.is_empty()).then_some(tensors);
        let index = match (s.index, position) {
            (Index::Other, Some(k)) if parts == 1 => Index::At(k),
            _ => s.index,
        };
        IndexOf {
            index,
            key,
            gather,
            arrays_only: advanced && arrays > 0,
            int: int.filter(|_| parts == 1),
            objects: if parts == 1 { objects } else { Vals::new() },
        }
    }

    /// The values a `for` loop over `vals` binds.
    pub fn elements(&mut self, vals: &Vals) -> Vals {
        let mut out = Vals::new();
        for v in vals {
            if out.len() > MAX_VALUES {
                return smallvec![UNKNOWN];
            }
            match self.obj(*v) {
                Obj::Seq(items) => {
                    for x in items.iter().flatten() {
                        if !out.contains(x) {
                            out.push(*x);
                        }
                    }
                    // (Each slot is read out: `for s in self.hidden: s.zero_()` works on them.)
                    let n = items.len() as u32;
                    self.slot_clock += 1;
                    let now = self.slot_clock;
                    self.taken_slots
                        .extend((0..n).map(|k| ((*v, Slot::At(k)), now)));
                }
                Obj::Params { tensors, .. } => out.extend(tensors.iter().copied()),
                Obj::Module(m) => out.extend(m.children.iter().copied()),
                // Iterating over a tensor unbinds its first dimension (over what is only taken
                // to be one, an argument or what came of it, which is often a list of
                // tensors, it gives views as usual).
                Obj::Tensor(t) => {
                    let (r, certain) = (t.origin, t.known && t.grad_if.is_none());
                    let op = Some(RefusedBy::Iteration).filter(|_| certain);
                    out.push(self.split_view_of(*v, r, op, Part::Piece));
                }
                Obj::Other | Obj::Str(_) => out.push(OTHER),
                _ => out.push(self.alloc(Obj::Unknown)),
            }
        }
        if out.is_empty() {
            out.push(UNKNOWN);
        }
        out
    }

    /// What a `for` loop or a comprehension walks when it iterates `iter`: an `nn.ModuleDict`
    /// gives its keys; an object whose class defines `__iter__` (called at `at`), what that
    /// gives; anything else itself (its elements are taken by [`Self::elements`]).
    pub(super) fn iterated(&mut self, iter: Vals, at: Option<Span>) -> Vals {
        // (Iterating over a list reads the tensors it holds: one written in place since it was
        // stored is read stale, as `xs[0]` would be. Over a dict, its keys: no tensor is read.)
        if let Some(at) = at {
            if !self.state.stale_slots.is_empty() {
                let lists: Vals = (iter.iter().copied())
                    .filter(|o| !self.dict_objs.contains(o))
                    .collect();
                self.read_entries(&lists, at);
            }
        }
        let [m] = iter.as_slice() else { return iter };
        if let Some(keys) = self.module_dict_key_list(*m) {
            return smallvec![keys];
        }
        // (A dict with its keys all known: its keys, one by one.)
        if self.dict_objs.contains(m) {
            if let Some(keys) = self.dict_key_list(*m) {
                return smallvec![keys];
            }
            // (A dict keyed by modules or tensors: those, in the order they were stored.)
            if let Some(keys) = self.object_key_list(*m) {
                return smallvec![keys];
            }
        }
        // (An instance of a `dict` subclass without an `__iter__` of its own, `Munch(a=x)`:
        // its dict's keys.)
        if let (Some(d), Obj::Module(inst)) = (self.dict_items(*m), self.obj(*m)) {
            let own_iter =
                (inst.local.as_ref()).is_some_and(|k| self.find_method(k, known::ITER).is_some());
            if !own_iter {
                if let Some(keys) = self.dict_key_list(d) {
                    return smallvec![keys];
                }
            }
        }
        match at.and_then(|at| self.iterate_instance(*m, at)) {
            Some(v) => v,
            None => iter,
        }
    }

    /// The children to run a loop over one by one: a single `ModuleList`/`Sequential`, or a
    /// literal list of modules, of at most 32 entries.
    pub(super) fn unrollable(&self, iter: &Vals) -> Option<Vec<ObjId>> {
        let [one] = iter.as_slice() else { return None };
        let children: Vec<ObjId> = match self.obj(*one) {
            Obj::Module(m) if !m.children.is_empty() => m.children.clone(),
            Obj::Seq(items) if !items.is_empty() && items.iter().all(|i| i.len() == 1) => {
                items.iter().map(|i| i[0]).collect()
            }
            _ => return None,
        };
        // (Or `(name, layer)` pairs: `for name, layer in self.blocks.items()`.)
        // (Or known strings: the keys of an `nn.ModuleDict`, `for k in ("conv", "act")`; with
        // known integers among them: VGG's `[64, "M", 128, ...]`, whose `v == "M"` picks the
        // layers each position adds.)
        let string = |c: &ObjId| self.exact_str(*c).is_some();
        if children.iter().any(string)
            && (children.iter()).all(|c| string(c) || self.int_values.contains_key(c))
        {
            return (children.len() <= 32).then_some(children);
        }
        let module = |v: ObjId| matches!(self.obj(v), Obj::Module(_));
        // (Or code to call, position by position as the loop runs it: a pipeline of functions or
        // hooks, `for fn in self.hooks: x = fn(x)`, whose first may copy what the next writes.)
        let code = |v: ObjId| {
            matches!(
                self.obj(v),
                Obj::Func(_) | Obj::Bound(..) | Obj::Partial { .. } | Obj::Class(_) | Obj::Path(_)
            )
        };
        // (Or tuples of single values holding a module or an optimizer: `(name, layer)` pairs
        // of `.items()`, `zip(optimizers, losses)`; or records of constants, a literal table
        // `[("max_pool_3x3", 1), ("conv_1x1", 0)]` whose rows build different layers.)
        let constant = |v: ObjId| self.exact_str(v).is_some() || matches!(self.obj(v), Obj::Other);
        let modules = children.iter().all(|c| match self.obj(*c) {
            Obj::Seq(tuple) => {
                tuple.len() >= 2
                    && tuple.iter().all(|v| v.len() == 1)
                    && (tuple
                        .iter()
                        .any(|v| matches!(self.obj(v[0]), Obj::Module(_) | Obj::Optimizer { .. }))
                        // (A dict's `(key, value)` pairs: `for k, v in d.items()`.)
                        || (tuple.len() == 2 && self.exact_str(tuple[0][0]).is_some())
                        || (tuple.iter().all(|v| constant(v[0]))
                            && tuple.iter().any(|v| self.exact_str(v[0]).is_some())))
            }
            _ => module(*c) || code(*c),
        });
        (modules && children.len() <= 32).then_some(children)
    }
}

/// Whether comprehension element `e` subscripts by its variable `target` (`self.branches[i](
/// x[i])`), so each position reads its own elements.
fn subscripts_by_position(c: Code<'_>, target: ExprId, e: ExprId) -> bool {
    let Expr::Name { name, .. } = *c.expr(target) else {
        return false;
    };
    super::stmt::uses_position_within(c, c.body.expr_span(e), name, None)
}

/// `a and b` / `a or b`: known truth values decide; else either operand may be the result.
fn bool_op(and: bool, a: Vals, b: Vals) -> Vals {
    let (t, f) = ([TRUE], [FALSE]);
    match (and, a.as_slice(), b.as_slice()) {
        (true, x, _) if x == f => a,
        (true, x, _) if x == t => b,
        (true, _, y) if y == f => b,
        (false, x, _) if x == t => a,
        (false, x, _) if x == f => b,
        (false, _, y) if y == t => b,
        _ => {
            let mut out = a;
            out.extend(b);
            out.retain(|v| *v != TRUE && *v != FALSE);
            if out.is_empty() {
                out.push(OTHER);
            }
            out
        }
    }
}

/// How a format string marks the places its arguments fill.
pub(super) enum Placeholders {
    /// `%d`, `%s`, `%02d`, `%(name)s`; `%%` is a percent sign.
    Percent,
    /// `{}`, `{0}`, `{name:>3}`; `{{` and `}}` are braces.
    Braces,
}

/// A format string with each placeholder made a [`STR_HOLE`].
#[cfg(test)]
pub(super) fn with_holes(text: &str, style: Placeholders) -> String {
    with_values(text, style, &[])
}

/// A format string with its plain placeholders (`%d`, `%s`, `%i`; `{}`, `{0}`) filled with
/// the known texts of `values`, in order (or by index), and every other placeholder, or one
/// whose value is not known, made a [`STR_HOLE`].
pub(super) fn with_values(text: &str, style: Placeholders, values: &[Option<String>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut next = 0;
    let fill = |out: &mut String, at: Option<usize>| match at
        .and_then(|k| values.get(k))
        .and_then(Option::as_deref)
    {
        Some(v) => out.push_str(v),
        None => out.push(STR_HOLE),
    };
    while let Some(ch) = chars.next() {
        match (&style, ch) {
            (Placeholders::Percent, '%') => {
                if chars.peek() == Some(&'%') {
                    chars.next();
                    out.push('%');
                    continue;
                }
                // Flags, width, precision and a `(name)` key, then the conversion letter.
                let mut depth = 0;
                let mut spec = String::new();
                let mut letter = None;
                for c in chars.by_ref() {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        c if depth == 0 && c.is_ascii_alphabetic() => {
                            letter = Some(c);
                            break;
                        }
                        _ => {}
                    }
                    spec.push(c);
                }
                let plain = spec.is_empty() && matches!(letter, Some('d' | 'i' | 's'));
                fill(&mut out, plain.then_some(next));
                next += 1;
            }
            (Placeholders::Braces, '{' | '}') if chars.peek() == Some(&ch) => {
                chars.next();
                out.push(ch);
            }
            (Placeholders::Braces, '{') => {
                let mut field = String::new();
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                    field.push(c);
                }
                // (The field's name: before a conversion `!r` or a spec `:>2`. An empty one
                // takes the next argument, as Python numbers them; only a plain field is
                // filled, one with a spec or conversion is a hole.)
                let name = field.split([':', '!']).next().unwrap_or("");
                let index = if name.is_empty() {
                    next += 1;
                    Some(next - 1)
                } else {
                    name.parse::<usize>().ok()
                };
                fill(&mut out, index.filter(|_| name.len() == field.len()));
            }
            _ => out.push(ch),
        }
    }
    out
}

/// The name an expression reads through attributes and calls (`w_t` of `w_t.data`, `w` of
/// `w.detach()`), where it is read.
fn read_root(c: Code<'_>, e: ExprId) -> Option<(Name, Span)> {
    let root = super::function::name_root(c.body, e, false)?;
    match *c.expr(root) {
        Expr::Name { name, .. } => Some((name, c.span(root))),
        _ => None,
    }
}

/// How the names `left` and `right` read (through attributes and calls: `w.data`) are bound by
/// the loops around them: `Some(true)` when one loop's target binds both (`for w, s in zip(a,
/// b)`, a comprehension's too), `Some(false)` when a loop binds one and not both (`p - q` of two
/// loops over the same list: the pairwise distances), `None` when no loop binds either.
fn one_loop_binds(c: Code<'_>, left: ExprId, right: ExprId) -> Option<bool> {
    let (a, b) = (
        read_root(c, left).map(|r| r.0),
        read_root(c, right).map(|r| r.0),
    );
    let at = c.body.expr_span(left);
    let names_in = |target: ExprId| -> Vec<Name> {
        let within = c.body.expr_span(target);
        (0..c.body.exprs.len())
            .filter(|&k| within.contains(c.body.expr_spans[k]))
            .filter_map(|k| match c.body.exprs[k] {
                Expr::Name { name, .. } => Some(name),
                _ => None,
            })
            .collect()
    };
    let mut targets: Vec<Vec<Name>> = (c.body.stmts.iter().zip(&c.body.stmt_spans))
        .filter_map(|(st, sp)| match *st {
            Stmt::For { target, .. } if sp.contains(at) => Some(names_in(target)),
            _ => None,
        })
        .collect();
    for (e, sp) in c.body.exprs.iter().zip(&c.body.expr_spans) {
        if let Expr::Comp { gens, .. } = *e {
            if sp.contains(at) {
                for g in c.body.list(gens) {
                    targets.push(names_in(c.body.generators[*g as usize].target));
                }
            }
        }
    }
    let bound = |n: Option<Name>| n.is_some_and(|n| targets.iter().any(|t| t.contains(&n)));
    if !bound(a) && !bound(b) {
        return None;
    }
    Some(
        (targets.iter())
            .any(|t| a.is_some_and(|a| t.contains(&a)) && b.is_some_and(|b| t.contains(&b))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_holes() {
        let h = STR_HOLE;
        assert_eq!(
            with_holes("layer%d", Placeholders::Percent),
            format!("layer{h}")
        );
        assert_eq!(
            with_holes("b%02d_%(k)s 100%%", Placeholders::Percent),
            format!("b{h}_{h} 100%")
        );
        assert_eq!(
            with_holes("layer{}", Placeholders::Braces),
            format!("layer{h}")
        );
        assert_eq!(
            with_holes("{0}x{name:>3} {{y}}", Placeholders::Braces),
            format!("{h}x{h} {{y}}")
        );
    }

    #[test]
    fn plain_placeholders_take_known_values() {
        let h = STR_HOLE;
        let v = |xs: &[Option<&str>]| xs.iter().map(|x| x.map(String::from)).collect::<Vec<_>>();
        let p = Placeholders::Percent;
        assert_eq!(with_values("fc%d", p, &v(&[Some("0")])), "fc0");
        let p = Placeholders::Percent;
        assert_eq!(
            with_values("%s_%02d_%d", p, &v(&[Some("a"), Some("1"), None])),
            format!("a_{h}_{h}")
        );
        let b = Placeholders::Braces;
        assert_eq!(with_values("gate{}", b, &v(&[Some("1")])), "gate1");
        let b = Placeholders::Braces;
        assert_eq!(
            with_values("{1}{0}{x}", b, &v(&[Some("a"), Some("b")])),
            format!("ba{h}")
        );
        let b = Placeholders::Braces;
        assert_eq!(
            with_values("layer{:d}_{}", b, &v(&[Some("1"), Some("0")])),
            format!("layer{h}_0")
        );
    }
}
