//! The abstract domain the interpreter computes over.
//!
//! * [`value`]: objects (tensors, modules, optimizers, functions, classes, containers) and the
//!   three-valued facts about them; a name maps to a small *set* of objects.
//! * [`layered`]: the heap and the autograd graph, as a frozen base shared by every scope that
//!   starts from the module's final state, plus what one scope adds and changes.
//! * [`graph`]: autograd history: nodes and the saves each op made.
//! * [`state`]: the flow-sensitive state (environment, live saves, clobbered saves, stale names,
//!   parameters held by optimizers) and how two paths join.

pub(crate) mod fingerprint;
pub(crate) mod graph;
pub(crate) mod layered;
pub(crate) mod state;
pub(crate) mod value;

pub(crate) use graph::{GraphNode, NodeId, OpLabel, Save, SaveId};
pub(crate) use layered::Layered;
pub(crate) use state::{Binding, Env, Slot, State};
pub(crate) use value::*;
