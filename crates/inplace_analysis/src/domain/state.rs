//! The flow-sensitive state, and how two paths join.

use super::graph::{NodeId, SaveId};
use super::value::{ObjId, Vals, UNKNOWN};
use crate::events::{Event, WriteId};
use crate::ir::{Name, Span};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

pub(crate) type Env = FxHashMap<Name, Vals>;

/// Where a name was last bound by a plain `name = expr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Binding {
    /// The assignment.
    pub stmt: Span,
    /// Its right-hand side when that is a name, attribute or subscript (an alias is made there).
    pub alias_of: Option<Span>,
}

/// A place in a container object: a list's or dict's position, a module's attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    At(u32),
    Attr(Name),
}

#[derive(Debug, Clone, Default)]
pub(crate) struct State {
    pub env: Env,
    pub bound_at: FxHashMap<Name, Binding>,
    /// Saves still needed by a backward that may run, per storage.
    pub live: FxHashMap<ObjId, SmallVec<[SaveId; 4]>>,
    /// Saves an in-place write has clobbered, and the writes.
    pub clobbered: FxHashMap<SaveId, SmallVec<[WriteId; 2]>>,
    /// Saves a write through `.data` changed without autograd noticing, and the writes with
    /// whether they wrote a leaf: silently wrong gradients once a backward reads them (IP401).
    pub data_clobbered: FxHashMap<SaveId, SmallVec<[(WriteId, bool); 1]>>,
    /// Results of ops written through `.data`: the write is a step of the forward pass autograd
    /// never sees, so a backward through that result computes silently wrong gradients.
    pub data_written: FxHashMap<NodeId, SmallVec<[(WriteId, bool); 1]>>,
    /// Names whose tensor an in-place write changed under them (IP402).
    pub stale: FxHashMap<Name, SmallVec<[WriteId; 1]>>,
    /// Places in a container (a list's or dict's slot, a module's attribute) that hold a
    /// tensor an in-place write changed through another way to it (IP402).
    pub stale_slots: FxHashMap<(ObjId, Slot), SmallVec<[WriteId; 1]>>,
    /// Parameter (or module) object -> optimizer object holding it.
    pub held: FxHashMap<ObjId, ObjId>,
    /// Storages of parameters whose `.grad` is surely `None` (zeroed by `zero_grad()` and not
    /// reached by a backward since): an optimizer's `step()` skips them.
    pub gradless: FxHashSet<ObjId>,
    /// IP403 events waiting for the optimizer that holds the orphan to be used again.
    pub orphaned: FxHashMap<ObjId, SmallVec<[Event; 1]>>,
    /// Control never reaches here (after return, raise, break, continue).
    pub dead: bool,
}

/// Most alternatives kept per key when paths merge. Nested loops and branches allocate fresh
/// objects on every path, so without a bound the sets grow exponentially with nesting (a real
/// checkpoint-conversion script of transformers took minutes).
pub(crate) const MAX_ALTERNATIVES: usize = 64;

/// Adds `from`'s alternatives to `into`'s. A set that would exceed [`MAX_ALTERNATIVES`] becomes
/// `overflow` when one is given (the value is unknown), else keeps the first ones.
fn union_into<K: Clone + Eq + std::hash::Hash, A: smallvec::Array>(
    into: &mut FxHashMap<K, SmallVec<A>>,
    from: &FxHashMap<K, SmallVec<A>>,
    overflow: Option<A::Item>,
) where
    A::Item: PartialEq + Clone,
{
    for (k, vs) in from {
        let entry = into.entry(k.clone()).or_default();
        for v in vs {
            if entry.contains(v) {
                continue;
            }
            if entry.len() >= MAX_ALTERNATIVES {
                if let Some(o) = &overflow {
                    entry.clear();
                    entry.push(o.clone());
                }
                break;
            }
            entry.push(v.clone());
        }
    }
}

impl State {
    /// How much a copy or a join of this state costs, in steps.
    pub fn weight(&self) -> u64 {
        let n = self.env.len() + self.live.len() + self.clobbered.len() + self.stale.len();
        1 + (n + self.stale_slots.len()) as u64 / 8
    }

    /// Merge another path into this one.
    pub fn join(&mut self, other: &State) {
        if other.dead {
            return;
        }
        if self.dead {
            *self = other.clone();
            return;
        }
        union_into(&mut self.env, &other.env, Some(UNKNOWN));
        union_into(&mut self.live, &other.live, None);
        union_into(&mut self.clobbered, &other.clobbered, None);
        union_into(&mut self.data_clobbered, &other.data_clobbered, None);
        union_into(&mut self.data_written, &other.data_written, None);
        union_into(&mut self.stale, &other.stale, None);
        union_into(&mut self.stale_slots, &other.stale_slots, None);
        for (k, v) in &other.bound_at {
            self.bound_at.entry(*k).or_insert(*v);
        }
        // Without a grad only where no path gave it one.
        self.gradless.retain(|s| other.gradless.contains(s));
        for (k, v) in &other.held {
            self.held.entry(*k).or_insert(*v);
        }
        for (k, v) in &other.orphaned {
            for e in v {
                self.orphan(*k, e.clone());
            }
        }
    }

    /// Keep an event until optimizer `opt` is used again; once per place.
    /// Forget IP403 events still waiting (a called function's names they were about are gone).
    pub fn lapse_orphans(&mut self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        for list in self.orphaned.values_mut() {
            list.retain(|e| !events.contains(e));
        }
        self.orphaned.retain(|_, list| !list.is_empty());
    }

    pub fn orphan(&mut self, opt: ObjId, e: Event) {
        let list = self.orphaned.entry(opt).or_default();
        if !list.contains(&e) {
            list.push(e);
        }
    }

    pub fn dead() -> State {
        State {
            dead: true,
            ..State::default()
        }
    }
}
