//! # IP102 out-arg-requires-grad
//!
//! **What it finds.** A torch function called with `out=` (`torch.mul(a, 2, out=buf)`,
//! `torch.cat(parts, out=buf)`, `torch.arange(n, out=self.freq)`) while grad mode is on and one
//! of its tensors requires grad: an input, or the `out=` tensor itself (a parameter).
//!
//! **Why it breaks.** An `out=` call writes its result into memory it was given; autograd has no
//! way to record how that memory came to hold it, so it refuses the call outright, before
//! anything is written.
//!
//! **Runtime message** (raised at the call itself, torch 2.15; the op is named, `aten::arange()`
//! for a factory):
//! `RuntimeError: mul(): functions with out=... arguments don't support automatic
//! differentiation, but one of the arguments requires grad.`
//! The op named is the one that writes `out=`, not always the function called: `div()` for
//! `F.normalize`, `cat()` for `torch.hstack`, `pow()` for `torch.square` (the op table measures
//! each function with torch). A few functions fill `out=` without refusing and record no
//! derivative for it (`torch.softmax`, `torch.log_softmax`, `torch.diag`): reported as a warning,
//! since only a `backward()` through the result raises (`derivative for aten::softmax is not
//! implemented`). Composites that record a copy autograd follows (`torch.tensordot`,
//! `torch.inner`, `torch.linalg.norm`) are not reported.
//!
//! **Example**
//! ```python
//! w = torch.randn(3, requires_grad=True)
//! buf = torch.empty(3)
//! torch.mul(w, 2, out=buf)   # IP102
//! ```
//!
//! **Fix.** To compute a value autograd follows into the same memory, copy the result in:
//! `buf.copy_(torch.mul(w, 2))` (autograd records a `copy_`; every name of `buf` sees the
//! values, as with `out=`). To fill a parameter (an initialisation), copy into it under
//! `with torch.no_grad():`: `w.copy_(torch.arange(n))`. (`out=` itself is no fix there: a factory
//! called with `out=` turns the parameter's `requires_grad` off even under `no_grad`, measured
//! with torch 2.15 for `arange`, `zeros`, `ones`, `full`, `linspace` and `rand`.)
//!
//! **Fix safety.** Both are *unsafe*: they make the write succeed, which changes what the
//! program does from then on (the buffer now carries the graph of what was copied in; the
//! parameter gets the values). No fix when the `out=` tensor itself requires grad and is no
//! parameter: a write into it can clobber what autograd saved of it.

use super::{write_of, write_related, RuleImpl};
use crate::events::Event;
use crate::exec::UnitOutput;
use crate::finding::{Finding, Severity};
use crate::fix;
use crate::ir::Span;
use crate::ops::OutRaises;
use crate::registry::Rule;
use crate::render::RenderCtx;

/// What an op called with `out=` raises when an argument requires grad, after `op(): `
/// (torch 2.15).
pub const OUT_ARG_MESSAGE: &str = "functions with out=... arguments don't support automatic \
     differentiation, but one of the arguments requires grad.";

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::OutArgRequiresGrad,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::OutArgRefused { write, .. } => Some(write_of(u, *write)?.range),
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let Event::OutArgRefused {
        write,
        writes_grad,
        op,
    } = ev
    else {
        return None;
    };
    let w = ctx.write(*write);
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    let fix = if w.into_leaf {
        fix::write_under_no_grad(ctx, w)
    } else if !writes_grad {
        fix::out_arg_copied(ctx, w)
    } else {
        None
    };
    // (The op table measured inputs that require grad; an `out=` tensor that requires grad is
    // refused at the call all the same, by the same op.)
    let measured = crate::ops::table()
        .out_arg(ctx.name(*op))
        .filter(|m| !writes_grad || m.raises == OutRaises::Call);
    let which = if *writes_grad {
        "the tensor it writes"
    } else {
        "a tensor it reads"
    };
    let snippet = ctx.snippet(w.site);
    let named = |m: &crate::ops::OutArg| m.op.clone();
    let (severity, message) = match measured {
        Some(m) if m.raises == OutRaises::Backward => (
            Severity::Warning,
            format!(
                "`{snippet}` passes `out=` while {which} requires grad; torch fills `out=` \
                 but records no derivative for it: a `backward()` through the result raises: \
                 derivative for {} is not implemented",
                named(m).unwrap_or_else(|| out_op(ctx.text(w.site)))
            ),
        ),
        _ => (
            Severity::Error,
            format!(
                "`{snippet}` passes `out=` while {which} requires grad; it raises here: {}(): \
                 {OUT_ARG_MESSAGE}",
                measured
                    .and_then(named)
                    .unwrap_or_else(|| out_op(ctx.text(w.site))),
            ),
        ),
    };
    Some(Finding {
        rule: Rule::OutArgRequiresGrad,
        severity,
        range: ctx.range(w.range)?,
        message,
        related,
        fix,
        alternatives: Vec::new(),
    })
}

/// The op as torch names it in the error when the op table has not measured it: `mul` for
/// `torch.mul(...)`, `aten::arange` for a factory.
fn out_op(call: &str) -> String {
    let callee = call.split('(').next().unwrap_or_default();
    let name = callee.rsplit('.').next().unwrap_or_default().trim();
    if crate::ops::FACTORIES.contains(&name) {
        format!("aten::{name}")
    } else {
        name.to_string()
    }
}
