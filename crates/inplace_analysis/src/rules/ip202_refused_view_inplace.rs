//! # IP202 refused-view-inplace
//!
//! **What it finds.** An in-place write, with grad mode on, into a view autograd refuses to
//! rebase:
//! - one of the views a function returning several made: `q, k, v = qkv.chunk(3, dim=-1)`
//!   then `q *= scale`; `x.split(2)`, `x.split([1, 3])`, `x.unbind(0)`, `torch.chunk(x, 2)`;
//!   the rows of `for row in x` (iterating over a tensor unbinds it); when the tensor split
//!   requires grad (a parameter, or anything computed from one), or the value written does.
//!   `tensor_split`, `hsplit`, `vsplit` and `unsafe_chunk` views may be written (measured);
//! - a view made under `torch.no_grad()` (`with torch.no_grad(): v = w[0]`), written after the
//!   block when the tensor viewed or the value written requires grad;
//! - an output of a layer with a full backward hook (`layer.register_full_backward_hook(f)`,
//!   Grad-CAM), or an input that requires grad inside its `forward`: torch wraps them in a
//!   custom Function's views (`nn.ReLU(inplace=True)` after a hooked layer raises at forward);
//! - an output of a custom `torch.autograd.Function` that its `forward` made as a view
//!   (`return out.view(...)`), written after `F.apply(...)` (a quantized linear layer's output
//!   masked in place), or that is one of its arguments returned as it is (`x *= 2.0; return x`
//!   without `ctx.mark_dirty(x)`: torch hands back a view of it) when any argument requires
//!   grad;
//! - and views of such a view (`q[0] += 1`, `q.view(-1).add_(1)`);
//! - in any grad mode, an expanded view (`x.unsqueeze(2).expand(b, n, k, c)`, `expand_as`,
//!   `torch.broadcast_to`) written by an op that computes from its values or copies a tensor in
//!   (`edge -= nbr`, `pe += x`, `e.relu_()`, `e.copy_(v)`); a scalar fill (`fill_`, `zero_`,
//!   `masked_fill_`) is allowed;
//! - in any grad mode, a tensor made under `torch.inference_mode()` (a block, or a function
//!   decorated with it: a rollout buffer, precomputed features), or a view of one, written
//!   outside inference mode;
//! - a write into a tensor that requires grad while views a function returning several made
//!   of it are kept (`rows = list(w)`, `a, b = x.chunk(2)`), when one of those views is then
//!   used by an op autograd records (`torch.norm(row)` after `opt.step()` wrote `w`): autograd
//!   refuses the view there (`... is a view and its base or another view of its base has been
//!   modified inplace`); reported at the write, with the use.
//!
//! **Why it breaks.** Autograd records an in-place write into a view by rebasing the view's
//! history onto its base. For one output of a multi-output view function it cannot do that
//! alone; for a view made while nothing was recorded it would have to guess whether the write
//! is meant to be tracked. It refuses the write (even on a leaf's view, with this message
//! rather than form ②'s). An expanded view repeats each element without copying it (a stride
//! of 0): a write computing every element from its old value would read values it has already
//! changed, so the kernel refuses it, autograd or not.
//!
//! **Runtime message** (raised at the write itself, torch 2.15):
//! `RuntimeError: Output 0 of Split is a view and is being modified inplace. This view is the
//! output of a function that returns multiple views. Such functions do not allow the output
//! views to be modified inplace. You should replace the inplace operation by an out-of-place
//! one.` (`SplitWithSizes`, `Unbind`, or the last view op for a view of one.) A view made under
//! `no_grad`, or a split's view of a tensor without grad written with a value that has it:
//! `RuntimeError: A view was created in no_grad mode and is being modified inplace with grad
//! mode enabled. ...` A hooked layer's input or output: `RuntimeError: Output 0 of
//! BackwardHookFunction is a view and is being modified inplace. This view was created inside a
//! custom Function ...` An expanded view: `RuntimeError: unsupported operation: more than one
//! element of the written-to tensor refers to a single memory location. Please clone() the
//! tensor before performing the operation.` An inference tensor: `RuntimeError: Inplace update
//! to inference tensor outside InferenceMode is not allowed.You can make a clone to get a
//! normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for
//! more details.`
//!
//! **Example**
//! ```python
//! q, k = (x @ w).chunk(2, dim=-1)
//! q *= 0.125          # IP202
//! ```
//!
//! **Fix.** Write out of place: `q = q * 0.125` (offered), `q = q.mul(0.125)`, `inplace=False`;
//! for a subscript write, a copy first (`q = q.clone()`). Rows of a parameter (an initialisation),
//! or a `no_grad` view of a tensor that requires grad (an update): the write under `with
//! torch.no_grad():` (offered), the view and the write then both unrecorded. A row of a loop over
//! a tensor: the loop counts its rows and the name is bound to the row taken by index (`for i,
//! (ch, m, s) in enumerate(zip(t[0], mean, std)): ch = t[0][i]`, offered), a view torch lets the
//! write go through into the tensor; not where the loop reads the row before the write or in it
//! (`row.div_(row.norm())`: the op would save what the write then changes; write the whole tensor
//! out of place, `z = z / z.norm(dim=1, keepdim=True)`), where an op saved the tensor, nor where
//! the loop binds a name of the tensor's spelling. A `no_grad` view of a plain tensor gets no fix:
//! rebinding the name changes nothing the tensor keeps; take the view outside the block. An
//! expanded view: a copy where it is made (`x.unsqueeze(2).expand(b, n, k, c).clone()`, offered),
//! or `repeat`. An inference tensor: out of place, or a copy (`.clone()`, a normal tensor) first.
//! A view a list or dict keeps too (`parts = [gen]` before `gen.scatter_(...)` in a loop) gets no
//! fix: the rewrite would leave the list the old tensor, and whether the list is meant to see the
//! writes is the code's choice (AllenNLP's CopyNet put the result in after the loop).
//!
//! A view used after a write into its tensor gets no fix: the views are to be taken again after
//! the write (or kept as the tensor itself, `[w]` rather than `list(w)`), which depends on where
//! the code keeps them.
//!
//! **Fix safety.** *Unsafe*: rewritten out of place, the tensor viewed no longer sees the write
//! (it never could while autograd recorded, but code after it may have read it expecting the
//! change); under `no_grad` the write succeeds unrecorded; through a row taken by index, the
//! tensor sees the write and autograd records it (not offered where an op saved the tensor, or
//! read the row before the write).

use super::{out_of_place, write_of, write_related, RuleImpl};
use crate::domain::{RefusedBy, RefusedView};
use crate::events::{Event, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::{Finding, Related, Severity};
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::RefusedViewInplace,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::RefusedViewWrite { write, .. } | Event::RefusedViewRead { write, .. } => {
            Some(write_of(u, *write)?.range)
        }
        _ => None,
    }
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    if let Event::RefusedViewRead { write, view, read } = ev {
        return render_read(ctx, *write, view, *read);
    }
    let Event::RefusedViewWrite { write, view, plain } = ev else {
        return None;
    };
    let w = ctx.write(*write);
    let made = ctx.snippet(view.at);
    let (whose, where_made) = match view.op {
        RefusedBy::Iteration => (
            format!("a row of the tensor iterated over ({})", ctx.line(view.at)),
            "iterating over this tensor unbinds it into views".to_string(),
        ),
        RefusedBy::NoGrad => (
            format!(
                "the view `{made}` made under `torch.no_grad()` ({}), with grad mode on",
                ctx.line(view.at)
            ),
            format!("`{made}` is a view made under `torch.no_grad()` here"),
        ),
        RefusedBy::CustomFunction(name) => (
            format!(
                "an output of the custom Function `{}` that is a view made inside its `forward` (`{made}`, {})",
                ctx.name(name),
                ctx.line(view.at)
            ),
            format!("`{made}` returns a view made inside the custom Function's `forward`"),
        ),
        RefusedBy::ReturnedInput(name) => (
            format!(
                "what the custom Function `{}` returns: its `forward` returns an argument as it is, which torch hands back as a view made inside the Function (`{made}`, {})",
                ctx.name(name),
                ctx.line(view.at)
            ),
            format!("`{made}` returns an argument of `forward` as it is: a view made inside the custom Function"),
        ),
        RefusedBy::BackwardHook => (
            format!(
                "an input or output of a layer with a full backward hook (`{made}`, {})",
                ctx.line(view.at)
            ),
            "the full backward hook registered here wraps the layer's inputs and outputs in a custom Function's views".to_string(),
        ),
        RefusedBy::Expand => (
            format!(
                "the expanded view `{made}` ({}), whose elements share memory",
                ctx.line(view.at)
            ),
            format!("`{made}` repeats elements without copying them (a stride of 0)"),
        ),
        RefusedBy::Inference => (
            format!(
                "a tensor made under `torch.inference_mode()` (`{made}`, {}), outside inference mode",
                ctx.line(view.at)
            ),
            format!("`{made}` makes an inference tensor here (inside `torch.inference_mode()`)"),
        ),
        _ => (
            format!("one of the views `{made}` returns ({})", ctx.line(view.at)),
            format!("`{made}` returns several views here"),
        ),
    };
    let mut related = Vec::new();
    if let Some(range) = ctx.range(view.at) {
        related.push(Related {
            source: None,
            range,
            message: where_made,
        });
    }
    // An in-place layer is reported where it is built: the runtime raises where it runs.
    if let WriteKind::InplaceModule { call, .. } = w.kind {
        if let (false, Some(range)) = (call.contains(w.range), ctx.range(call)) {
            related.push(Related {
                source: None,
                range,
                message: "the in-place layer runs here, and the runtime raises here".into(),
            });
        }
    }
    // (Where the view was made is said above, not again as "is a view".)
    write_related(ctx, &own_copy(w), &mut related);
    // The runtime names the split's node for its own outputs, the last view op otherwise (an
    // indexed write takes a view first: `Output 0 of Select`).
    let indexed = matches!(w.kind, WriteKind::Subscript { whole: false });
    let node = view
        .op
        .node()
        .filter(|_| !indexed && w.view_origin.is_none_or(|v| v == view.at))
        .unwrap_or("…");
    // (An in-place layer is named by its constructor, as IP303 does.)
    let writer = match w.kind {
        WriteKind::InplaceModule { ctor, .. } => ctx.snippet(ctor),
        _ => ctx.snippet(w.site),
    };
    let runtime = match view.op {
        RefusedBy::NoGrad => format!("{NO_GRAD_VIEW} {NO_GRAD_VIEW_REST}"),
        RefusedBy::BackwardHook => {
            format!("Output 0 of BackwardHookFunction {VIEW_MODIFIED} {CUSTOM_FUNCTION_VIEW}")
        }
        RefusedBy::CustomFunction(name) | RefusedBy::ReturnedInput(name) => format!(
            "Output 0 of {} {VIEW_MODIFIED} {CUSTOM_FUNCTION_VIEW}",
            ctx.name(name)
        ),
        RefusedBy::Expand => OVERLAP.to_string(),
        RefusedBy::Inference => INFERENCE.to_string(),
        _ if *plain => format!("{NO_GRAD_VIEW} {MULTI_VIEW}"),
        _ => format!("Output N of {node} {VIEW_MODIFIED} {MULTI_VIEW}"),
    };
    Some(Finding {
        rule: Rule::RefusedViewInplace,
        severity: Severity::Error,
        range: ctx.range(w.range)?,
        message: format!("`{writer}` writes in place into {whose}; it raises here: {runtime}"),
        related,
        fix: fix(ctx, w, view),
        alternatives: Vec::new(),
    })
}

/// A write into a tensor whose views a split kept (`rows = list(w)` before `opt.step()`), found
/// by a later op that uses one of the views: reported at the write, which made them unusable.
/// No fix: the views are to be taken again after the write (or the write made out of place),
/// which depends on where the code keeps them.
fn render_read(
    ctx: &RenderCtx<'_>,
    write: crate::events::WriteId,
    view: &RefusedView,
    read: Span,
) -> Option<Finding> {
    let w = ctx.write(write);
    let made = ctx.snippet(view.at);
    let node = view.op.node().unwrap_or("…");
    // (Rows taken by iterating, `list(w)`, `for row in w`: where the tensor iterated over was
    // made is what is known.)
    let (what, note) = match view.op {
        RefusedBy::Iteration => (
            format!(
                "a tensor (`{made}`, {}) whose rows were taken by iterating over it (`list(t)`, `for row in t`)",
                ctx.line(view.at)
            ),
            "the tensor iterated over into rows is made here".to_string(),
        ),
        _ => (
            format!("the tensor that `{made}` ({}) split into views", ctx.line(view.at)),
            format!("`{made}` returns several views of the tensor here"),
        ),
    };
    let mut related = Vec::new();
    if let Some(range) = ctx.range(view.at) {
        related.push(Related {
            source: None,
            range,
            message: note,
        });
    }
    if let Some(range) = ctx.range(read) {
        related.push(Related {
            source: None,
            range,
            message: "one of those views is used here, after the write: the runtime raises here"
                .into(),
        });
    }
    write_related(ctx, w, &mut related);
    Some(Finding {
        rule: Rule::RefusedViewInplace,
        severity: Severity::Error,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes in place into {what}, views autograd cannot rebase; `{}` ({}) uses one of them after the write and raises there: Output 0 of {node} {BASE_MODIFIED} {MULTI_VIEW}",
            ctx.snippet(w.site),
            ctx.snippet(read),
            ctx.line(read),
        ),
        related,
        fix: None,
        alternatives: Vec::new(),
    })
}

// The runtime's texts (torch 2.15), in the pieces its messages share.
const BASE_MODIFIED: &str =
    "is a view and its base or another view of its base has been modified inplace.";
const VIEW_MODIFIED: &str = "is a view and is being modified inplace.";
const MULTI_VIEW: &str = "This view is the output of a function that returns multiple views. Such functions do not allow the output views to be modified inplace. You should replace the inplace operation by an out-of-place one.";
const CUSTOM_FUNCTION_VIEW: &str = "This view was created inside a custom Function (or because an input was returned as-is) and the autograd logic to handle view+inplace would override the custom backward associated with the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the custom Function.";
const OVERLAP: &str = "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.";
const INFERENCE: &str = "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.";
const NO_GRAD_VIEW: &str =
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled.";
const NO_GRAD_VIEW_REST: &str = "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or both outside (if you want the inplace to be tracked).";

/// Into a parameter's rows (an initialisation), or into a view made under `no_grad` of a
/// tensor that requires grad (an update meant to be unrecorded): the write under
/// `torch.no_grad()`, where autograd allows it and the tensor still changes. A loop's row: taken
/// by index instead. A `no_grad` view of a plain tensor rebound would change nothing the tensor
/// keeps: no fix; nor where a list or dict keeps the view. Else out of place, or into a copy.
fn fix(ctx: &RenderCtx<'_>, w: &crate::events::Write, view: &RefusedView) -> Option<crate::Fix> {
    match view.op {
        // A copy where the view is made: every element its own memory, written as meant.
        RefusedBy::Expand => crate::fix::insert_clone(ctx, view.at, crate::Applicability::Unsafe),
        RefusedBy::NoGrad if view.grad => crate::fix::write_under_no_grad(ctx, w),
        RefusedBy::Iteration => crate::fix::index_loop_rows(ctx, w),
        RefusedBy::NoGrad => None,
        _ if w.into_leaf => crate::fix::write_under_no_grad(ctx, w),
        // (Kept by a list or dict as well, `parts = [gen]`: the write is meant to reach it,
        // and a rewrite would leave it the old tensor; a copy where the name is bound would
        // make the list see the writes, which the code may or may not mean. No fix.)
        _ if w.kept_in_slot => None,
        // (A view taken of a split's output, `part = t.narrow(...)` of an `unbind` row, whose
        // base the function reads on: the base copied before the view, so the write reaches
        // what is read. Not a copy of what the split was given: it splits the same way.)
        _ => (crate::fix::clone_view_base(ctx, w))
            .filter(|_| w.view_origin != Some(view.at))
            .or_else(|| out_of_place(ctx, &own_copy(w), crate::Applicability::Unsafe)),
    }
}

/// The write as if into a tensor of its own: the fix rewrites it out of place, or copies the
/// name it writes through (not the tensor that was split, whose copy splits the same way).
fn own_copy(w: &crate::events::Write) -> crate::events::Write {
    let mut w = w.clone();
    w.view_origin = None;
    w
}
