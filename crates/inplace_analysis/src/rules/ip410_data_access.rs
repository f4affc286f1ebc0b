//! # IP410 data-access (opt-in)
//!
//! **What it finds.** A use of `.data` that cannot corrupt a gradient where it stands: a read
//! (`x.data.numpy()`, `snapshot = x.data.clone()`), `x.data = v` (which swaps the storage while
//! autograd keeps what it saved: measured, the gradient is unchanged), and a write into a
//! tensor nothing saved for a backward that may still run (`layer.bias.data.fill_(0)` at
//! initialisation, `p.data -= lr * p.grad` after `backward()`). Not selected by default: select
//! it (`--select IP410`, `select = ["IP410"]`, or `ALL`) to move a code base off `.data`.
//!
//! **Why it matters.** Nothing is wrong yet, but `.data` hides the tensor from autograd's version
//! counter: the day the same line runs where a backward still reads the tensor, the gradient is
//! silently wrong (IP401) instead of an error. `.detach()` and `torch.no_grad()` do the same job
//! and keep the check.
//!
//! **Runtime message.** None.
//!
//! **Example**
//! ```python
//! snapshot = x.data.clone()        # IP410: .detach() keeps the version counter
//! layer.bias.data.fill_(0.0)       # IP410: under torch.no_grad(), without .data
//! ```
//!
//! **Fix.** Reads: `.detach()` (same memory, shared version counter). Writes: the write on the
//! tensor itself under `with torch.no_grad():`. `x.data = v`: none (no statement without
//! `.data` swaps a tensor's storage).
//!
//! **Fix safety.** `.detach()` on a read used directly in an expression is *safe*; where the
//! result is kept, and for writes, *unsafe* (the version counter then sees later writes, which
//! may turn a silent error into a loud one).

use super::{write_of, RuleImpl};
use crate::events::Event;
use crate::exec::UnitOutput;
use crate::ir::Span;
use crate::registry::Rule;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::DataAccess,
    claims,
    render: super::ip401_data_bypass::render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::DataWrite {
            write, live: false, ..
        } => Some(write_of(u, *write)?.range),
        Event::DataRead { attr, .. } => Some(*attr),
        _ => None,
    }
}
