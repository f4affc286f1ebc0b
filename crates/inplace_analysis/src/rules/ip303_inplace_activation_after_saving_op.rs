//! # IP303 inplace-activation-after-saving-op
//!
//! **What it finds.** An activation built or called with `inplace=True` (`nn.ReLU(inplace=True)`,
//! `nn.LeakyReLU(0.1, True)`, `F.relu(x, inplace=True)`, `nn.SiLU(inplace=True)`, ...) whose input
//! is a tensor that the op before it saved: the output of `nn.Sigmoid()`, `nn.Tanh()`,
//! `torch.exp`, `softmax`, or an input saved by `gelu`, `x * w`, .... It follows modules through
//! `nn.Sequential(...)` and through attributes set in `__init__` and used in `forward`.
//! After `nn.Linear`, `nn.Conv*` or `nn.BatchNorm*` an in-place activation is safe: those save
//! their input, not their output.
//!
//! **Why it breaks.** The in-place activation overwrites the saved tensor and bumps its version;
//! backward raises (form ③). The culprit is the `inplace=True` argument.
//!
//! **Runtime message** (raised at `backward()`, torch 2.15): `one of the variables needed for
//! gradient computation has been modified by an inplace operation: [torch.FloatTensor [2]],
//! which is output 0 of Sigmoid, is at version 1; expected version 0 instead. ...`
//!
//! **Example**
//! ```python
//! net = nn.Sequential(nn.Sigmoid(), nn.ReLU(inplace=True))   # IP303 on inplace=True
//! net(x).sum().backward()                                     # raises here
//! ```
//!
//! **Fix.** `inplace=False` (the default).
//!
//! **Fix safety.** *Safe*: the activation computes the same values into new memory.

use super::{form3_related, Ctx, Related, Trigger};
use crate::engine::model::{Save, Write, WriteKind};
use crate::finding::{Applicability, Finding, Severity};
use crate::fix;
use crate::syntax::NodeExt;
use crate::Rule;

pub(crate) fn finding(ctx: &Ctx<'_>, w: &Write, save: &Save, t: &Trigger) -> Finding {
    let mut related = form3_related(ctx, w, save, t);
    let call = match w.kind {
        WriteKind::InplaceModule { call } => call,
        _ => w.site,
    };
    if !call.contains(w.range) {
        related.insert(
            1,
            Related {
                range: call,
                message: "the in-place activation runs here".into(),
            },
        );
    }
    let what = if save.output {
        "the output of"
    } else {
        "an input saved by"
    };
    // The activation as written: its constructor (`nn.ReLU(inplace=True)`) or the functional call.
    let activation = ctx
        .node(w.range)
        .and_then(|kw| kw.parent())
        .and_then(|args| args.parent())
        .filter(|c| c.k() == "call")
        .map(|c| ctx.snippet(crate::finding::TextRange::of(c)))
        .unwrap_or_else(|| ctx.snippet(call));
    Finding {
        rule: Rule::InplaceActivationAfterSavingOp,
        severity: Severity::Error,
        range: w.range,
        message: format!(
            "`{activation}` overwrites {what} `{}` (line {}) in place, which its backward needs; {}",
            save.op,
            ctx.line(save.range),
            t.clause(ctx)
        ),
        related,
        fix: fix::inplace_false(ctx, w.range, Applicability::Safe),
    }
}
