//! A fingerprint of what a value is, independent of where its objects sit in the heap: a
//! function unit read a global of the module's final state, and can be reused after the module
//! ran again if that global's value has the same fingerprint. Objects are numbered in the order
//! a bounded walk meets them, so equal structures (with equal sharing) hash equal.

use super::{GraphNode, Obj, ObjId, Save, Vals};
use crate::ir::{Name, Span};
use rustc_hash::FxHashMap;
use std::hash::{Hash, Hasher};

/// Most objects a fingerprint walks; beyond, the rest of the structure is not distinguished.
const MAX_OBJECTS: usize = 512;

/// The heap, graph and loose attributes a fingerprint reads.
pub(crate) struct View<'a> {
    pub heap: &'a [Obj],
    pub nodes: &'a [GraphNode],
    pub saves: &'a [Save],
    pub loose_attrs: &'a FxHashMap<(ObjId, Name), ObjId>,
    /// The values of integer constants (plain objects otherwise).
    pub int_values: &'a FxHashMap<ObjId, i64>,
}

struct Walk<'a, 'v> {
    view: &'a View<'v>,
    /// Object -> its number in walk order.
    seen: FxHashMap<ObjId, u32>,
    /// Objects met but not yet hashed.
    queue: Vec<ObjId>,
    /// Graph nodes walked.
    nodes_seen: FxHashMap<u32, u32>,
    h: xxhash_rust::xxh3::Xxh3,
}

impl Walk<'_, '_> {
    /// The number of an object, queueing it when new.
    fn id(&mut self, o: ObjId) -> u32 {
        let n = self.seen.len() as u32;
        *self.seen.entry(o).or_insert_with(|| {
            self.queue.push(o);
            n
        })
    }

    fn put<T: Hash>(&mut self, v: T) {
        let mut f = rustc_hash::FxHasher::default();
        v.hash(&mut f);
        self.h.update(&f.finish().to_le_bytes());
    }

    fn vals(&mut self, v: &Vals) {
        self.put(v.len());
        for o in v {
            let n = self.id(*o);
            self.put(n);
        }
    }

    fn span(&mut self, s: Span) {
        self.put((s.item, s.rel));
    }

    fn node(&mut self, n: u32) {
        let k = self.nodes_seen.len() as u32;
        let (num, new) = match self.nodes_seen.get(&n) {
            Some(x) => (*x, false),
            None => {
                self.nodes_seen.insert(n, k);
                (k, true)
            }
        };
        self.put(num);
        if !new || self.nodes_seen.len() > MAX_OBJECTS {
            return;
        }
        let Some(node) = self.view.nodes.get(n as usize) else {
            return;
        };
        let node = node.clone();
        for s in &node.saves {
            if let Some(save) = self.view.saves.get(*s as usize) {
                let st = self.id(save.storage);
                self.put((st, save.output, save.op));
                self.span(save.range);
                if let Some(g) = save.assumes {
                    self.span(g.at);
                    self.put(g.non_data);
                }
            }
        }
        for p in &node.parents {
            self.node(*p);
        }
    }

    fn object(&mut self, o: ObjId) {
        let Some(obj) = self.view.heap.get(o as usize) else {
            self.put(u32::MAX);
            return;
        };
        match obj {
            Obj::Unknown => self.put(0u8),
            // The constants (True, False, None, any number) are told apart; other objects are
            // numbers too.
            Obj::Other => self.put((
                1u8,
                o.min(super::value::NONE + 1),
                self.view.int_values.get(&o).copied(),
            )),
            Obj::Str(n) => self.put((12u8, *n)),
            Obj::Tensor(t) => {
                self.put((2u8, t.counter, t.grad, t.leaf, t.view_of_leaf, t.known));
                self.put(t.numpy.map(|n| (n.at.item, n.at.rel, n.from_tensor)));
                let st = self.id(t.storage);
                self.put(st);
                self.span(t.origin);
                self.put(t.view_origin.map(|v| (v.item, v.rel)));
                self.put(t.refused_view.map(|m| (m.op, m.at.item, m.at.rel, m.grad)));
                match t.node {
                    Some(n) => self.node(n),
                    None => self.put(u32::MAX),
                }
                if let Some(g) = t.grad_tensor {
                    let g = self.id(g);
                    self.put(g);
                }
                if let Some(g) = t.grad_if {
                    self.span(g.at);
                    self.put(g.non_data);
                }
            }
            Obj::Path(p) => self.put((3u8, *p)),
            Obj::Record(fields) => {
                let fields: Vec<Name> = fields.to_vec();
                self.put((15u8, fields));
            }
            Obj::Module(m) => {
                self.put((4u8, m.class, m.local.as_ref().map(|k| k.loc)));
                self.put(m.inplace.map(|i| (i.arg, i.call)));
                self.span(m.origin);
                let mut attrs: Vec<(&Name, &Vals)> = m.attrs.iter().collect();
                attrs.sort_by_key(|(n, _)| **n);
                for (n, v) in attrs {
                    self.put(*n);
                    let v = v.clone();
                    self.vals(&v);
                }
                let (children, hooks) = (m.children.clone(), m.hooks.clone());
                let pre_hooks = m.pre_hooks.clone();
                self.vals(&children.into_iter().collect());
                self.vals(&hooks.into_iter().collect());
                self.vals(&pre_hooks.into_iter().collect());
            }
            Obj::Optimizer { params, origin } => {
                let (params, origin) = (params.clone(), *origin);
                self.put(5u8);
                self.vals(&params);
                self.span(origin);
            }
            Obj::Func(d) => self.put((6u8, *d)),
            Obj::Class(k) => {
                self.put((7u8, k.name, k.loc, k.span));
                let mut methods: Vec<_> = k.methods.iter().map(|(n, d)| (*n, *d)).collect();
                methods.sort_by_key(|(n, _)| *n);
                self.put(methods);
                let bases: Vals = k.bases.iter().copied().collect();
                self.vals(&bases);
            }
            Obj::Bound(s, d) => {
                let (s, d) = (*s, *d);
                let s = self.id(s);
                self.put((8u8, s, d));
            }
            Obj::Partial {
                func,
                positional,
                keywords,
            } => {
                let (func, positional, keywords) =
                    (func.clone(), positional.clone(), keywords.clone());
                self.put((13u8, positional.len(), keywords.len()));
                self.vals(&func);
                for p in &positional {
                    self.vals(p);
                }
                for (n, v, s) in &keywords {
                    self.put(*n);
                    self.vals(v);
                    self.span(*s);
                }
            }
            Obj::Seq(items) => {
                let items = items.clone();
                self.put((9u8, items.len()));
                for i in &items {
                    self.vals(i);
                }
            }
            Obj::Params { owners, tensors } => {
                let (owners, tensors) = (owners.clone(), tensors.clone());
                self.put(10u8);
                self.vals(&owners);
                self.vals(&tensors);
            }
            Obj::GradCtx(g) => {
                let g = match g {
                    super::GradCtx::NoGrad => 0u8,
                    super::GradCtx::EnableGrad => 1,
                    super::GradCtx::Set(false) => 2,
                    super::GradCtx::Set(true) => 3,
                    super::GradCtx::Anomaly => 4,
                    super::GradCtx::Inference => 5,
                    super::GradCtx::AllowMutation => 6,
                    super::GradCtx::Autocast(false) => 7,
                    super::GradCtx::Autocast(true) => 8,
                };
                self.put((11u8, g));
            }
            Obj::Dist(d) => {
                let (kind, first, second, origin) =
                    (d.kind, d.first.clone(), d.second.clone(), d.origin);
                self.put((16u8, kind, d.lazy_first));
                self.vals(&first);
                self.vals(&second);
                self.span(origin);
            }
        }
        // Attributes set on objects that are not modelled (`torch.backends.x = ...`).
        let mut loose: Vec<(Name, ObjId)> = self
            .view
            .loose_attrs
            .iter()
            .filter(|((owner, _), _)| *owner == o)
            .map(|((_, n), v)| (*n, *v))
            .collect();
        loose.sort();
        for (n, v) in loose {
            let v = self.id(v);
            self.put((n, v));
        }
    }
}

/// The fingerprint of a value (a set of alternatives).
pub(crate) fn fingerprint(view: &View<'_>, vals: &Vals) -> u128 {
    let mut w = Walk {
        view,
        seen: FxHashMap::default(),
        queue: Vec::new(),
        nodes_seen: FxHashMap::default(),
        h: xxhash_rust::xxh3::Xxh3::new(),
    };
    w.vals(vals);
    let mut k = 0;
    while k < w.queue.len() && k < MAX_OBJECTS {
        let o = w.queue[k];
        w.object(o);
        k += 1;
    }
    w.put(w.queue.len().min(MAX_OBJECTS + 1));
    w.h.digest128()
}
