//! Calls that give a module new parameter objects, so that what an optimizer built before holds
//! is no longer what the module trains: `copy.deepcopy` of a module (a new module tree with
//! parameters and buffers of its own) and `weight_norm` (new parameters in place of its weight).
//! (Left to [`Interp::opaque_call`], a module passed to an unseen function stays itself, so
//! `best = copy.deepcopy(model)` would be `model`, and `model = copy.deepcopy(best)` after an
//! optimizer was built would not be seen to replace the parameters it holds: IP403.)

use super::*;

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
    /// `original1`), so the parameter an optimizer built before holds is no longer used. The
    /// module comes back as a new object holding a new leaf as its weight (torch changes it in
    /// place; a new object lets `model.head = weight_norm(model.head)` after the optimizer was
    /// built be seen replacing what it holds: IP403). (`spectral_norm` keeps the parameter
    /// object, as `weight_orig` or `original`: not modelled, nothing to report.)
    pub(super) fn weight_norm(&mut self, args: &Args, call: Span) -> Option<Vals> {
        let (first, _) = args.positional.first()?;
        let name = (args.named_or_at(self.intern("name"), 1))
            .and_then(|v| match v.as_slice() {
                [s] => match self.obj(*s) {
                    Obj::Str(n) => Some(*n),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or(known::WEIGHT);
        let mut out = Vals::new();
        for m in first.clone() {
            let Obj::Module(module) = self.obj(m).clone() else {
                out.push(m);
                continue;
            };
            if !module.attrs.contains_key(&name) {
                out.push(m);
                continue;
            }
            let mut copy = (*module).clone();
            let weight = self.new_leaf(true, call);
            copy.attrs.insert(name, smallvec![weight]);
            out.push(self.alloc(Obj::Module(Box::new(copy))));
        }
        Some(out)
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
                for vals in copy.attrs.values_mut() {
                    *vals = vals.iter().map(|x| self.copy_obj(*x, memo)).collect();
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
