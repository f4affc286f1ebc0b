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
//! **Fix safety.** *Safe*: the activation computes the same values into new memory. Where
//! `inplace` comes from a setting (`inplace=cfg.inplace_act`), replacing it is *unsafe*: the
//! setting no longer decides. Where the layer is built in an imported module's code, the fix
//! is in this file: the call passes it a copy (`e = e.clone()` before `logits = head(e)`),
//! *unsafe*: later reads of the name see the copy the layer wrote, as they saw the original.

use super::{clobber, form3_related, form3_severity, trigger_clause, RuleImpl};
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::{Applicability, Finding, Related};
use crate::fix;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::InplaceActivationAfterSavingOp,
    claims,
    render,
    form3_rank: Some(0),
};

/// An in-place activation (module or functional) clobbering a save.
fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    let (w, _, _) = clobber(ev, u)?;
    matches!(
        w.kind,
        WriteKind::InplaceModule { .. } | WriteKind::InplaceFunctional
    )
    .then_some(w.range)
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let (w, save, t) = clobber(ev, ctx.unit)?;
    let mut related = form3_related(ctx, w, save, &t);
    // The activation as written: its constructor (`nn.ReLU(inplace=True)`) or the call.
    let (call, activation) = match w.kind {
        WriteKind::InplaceModule { call, ctor } => (call, ctor),
        _ => (w.site, w.site),
    };
    if !call.contains(w.range) {
        if let Some(range) = ctx.range(call) {
            related.insert(
                1.min(related.len()),
                Related {
                    source: None,
                    range,
                    message: "the in-place activation runs here".into(),
                },
            );
        }
    }
    let what = if save.output {
        "the output of"
    } else {
        "an input saved by"
    };
    Some(Finding {
        rule: Rule::InplaceActivationAfterSavingOp,
        severity: form3_severity(save),
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` overwrites {what} `{}` ({}) in place, which its backward needs; {}",
            ctx.snippet(activation),
            ctx.op(save.op),
            ctx.line(save.range),
            trigger_clause(ctx, &t, save)
        ),
        related,
        // (A layer built in an imported module's code: the call here passes it a copy.)
        fix: match w
            .stmt
            .is_some_and(|s| crate::project::is_module_item(s.item))
        {
            // (Where the save was made in this file, before the call: one the module's code
            // makes of what it is given would save the copy.)
            true => (save.inner)
                .filter(|s| !crate::project::is_module_item(s.item))
                .and_then(|_| fix::clone_argument(ctx, w, true)),
            false => fix::inplace_false(ctx, w.range, Applicability::Safe),
        },
        alternatives: Vec::new(),
    })
}
