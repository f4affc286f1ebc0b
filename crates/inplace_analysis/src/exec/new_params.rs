//! Calls that give a module new parameter objects, so that what an optimizer built before holds
//! is no longer what the module trains: `copy.deepcopy` of a module (a new module tree with
//! parameters and buffers of its own) and `weight_norm` (new parameters in place of its weight).
//! (Left to [`Interp::opaque_call`], a module passed to an unseen function stays itself, so
//! `best = copy.deepcopy(model)` would be `model`, and `model = copy.deepcopy(best)` after an
//! optimizer was built would not be seen to replace the parameters it holds: IP403.)

use super::*;
use crate::events::{Event, Replacement};

/// Objects copied per `deepcopy` call at most (a budget: the rest stay shared).
const MAX_COPIED: usize = 4096;

impl Interp<'_, '_> {
    /// `copy.deepcopy(x)` when `x` may be a module: each alternative copied (objects reached
    /// twice stay one object in the copy, as Python's memo keeps them). `None` when no
    /// alternative is a module (the caller treats the call as it did).
    pub(super) fn deepcopy(&mut self, args: &Args) -> Option<Vals> {
        let (first, _) = args.positional.first()?;
        if !first.iter().any(|v| matches!(self.obj(*v), Obj::Module(_))) {
            return None;
        }
        let mut memo = FxHashMap::default();
        Some(first.iter().map(|v| self.copy_obj(*v, &mut memo)).collect())
    }

    /// `weight_norm(module, name="weight")` (`torch.nn.utils` and its `parametrizations`): the
    /// weight is computed from two new parameters (`weight_g`/`weight_v`, or `original0`/
    /// `original1`), so the parameter an optimizer built before holds is no longer used. Torch
    /// changes the module in place and returns it: the module's weight becomes a new leaf here,
    /// as if assigned (`model.fc.weight = nn.Parameter(...)`), so `weight_norm(model.fc)` after
    /// the optimizer was built is seen replacing what it holds (IP403), with or without
    /// `model.fc = ...` around it. (`spectral_norm` keeps the parameter object, as
    /// `weight_orig` or `original`: not modelled, nothing to report.)
    pub(super) fn weight_norm(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Option<Vals> {
        let (first, arg) = args.positional.first()?.clone();
        let name = (args.named_or_at(self.intern("name"), 1))
            .and_then(|v| match v.as_slice() {
                [s] => match self.obj(*s) {
                    Obj::Str(n) => Some(*n),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or(known::WEIGHT);
        let stmt = (self.stmt).and_then(|s| (s.item == c.item).then_some(s.stmt));
        for &m in &first {
            let Obj::Module(module) = self.obj(m) else {
                continue;
            };
            let Some(old) = module.attrs.get(&name).cloned() else {
                continue;
            };
            let weight = smallvec![self.new_leaf(true, c.span(e))];
            self.parameters.extend(weight.iter().copied());
            if let Some(s) = stmt {
                let target = arg.filter(|a| *a != ExprId::NONE).unwrap_or(e);
                // Named as the user reaches it (`net.fc.weight`) where the argument spells it.
                let full = (self.spelled(c, target)).map_or(name, |m| self.path_join(m, name));
                let _ = self.check_rebind_objs(c, &old, &weight, target, s, full);
            }
            self.set_attribute(c, e, m, name, weight, None);
        }
        Some(first)
    }

    /// `m.load_state_dict(sd, assign=True)`: each parameter of the tree is replaced by a new
    /// one holding the loaded tensor (its `requires_grad` kept from the module's), so what an
    /// optimizer built before holds is no longer what the module trains (IP403, measured with
    /// torch 2.15). (Without `assign`, the values are copied into the same objects.)
    pub(super) fn load_assigned(&mut self, c: Code<'_>, e: ExprId, m: ObjId) {
        let mut modules = Vec::new();
        self.submodules(m, super::module::TreeWalk::PreOrder, &mut modules);
        let mut replaced: FxHashMap<ObjId, ObjId> = FxHashMap::default();
        for (_, sub) in modules {
            let Obj::Module(module) = self.obj(sub) else {
                continue;
            };
            let mut attrs: Vec<(Name, Vals)> = (module.attrs.iter())
                .filter(|(_, vals)| vals.iter().any(|v| self.is_param(*v)))
                .map(|(n, vals)| (*n, vals.clone()))
                .collect();
            for (_, vals) in &mut attrs {
                for v in vals.iter_mut() {
                    let old = *v;
                    if !self.is_param(old) {
                        continue;
                    }
                    *v = *replaced.entry(old).or_insert_with(|| {
                        let grad = self.tensor(old).is_none_or(|t| t.grad != Tri::No);
                        let new = self.new_leaf(grad, c.span(e));
                        self.parameters.insert(new);
                        new
                    });
                }
            }
            if let Obj::Module(module) = self.obj_mut(sub) {
                module.attrs.extend(attrs);
            }
        }
        let Some(s) = (self.stmt).and_then(|s| (s.item == c.item).then_some(s.stmt)) else {
            return;
        };
        let receiver = match *c.expr(e) {
            Expr::Call { func, .. } => match *c.expr(func) {
                Expr::Attr { value, .. } => value,
                _ => e,
            },
            _ => e,
        };
        let name = self.spelled(c, receiver).unwrap_or(known::EMPTY);
        let (old, new): (Vals, Vals) = replaced.into_iter().unzip();
        let Some(e) = self.check_rebind_objs(c, &old, &new, receiver, s, name) else {
            return;
        };
        // (Left waiting for the optimizer's next use: marked as a load where it waits.)
        let waiting = (self.state.orphaned.values_mut()).flat_map(|list| list.iter_mut());
        let local = (self.frames.last_mut())
            .into_iter()
            .flat_map(|f| f.local_rebinds.iter_mut());
        for ev in waiting.chain(local).filter(|ev| **ev == e) {
            if let Event::Rebind { how, .. } = ev {
                *how = Replacement::Loads;
            }
        }
    }

    /// The dotted name expression `e` spells (`net.fc`), when it is one.
    fn spelled(&mut self, c: Code<'_>, e: ExprId) -> Option<Name> {
        match *c.expr(e) {
            Expr::Name { name, .. } => Some(name),
            Expr::Attr { value, attr, .. } => {
                let base = self.spelled(c, value)?;
                Some(self.path_join(base, attr))
            }
            _ => None,
        }
    }

    /// The deep copy of one object: modules, tensors and containers are new; everything else
    /// (functions, classes, numbers, strings, unknown values) is shared.
    fn copy_obj(&mut self, v: ObjId, memo: &mut FxHashMap<ObjId, ObjId>) -> ObjId {
        if let Some(n) = memo.get(&v) {
            return *n;
        }
        if memo.len() >= MAX_COPIED || v <= NONE {
            return v;
        }
        match self.obj(v).clone() {
            Obj::Module(m) => {
                let id = self.alloc(Obj::Unknown);
                memo.insert(v, id);
                let mut copy = (*m).clone();
                // (Copied in the order the originals were made, so that the copies keep it.)
                let names: Vec<Name> = (self.attrs_in_creation_order(&m.attrs).into_iter())
                    .map(|(n, _)| n)
                    .collect();
                for n in names {
                    if let Some(vals) = copy.attrs.get(&n).cloned() {
                        let copied = vals.iter().map(|x| self.copy_obj(*x, memo)).collect();
                        copy.attrs.insert(n, copied);
                    }
                }
                copy.children = (m.children.iter())
                    .map(|x| self.copy_obj(*x, memo))
                    .collect();
                *self.obj_mut(id) = Obj::Module(Box::new(copy));
                id
            }
            Obj::Tensor(t) => {
                // A tensor with storage of its own and no history; a parameter stays a leaf
                // that requires grad.
                let id = self.alloc(Obj::Unknown);
                let mut fresh = TensorObj::fresh(id, t.grad, t.known, t.origin);
                fresh.leaf = t.leaf;
                *self.obj_mut(id) = Obj::Tensor(fresh);
                memo.insert(v, id);
                // (A parameter's copy is a parameter, frozen where the original is: what the
                // copy's layers save of it, and a write into it, are those of a parameter.)
                if self.parameters.contains(&v) {
                    self.parameters.insert(id);
                    if self.frozen.contains(&v) {
                        self.frozen.insert(id);
                    }
                }
                id
            }
            Obj::Seq(items) => {
                let id = self.alloc(Obj::Unknown);
                memo.insert(v, id);
                let items: Vec<Vals> = (items.iter())
                    .map(|vals| vals.iter().map(|x| self.copy_obj(*x, memo)).collect())
                    .collect();
                *self.obj_mut(id) = Obj::Seq(items);
                if self.dict_objs.contains(&v) {
                    self.dict_objs.insert(id);
                }
                if self.exact_seqs.contains(&v) {
                    self.exact_seqs.insert(id);
                }
                id
            }
            _ => v,
        }
    }
}
