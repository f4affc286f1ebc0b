//! # IP301 saved-output-inplace
//!
//! **What it finds.** An in-place write into the *output* of an op whose backward reads that
//! output, when a later `backward()` (or a graph returned from the function) goes through it.
//! Ops that save their output (measured on torch 2.15): `exp`, `exp2`, `expm1`, `sigmoid`,
//! `tanh`, `relu`, `softmax`, `log_softmax`, `sqrt`, `rsqrt`, `reciprocal`, `torch.pow(2, t)`,
//! `prod`, `norm`, `max`, ... in every spelling (`torch.sigmoid(x)`, `x.sigmoid()`,
//! `F.sigmoid`, `nn.Sigmoid()`). The write can go through any name or view of that storage,
//! and `torch.no_grad()` or `.detach()` do not help: both still bump the version counter.
//!
//! **Why it breaks.** The op recorded the output's version when it saved it; the write bumps
//! the version; backward compares them and raises (form ③), far from the culprit.
//!
//! **Runtime message** (raised at `backward()`, torch 2.15):
//! `RuntimeError: one of the variables needed for gradient computation has been modified by an
//! inplace operation: [torch.FloatTensor [2]], which is output 0 of Sigmoid, is at version 1;
//! expected version 0 instead. Hint: enable anomaly detection to find the operation that failed
//! to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).`
//! Torch before 2.x names the backward node instead (`output 0 of SigmoidBackward0`).
//!
//! **Example**
//! ```python
//! y = torch.sigmoid(x)
//! y += 1                  # IP301
//! y.sum().backward()      # raises here
//! ```
//!
//! **Fix.** Write out of place: `y = y + 1`, `y = y.mul(2)`, `h = torch.relu(h)`. Where no
//! one-line rewrite exists (subscript writes `y[mask] = 0`, `copy_`, `zero_`, `out=y`, writes
//! through a view, writes under `torch.no_grad()`): write into a copy, `y = y.clone()` on the
//! line before the write, or before the statement that takes the view (`e = e.clone()` above
//! `row = e[0]`), or before the outermost `with torch.no_grad():` block (so the copy keeps its
//! history). In a forward hook that writes its `output` argument, the hook then ends with
//! `return output`: a hook's result replaces the module's output, and the rebound name alone
//! would drop what the hook does (a hook that already returns something gets no fix).
//!
//! **Fix safety.** *Safe* when no other name or view shares the written tensor (the name was
//! bound here by an assignment that made no alias, and the new value is bound to it); *unsafe*
//! otherwise, since the other names no longer see the write: an alias, a view, and a tensor
//! that came in as a parameter (the caller, or the module a forward hook serves, saw the
//! write). A copy is always *unsafe* for that reason.

use super::{clobber, form3_related, form3_severity, out_of_place, trigger_clause, RuleImpl};
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::Finding;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::SavedOutputInplace,
    claims,
    render,
    form3_rank: Some(1),
};

/// A write that is no step and no in-place activation, clobbering a saved output.
fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    let (w, save, _) = clobber(ev, u)?;
    let plain = !matches!(
        w.kind,
        WriteKind::Step | WriteKind::InplaceModule { .. } | WriteKind::InplaceFunctional
    );
    (plain && save.output).then_some(w.range)
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    let (w, save, t) = clobber(ev, ctx.unit)?;
    let applicability = super::rewrite_applicability(w);
    Some(Finding {
        rule: Rule::SavedOutputInplace,
        severity: form3_severity(save),
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes in place into the output of `{}` ({}), which its backward needs; {}",
            ctx.snippet(w.site),
            ctx.op(save.op),
            ctx.line(save.range),
            trigger_clause(ctx, &t, save)
        ),
        related: form3_related(ctx, w, save, &t),
        // (A copy before a chain of in-place calls is saved and written by the chain alike.)
        fix: match crate::fix::chain_all_out_of_place(ctx, w) {
            Some(chain) => chain,
            None => out_of_place(ctx, w, applicability)
                .or_else(|| {
                    crate::fix::fresh_result_out_of_place(ctx, w, save.range, applicability)
                })
                .or_else(|| crate::fix::loop_list_out_of_place(ctx, w))
                .or_else(|| crate::fix::lambda_result_out_of_place(ctx, w, applicability)),
        }
        .and_then(|fix| with_copies_of_saved_reads(ctx, ev, fix)),
        alternatives: Vec::new(),
    })
}

/// The same write also clobbers what an op in the value it stores saved of the written
/// tensor (`out[:, i:i + 1].add_(F.relu(conv(out[:, i - 1:i])))` on a ReLU's output): a copy of
/// the output alone leaves the conv's saved row stale, so the op reads a copy too.
fn with_copies_of_saved_reads(
    ctx: &RenderCtx<'_>,
    ev: &Event,
    mut fix: crate::finding::Fix,
) -> Option<crate::finding::Fix> {
    let Event::Clobber { write, save, .. } = *ev else {
        return Some(fix);
    };
    let w = ctx.unit.writes.get(write as usize)?;
    // (A rewrite of the write itself stores without writing: nothing saved goes stale.)
    let at = ctx.range(w.range)?;
    if (fix.edits.iter()).any(|e| e.range.start < at.end && at.start < e.range.end) {
        return Some(fix);
    }
    let others = (ctx.unit.events.iter()).filter_map(|other| match *other {
        Event::Clobber {
            write: ow,
            save: os,
            ..
        } if ow == write && os != save => Some(os),
        _ => None,
    });
    let mut inputs: Vec<crate::domain::SaveId> = others
        .filter(|os| ctx.unit.saves.get(os).is_some_and(|s| !s.output))
        .collect();
    inputs.sort_unstable();
    inputs.dedup();
    let Some(reads) = (inputs.iter())
        .find_map(|sid| crate::fix::clone_reads_in_value(ctx, w, (*sid, ctx.unit.saves.get(sid)?)))
    else {
        return Some(fix);
    };
    for e in reads.edits {
        if !fix.edits.contains(&e) {
            fix.edits.push(e);
        }
    }
    fix.edits.sort_by_key(|e| (e.range.start, e.range.end));
    fix.title = format!("{}, and {}", fix.title, lowercase_first(&reads.title));
    Some(fix)
}

fn lowercase_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}
