//! # IP402 clobbered-alias
//!
//! **What it finds.** An in-place write that changes a tensor which is later read through
//! *another name*: `y = x; y += 1; print(x)`; `h = torch.relu_(feat)` and then `feat` used
//! again (`torch.relu_` returns `feat` itself); an in-place activation inside a residual block
//! that overwrites the tensor the skip connection adds back (`identity = x;
//! x = self.relu(x)` with `nn.ReLU(inplace=True)`; `out += identity`). The finding is at the write;
//! the later read and the aliasing assignment are related locations.
//!
//! **Why it breaks.** Names are not values: `y = x` makes a second name for the same storage,
//! and an in-place op returns its input. The reader expects the old value and gets the new
//! one; autograd does not mind, so nothing raises and the numbers are silently wrong (form ④).
//!
//! **Runtime message.** None.
//!
//! **Example**
//! ```python
//! feat = backbone(x)
//! h = torch.relu_(feat)   # IP402: changes feat
//! aux = head(feat)        # reads the ReLU'd values
//! ```
//!
//! **Fix.** Copy where the alias is made (`y = x.clone()`), or write out of place
//! (`h = torch.relu(feat)`, `inplace=False`).
//!
//! **Fix safety.** *Unsafe*: the other name stops seeing the write, which is the intent but
//! changes the values the program computes.

use super::{write_related, Ctx, Related};
use crate::engine::model::{Write, WriteKind};
use crate::finding::{Applicability, Finding, Severity, TextRange};
use crate::fix;
use crate::Rule;

/// `bindings`: where the written-through name and the stale name were last bound; the alias
/// was made by the later one that assigns a plain name (`y = x`).
pub(crate) fn finding(
    ctx: &Ctx<'_>,
    w: &Write,
    name: &str,
    read: TextRange,
    bindings: &[TextRange],
) -> Finding {
    let mut related = vec![Related {
        range: read,
        message: format!("`{name}` is read here and sees the value written in place"),
    }];
    let bound = bindings
        .iter()
        .copied()
        .filter(|b| fix::insert_clone(ctx, *b, Applicability::Unsafe).is_some())
        .max();
    if let Some(b) = bound {
        related.push(Related {
            range: b,
            message: "the alias is made here: both names share one tensor".into(),
        });
    }
    write_related(ctx, w, &mut related);
    let fix = bound
        .and_then(|b| fix::insert_clone(ctx, b, Applicability::Unsafe))
        .or_else(|| match w.kind {
            WriteKind::Method(_)
            | WriteKind::TorchFn(_)
            | WriteKind::InplaceModule { .. }
            | WriteKind::InplaceFunctional => fix::out_of_place(ctx, w, Applicability::Unsafe),
            _ => None,
        });
    let through = match w.kind {
        WriteKind::InplaceModule { call } => ctx.snippet(call),
        _ => ctx.snippet(w.site),
    };
    // A module built with `inplace=True` clobbers where it is called.
    let range = match w.kind {
        WriteKind::InplaceModule { call } => call,
        _ => w.range,
    };
    Finding {
        rule: Rule::ClobberedAlias,
        severity: Severity::Warning,
        range,
        message: format!(
            "`{through}` writes in place into the tensor `{name}` also names; `{name}` is read later (line {}) and silently sees the new values",
            ctx.line(read)
        ),
        related,
        fix,
    }
}
