//! # IP402 clobbered-alias
//!
//! **What it finds.** An in-place write that changes a tensor which is later read through
//! *another name*: `y = x; y += 1; print(x)`; `h = torch.relu_(feat)` and then `feat` used
//! again (`torch.relu_` returns `feat` itself); an in-place activation inside a residual block
//! that overwrites the tensor the skip connection adds back (`identity = x;
//! x = self.relu(x)` with `nn.ReLU(inplace=True)`; `out += identity`). A view is another name
//! for the memory it shows: `x1 = x[..., :d]` read after `x[..., :d] = v` (a rotary embedding
//! written in place), `kept = w[:, :, j]` put back after `w[:, :, j] = ...` (a swap that copies),
//! `flat = feat.view(n, -1)` read after `feat.relu_()`. Subscripts with different indices are
//! taken to be disjoint (`x[..., :d]` and `x[..., d:]`); a write through the view itself is
//! meant to reach the tensor it shows and is not reported. The finding is at the write; the
//! later read and the aliasing assignment (or where the view was taken) are related locations.
//!
//! A dataset's `__getitem__` that changes a sample it keeps from its own values (`img =
//! self.data[i]; img -= mean`, `self.waves[i].div_(peak)`, `row = torch.from_numpy(self.table[i]);
//! row.sub_(m)`, an element of a list kept on `self`) is the same hazard across calls: the next
//! access, the next epoch, reads the changed sample. Stores (`self.cache[i] = x`, `copy_`,
//! `fill_`) give the same result on every access and are not reported. Any other method does
//! the same when it writes, through a local name, a crop of a tensor its object keeps (`m =
//! self.mask[:n, :n]; m |= pad`, `enc = self.table[:T]; enc *= scale`) or returns a kept tensor
//! that a helper it called converted in place (anchors handed to a box-format helper): every
//! call changes the kept tensor, and the next reads it changed. Accumulation spelled on the
//! attribute (`self.count += 1`, `self.seen[:n] += v`) or through a whole alias returned as the
//! state (`avg = self.avg; avg.mul_(m).add_(x); return avg`) is state kept on purpose.
//!
//! `t.data = s.data` (or `= s.detach()`) makes `t` show `s`'s memory: a later write through `t`
//! changes what `s` reads, a parameter's too (a teacher initialised on the student's memory,
//! pair by pair over `zip(teacher.parameters(), student.parameters())`, then frozen: its EMA
//! update, through `.data` too, rescales the student, whose layers read it at the next call).
//! The finding names the `.data` assignment, where a copy (`s_p.data.clone()`) fixes it.
//!
//! A custom `torch.autograd.Function` whose `forward` keeps a tensor as an attribute of `ctx`
//! (`ctx.x = x`, `ctx.stash = (x, w)`) that its `backward` reads, instead of handing it to
//! `ctx.save_for_backward`: torch checks the versions of saved tensors only, so an in-place
//! write of `x` before the backward raises nothing, and the gradient is computed from the new
//! values (a straight-through quantiser's mask, a residual scaled in place after it).
//!
//! A custom `Function`'s `backward` that writes in place into a gradient autograd passed it
//! (`grad_input = grad_output; grad_input[input < 0] = 0`, the hand-written ReLU without the
//! tutorial's `.clone()`; `grad_output.mul_(-coeff)` in a gradient-reversal layer, or in a helper
//! it calls) changes a tensor autograd may share: the branches of a sum get the same gradient
//! tensor, and the gradient of `.sum()` is one element expanded, so the masked write zeroes it
//! everywhere (measured with torch 2.15: the skip branch's gradient changes silently; an
//! in-place product on the expanded gradient raises `unsupported operation`). The fix copies the
//! gradient at the start of `backward` (`grad_output = grad_output.clone()`). A write there into
//! a tensor `backward` read from `ctx.saved_tensors` changes the `forward`'s own input or output,
//! which the caller may still hold (gpytorch's cached solve negated by `rhs_solves.mul_(-1)`, found
//! after `backward()` with its sign flipped); if another op saved that tensor too, its backward
//! raises form ③ (Liger's SwiGLU writing its gradient into a saved input that `exp` saved as its
//! output; this rule reports it where the write is, as the analysis does not follow a custom
//! backward's writes into its caller). Only what `forward` saved of its arguments or of what it
//! returns counts: a buffer it made for the backward (a softmax turned into the gradient in
//! place, as Megatron's cross entropy does) is its own to change. The fix writes into a copy or
//! out of place; a gradient that may be `None` (tested so, or `set_materialize_grads(False)`) is
//! copied only when it is a tensor, and `*grad_outputs` element by element.
//!
//! The values of `model.state_dict()` are the module's parameters themselves (detached, the
//! same memory): a running sum accumulated in place into one of them (FedAvg written as `w_avg =
//! w[0]; w_avg[k] += w[i][k]`, a model soup summed into the first ingredient's state) changes
//! that module, which a later call runs with the mixed weights. Reported where the weights added
//! are those of another module kept in one list with it (the models averaged), the dict is loaded
//! into another module (the code took it for a state of its own) and the module is then called
//! without being loaded afresh; a global model, an EMA (`v *= d; v += (1 - d) * msd[k]`) or an
//! SWA average updated through its own state dict is meant to change and is not. The fix copies
//! the state where it is made (`{k: v.clone() for k, v in net.state_dict().items()}`).
//!
//! An optimizer step writes every parameter it holds in place, and a *snapshot* that shares a
//! parameter's memory moves with it: `best = model.state_dict()` (a dict of the parameters
//! detached, not a copy), `w0 = p.detach()`, `old = [p.data for p in model.parameters()]`,
//! read after later steps (`model.load_state_dict(best)` restores the last weights, not the
//! best; Reptile's meta step reads `p - old == 0`). The finding is at the step; the snapshot and
//! the read are related locations. (Names bound to the parameters themselves are meant to see
//! the update and are not reported.)
//!
//! An in-place op whose other operand is a view of elements it writes (`traj -= traj[:, :1]`,
//! `x[:, 1:] -= x[:, :-1]`, `x.div_(x[:, 0:1])`, `a += a.t()`) is the same hazard within one
//! op: torch updates the elements in an order of its own and reads the operand as it goes, so
//! it reads some elements after changing them (a wrong result for some shapes, right for
//! others where the loop is vectorised), or refuses with `unsupported operation: some elements
//! of the input tensor and the written-to tensor refer to a single memory location`. Indices
//! are compared where they are constants: `boxes[:, 2:] -= boxes[:, :2]` reads other elements
//! and is fine. The fix reads a copy (`traj[:, :1].clone()`), which is safe.
//!
//! An in-place call whose result is used inside a larger expression reads as its out-of-place
//! twin: a later read of the name in the same statement (`lin1(torch.relu_(z)) + lin_res(z)`)
//! means the value before the write. So does a read after the statement, for an in-place
//! function of the values (`tanh_`, `sigmoid_`, `relu_`, `clamp_`, ...) used in an assignment
//! to other names: `h = o.sigmoid() * c.tanh_(); return h, c` returns the cell state squashed
//! (a Tree-LSTM's bug). Not where the statement stores into the name (`z[0] = f(z.relu_())`),
//! nor where a conditional expression chooses the in-place form (`x.tanh_() if inplace else
//! x.tanh()`). The fix uses the out-of-place call; for a statement of in-place calls alone
//! (`x.mul_(lam).add_(x.flip(0), alpha=1 - lam)`), whose name must keep the new values, the
//! first call out of place and the result bound to the name.
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
//! **Fix.** Copy where the alias or view is made (`y = x.clone()`, `x1 = x[..., :d].clone()`,
//! `t_p.data = s_p.data.clone()`,
//! `best = {k: v.clone() for k, v in model.state_dict().items()}`, `p.detach().clone()`),
//! or write out of place
//! (`h = torch.relu(feat)`, `inplace=False`, `return t.clamp(lo, hi)` in a helper). A loop
//! that changes the rows of a tensor its function was given (`for t, m in zip(tensor, mean):
//! t.sub_(m)`) gets a copy of that tensor before the loop (rebinding the row would change
//! nothing); a helper converting a kept tensor is passed a copy (`f(self.anchors.clone())`).
//!
//! **Fix safety.** *Unsafe*: the other name stops seeing the write, which is the intent but
//! changes the values the program computes.

use super::{clobber_any, located, out_of_place, write_of, write_related, RuleImpl};
use crate::events::{Event, Keeper, WriteId, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::{Applicability, Finding, Related, Severity};
use crate::fix;
use crate::ir::Span;
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::ClobberedAlias,
    claims,
    render,
    form3_rank: None,
};

/// A module built with `inplace=True` clobbers where it is called.
fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    if let Some((w, save, _)) = clobber_any(ev, u) {
        return save.stash.map(|_| w.range);
    }
    let (Event::StaleRead { write, .. }
    | Event::SelfOverlap { write, .. }
    | Event::GradOutputWrite { write, .. }
    | Event::BackwardSavedWrite { write }
    | Event::StateDictWrite { write, .. }) = ev
    else {
        return None;
    };
    let w = write_of(u, *write)?;
    Some(match w.kind {
        WriteKind::InplaceModule { call, .. } => call,
        _ => w.range,
    })
}

fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    if let Event::SelfOverlap { write, operand } = ev {
        return render_overlap(ctx, *write, *operand);
    }
    if let Event::StateDictWrite { write, made, read } = ev {
        return render_state_dict_write(ctx, *write, *made, *read);
    }
    if let Event::BackwardSavedWrite { write } = ev {
        return render_backward_saved(ctx, *write);
    }
    if let Event::GradOutputWrite {
        write,
        name,
        param,
        first,
    } = ev
    {
        return render_grad_output(ctx, *write, *name, *param, *first);
    }
    if let Some((w, save, trigger)) = clobber_any(ev, ctx.unit) {
        return render_stash(ctx, w, save, trigger);
    }
    let Event::StaleRead {
        write,
        name,
        read,
        bindings,
        next_call,
        view,

        nested,
        snapshot,
        shared,
        ..
    } = ev
    else {
        return None;
    };
    if let Some(at) = snapshot {
        return render_snapshot(ctx, ev, *at);
    }
    if let Some(at) = shared {
        return render_shared(ctx, ev, *at);
    }
    let w = ctx.write(*write);
    // (Rewriting a tensor that cannot require grad out of place loses nothing under `no_grad`.)
    let gradless = (w.under_no_grad && w.gradless).then(|| crate::events::Write {
        under_no_grad: false,
        ..w.clone()
    });
    let w = gradless.as_ref().unwrap_or(w);
    let name = ctx.name(*name);
    let mut related = Vec::new();
    if let Some(range) = ctx.range(*read) {
        let message = if next_call.is_some() {
            format!("`{name}` is read here by every call, and the next one sees the changed values")
        } else {
            format!("`{name}` is read here and sees the value written in place")
        };
        related.push(Related {
            source: None,
            range,
            message,
        });
    }
    // The alias was made by the later binding that assigns a plain name (`y = x`), or where
    // the view was taken.
    let alias = bindings
        .iter()
        .filter(|b| b.alias_of.is_some() && view.is_none())
        .max_by_key(|b| ctx.range(b.stmt));
    if let Some(range) = alias.and_then(|b| ctx.range(b.stmt)) {
        related.push(Related {
            source: None,
            range,
            message: "the alias is made here: both names share one tensor".into(),
        });
    }
    // (For a dataset's sample, the write's own view is named below.)
    let view_message = match next_call {
        None => Some(format!(
            "`{name}` is a view taken here: it shows the memory written"
        )),
        Some(Keeper::Instance) => Some(format!(
            "a view of `{name}` is taken here: writing it writes the kept tensor"
        )),
        Some(Keeper::Dataset) => None,
    };
    if let (Some(message), Some(range)) = (view_message, view.and_then(|v| ctx.range(v))) {
        related.push(Related {
            source: None,
            range,
            message,
        });
    }
    write_related(ctx, w, &mut related);
    // An in-place layer run by a container (`net(x)` of an `nn.Sequential`): where it is built.
    if let WriteKind::InplaceModule { call, ctor } = w.kind {
        if let (false, Some(range)) = (call.contains(ctor), ctx.range(ctor)) {
            related.push(Related {
                source: None,
                range,
                message: format!("the layer that writes in place: `{}`", ctx.snippet(ctor)),
            });
        }
    }
    let mut fixes = stale_fix(ctx, ev, w, alias).into_iter();
    let fix = fixes.next();
    let (through, range) = match w.kind {
        WriteKind::InplaceModule { call, .. } => (ctx.snippet(call), call),
        _ => (ctx.snippet(w.site), w.range),
    };
    let message = stale_message(
        ctx,
        w,
        (&through, name, *read),
        *next_call,
        (*nested, view.is_some()),
    );
    Some(Finding {
        rule: Rule::ClobberedAlias,
        severity: Severity::Warning,
        range: ctx.range(range)?,
        message,
        related,
        fix,
        alternatives: fixes.collect(),
    })
}

/// The fix of a stale read: a copy where the alias or view was made (or of what a helper or
/// a loop is given), else the write rewritten out of place.
fn stale_fix(
    ctx: &RenderCtx<'_>,
    ev: &Event,
    w: &crate::events::Write,
    alias: Option<&crate::domain::Binding>,
) -> Vec<crate::finding::Fix> {
    let Event::StaleRead {
        name,
        read,
        bindings,
        next_call,
        view,
        view_copyable,
        nested,
        ..
    } = ev
    else {
        return Vec::new();
    };
    let name = ctx.name(*name);
    let in_module = w
        .stmt
        .is_some_and(|s| crate::project::is_module_item(s.item));
    // Read again in the same statement: the out-of-place op leaves the name as it was (a copy
    // before the statement would be read there too, so there is no other fix).
    // (A statement that only writes, `x.mul_(a).add_(x.flip(0))`: the written name must keep
    // the new values, so the statement's result is bound to it.)
    let discarded = w.stmt.is_some_and(|s| {
        ctx.body(s.item)
            .is_some_and(|b| matches!(b.stmt(s.stmt), crate::ir::Stmt::Expr(_)))
    });
    if *nested {
        let fix = match w.kind {
            _ if in_module => None,
            WriteKind::Method(name) if discarded => fix::chain_out_of_place_rebound(ctx, w, name),
            _ if discarded => None,
            WriteKind::Method(name) | WriteKind::TorchFn(name) => {
                fix::nested_call_out_of_place(ctx, w, name, Applicability::Unsafe)
            }
            _ => out_of_place(ctx, w, Applicability::Unsafe),
        };
        return fix.into_iter().collect();
    }
    // (A write straight on what a dataset keeps, `self.x[i].div_(m)`, `self.x.mul_(s)`, has
    // no local name to rewrite or copy into: a copy would be kept in its place.)
    if *next_call == Some(Keeper::Dataset) && bindings.is_empty() && !through_local_name(ctx, w) {
        return Vec::new();
    }
    // The candidates, most preferred first: the first that removes the finding when applied
    // is the one offered (a copy of an alias that another read of the written name still
    // sees, iResNet's `identity = x` with `downsample(x)` after an in-place ReLU, gives way
    // to `inplace=False`).
    let candidates: [&dyn Fn() -> Option<crate::finding::Fix>; 9] = [
        // A copy where the alias or view was made. (Not an alias one arm of a conditional
        // makes, `out = t if inplace else t.clone()`: a copy there would undo the choice; nor
        // one made in a module's code, which cannot be fixed from here.)
        &|| {
            (alias
                .filter(|b| !chosen_alias(ctx, b))
                .and_then(|b| b.alias_of))
            .or(view.filter(|_| *view_copyable))
            .filter(|at| !crate::project::is_module_item(at.item))
            .and_then(|at| fix::insert_clone(ctx, at, Applicability::Unsafe))
        },
        // A `.grad` tensor a backward adds into, kept in a list: a copy kept there.
        &|| {
            (w.grad_read
                .filter(|at| !crate::project::is_module_item(at.item)))
            .and_then(|at| fix::clone_kept_grad(ctx, at))
        },
        // A write into an activation `forward` made as a view of a parameter: the view copied
        // where `forward` makes it (the parameter was not meant).
        &|| fix::clone_activation_view(ctx, w),
        // A write in an imported module's code: the call here passes it a copy.
        &|| in_module.then(|| fix::clone_argument(ctx, w, false))?,
        // A helper that converts what the object keeps: the call passes it a copy.
        &|| {
            let kept = *next_call == Some(Keeper::Instance) && w.call_site.is_some();
            kept.then(|| fix::clone_argument(ctx, w, false))?
        },
        // A loop that changes the rows of a tensor it was given: a copy before the loop.
        &|| fix::clone_loop_tensor(ctx, w),
        &|| fix::copy_detached(ctx, w).filter(|_| !in_module),
        // `xb -= xb.mean()` of a sample a loop over a loader bound, or of a name whose alias
        // no copy can be put into (`p = x.clone() if keep else x`), or an in-place layer: a
        // new tensor instead (`inplace=False`).
        &|| match w.kind {
            _ if in_module => None,
            k if k.is_inplace_call() || k == WriteKind::AugAssign => {
                out_of_place(ctx, w, Applicability::Unsafe)
            }
            _ => None,
        },
        // A helper's write no rewrite there fixes (`x[2:5] += 1; return x`), into what its
        // caller passed and reads again: the call passes it a copy.
        &|| {
            let caller_reads = !in_module && read.item != w.range.item;
            caller_reads.then(|| fix::clone_passed_to_helper(ctx, w, name, *read))?
        },
    ];
    let mut out: Vec<crate::finding::Fix> = Vec::new();
    for make in candidates {
        if let Some(f) = make() {
            if !out.iter().any(|o| o.edits == f.edits) {
                out.push(f);
            }
        }
    }
    out
}

/// An optimizer step updating the parameters a snapshot (`best = model.state_dict()`,
/// `w0 = p.detach()`) still holds: the snapshot is no copy, and a later read of it sees the
/// weights of every step since.
fn render_snapshot(ctx: &RenderCtx<'_>, ev: &Event, made: Span) -> Option<Finding> {
    let fix = (!crate::project::is_module_item(made.item))
        .then(|| fix::copy_snapshot(ctx, made))
        .flatten();
    render_from_origin(ctx, ev, made, fix, |name, write, made_line, read_line| {
        Messages {
        origin: format!("`{name}` is made here: it shares the parameters' memory"),
        read: format!("`{name}` is read here and sees the updated values"),
        finding: format!(
            "`{write}` updates in place the parameters `{name}` holds (`{}` ({made_line}) shares their memory: it is no copy); `{name}` is read later ({read_line}) and silently sees the weights of every step since",
            ctx.snippet(made),
        ),
    }
    })
}

/// The texts of a stale read rendered from where its memory came to be shared.
struct Messages {
    origin: String,
    read: String,
    finding: String,
}

/// A stale read whose cause is where the memory came to be shared (`origin`: a snapshot made,
/// a `.data` assigned), a related location with the read; `texts` gets the name read, the
/// write's snippet, and the lines of the origin and of the read.
fn render_from_origin(
    ctx: &RenderCtx<'_>,
    ev: &Event,
    origin: Span,
    fix: Option<crate::finding::Fix>,
    texts: impl FnOnce(&str, &str, String, String) -> Messages,
) -> Option<Finding> {
    let Event::StaleRead {
        write, name, read, ..
    } = ev
    else {
        return None;
    };
    let w = ctx.write(*write);
    let name = ctx.name(*name);
    let m = texts(
        name,
        &ctx.snippet(w.site),
        ctx.line(origin),
        ctx.line(*read),
    );
    let mut related = located([(ctx.range(origin), m.origin), (ctx.range(*read), m.read)]);
    write_related(ctx, w, &mut related);
    Some(Finding {
        rule: Rule::ClobberedAlias,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message: m.finding,
        related,
        fix,
        alternatives: Vec::new(),
    })
}

/// A write into a tensor a custom Function's `forward` kept on `ctx` (`ctx.x = x`) for its
/// backward: torch checks no version there (only `save_for_backward` is checked), so the
/// backward computes silently from the new values.
fn render_stash(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    save: &crate::domain::graph::Save,
    trigger: crate::events::Trigger,
) -> Option<Finding> {
    let attr = ctx.name(save.stash?);
    let mut related = located([
        (
            ctx.range(save.range),
            format!(
                "`{}` keeps it as `ctx.{attr}` here, for its backward",
                ctx.op(save.op)
            ),
        ),
        (
            ctx.range(trigger.range),
            "the backward reads the changed values here, without an error".to_string(),
        ),
    ]);
    write_related(ctx, w, &mut related);
    Some(Finding {
        rule: Rule::ClobberedAlias,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes in place into a tensor that `{}` ({}) keeps as `ctx.{attr}` for its backward; torch checks no version there (only `ctx.save_for_backward` is checked), so `{}` ({}) silently computes the gradient from the new values",
            ctx.snippet(w.site),
            ctx.op(save.op),
            ctx.line(save.range),
            ctx.snippet(trigger.range),
            ctx.line(trigger.range),
        ),
        related,
        fix: out_of_place(ctx, w, Applicability::Unsafe),
        alternatives: Vec::new(),
    })
}

/// A write into memory `t.data = s.data` made two tensors share (`shared`: that statement and
/// its value): assigning `.data` points at the other tensor's memory, it copies nothing, so a
/// mean teacher set up this way is the student, and its update rescales the student's weights.
fn render_shared(ctx: &RenderCtx<'_>, ev: &Event, (stmt, value): (Span, Span)) -> Option<Finding> {
    let fix = (!crate::project::is_module_item(value.item))
        .then(|| fix::insert_clone(ctx, value, Applicability::Unsafe))
        .flatten();
    render_from_origin(ctx, ev, stmt, fix, |name, write, stmt_line, read_line| {
        Messages {
        origin: "the memory is shared here: assigning `.data` points at the other tensor's memory and copies nothing".to_string(),
        read: format!("`{name}` is read here and sees the values written in place"),
        finding: format!(
            "`{write}` writes in place into memory that `{name}` also reads: `{}` ({stmt_line}) made the two share it (assigning `.data` copies nothing); `{name}` is read later ({read_line}) and silently sees the new values",
            ctx.snippet(stmt),
        ),
    }
    })
}

/// `a -= a[:, :1]`: the operand is a view of elements the write changes.
fn render_overlap(ctx: &RenderCtx<'_>, write: WriteId, operand: Span) -> Option<Finding> {
    let w = ctx.write(write);
    let message = format!(
        "`{}` reads `{}`, a view of elements it writes: torch updates them in an order of its own and reads some after they were changed (a silently wrong result, depending on the shape), or refuses: unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location",
        ctx.snippet(w.site),
        ctx.snippet(operand)
    );
    at_write(
        ctx,
        w,
        message,
        Vec::new(),
        fix::clone_operand(ctx, operand),
    )
}

/// A write through a module's `state_dict()` value adding another module's parameters, then
/// the module called.
fn render_state_dict_write(
    ctx: &RenderCtx<'_>,
    write: WriteId,
    made: Span,
    read: Span,
) -> Option<Finding> {
    let w = ctx.write(write);
    let related = vec![
        Related {
            source: None,
            range: ctx.range(made)?,
            message: format!(
                "`{}` hands out the module's parameters themselves (detached, the same memory), not a copy",
                ctx.snippet(made)
            ),
        },
        Related {
            source: None,
            range: ctx.range(read)?,
            message: "the module runs here with the weights the write changed".into(),
        },
    ];
    let message = format!(
        "`{}` writes in place into a value of `{}` ({}), which is that module's own parameter: adding another module's weights there changes the module itself, and its call ({}) silently runs with the mixed weights",
        ctx.snippet(w.site),
        ctx.snippet(made),
        ctx.line(made),
        ctx.line(read)
    );
    at_write(ctx, w, message, related, fix::copy_snapshot(ctx, made))
}

/// A custom Function's `backward` writing into a tensor its `forward` saved.
fn render_backward_saved(ctx: &RenderCtx<'_>, write: WriteId) -> Option<Finding> {
    let w = ctx.write(write);
    let message = format!(
        "`{}` writes in place into a tensor this custom `backward` read from `ctx.saved_tensors`: that is the `forward`'s own input or output, which its caller may still hold and then reads changed after `backward()` (and if another op saved it too, that op's backward raises: {})",
        ctx.snippet(w.site),
        super::FORM3_MESSAGE
    );
    let fix = out_of_place(ctx, w, Applicability::Unsafe);
    at_write(ctx, w, message, Vec::new(), fix)
}

/// A custom Function's `backward` writing into a gradient autograd passed it.
fn render_grad_output(
    ctx: &RenderCtx<'_>,
    write: WriteId,
    name: crate::ir::Name,
    param: Span,
    first: Option<Span>,
) -> Option<Finding> {
    let w = ctx.write(write);
    let name = ctx.name(name);
    let related = vec![Related {
        source: None,
        range: ctx.range(param)?,
        message: format!("`{name}`: what autograd passes to this `backward`, not a copy"),
    }];
    // (Autograd passes zeros for a gradient it has none of, unless the Function asks it not to
    // with `ctx.set_materialize_grads(False)`: then it may be `None`, copied only when it is a
    // tensor.)
    let maybe_none = ctx.text_all().contains("set_materialize_grads(");
    let copy = match (ctx.text(param).starts_with('*'), maybe_none) {
        // (`*grad_outputs`: each of them.)
        (true, _) => format!("tuple(g.clone() if g is not None else None for g in {name})"),
        (false, true) => format!("{name}.clone() if {name} is not None else None"),
        (false, false) => format!("{name}.clone()"),
    };
    let fix = first.and_then(|f| ctx.range(f)).and_then(|at| {
        fix::assign_before_statement(
            ctx,
            at,
            name,
            &copy,
            format!("Copy `{name}` at the start of `backward`"),
        )
    });
    let message = format!(
        "`{}` writes in place into `{name}`, the gradient autograd passed to this custom `backward`: autograd may hand that same tensor to other nodes (the branches of a sum share it; the gradient of `.sum()` is one element expanded), whose gradients then change silently, or torch refuses the write (unsupported operation: more than one element of the written-to tensor refers to a single memory location)",
        ctx.snippet(w.site)
    );
    at_write(ctx, w, message, related, fix)
}

/// An IP402 finding at write `w`, with these related locations first and then the write's own
/// (the calls that led to it, the view it went through: not one already at the same place).
fn at_write(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    message: String,
    mut related: Vec<Related>,
    fix: Option<crate::finding::Fix>,
) -> Option<Finding> {
    let mut more = Vec::new();
    write_related(ctx, w, &mut more);
    let had: Vec<_> = related.iter().map(|r| r.range).collect();
    related.extend(more.into_iter().filter(|r| !had.contains(&r.range)));
    Some(Finding {
        rule: Rule::ClobberedAlias,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message,
        related,
        fix,
        alternatives: Vec::new(),
    })
}

/// Whether the write changes, through a plain name, the element a `for` loop binds (see
/// [`fix::loop_element_update`]).
pub(super) fn loop_element(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> bool {
    w.stmt.is_some_and(|s| {
        (ctx.body(s.item)).is_some_and(|b| fix::loop_element_update(&b, s.stmt, w))
    })
}

/// Whether a write goes through a bare name (`xb -= m`, `xb.mul_(s)`), not through an
/// attribute or an element of what keeps the tensor.
fn through_local_name(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> bool {
    let Some((s, body)) = w.stmt.and_then(|s| Some((s, ctx.body(s.item)?))) else {
        return false;
    };
    fix::written_expr(&body, s.stmt, w)
        .is_some_and(|e| matches!(body.expr(e), crate::ir::Expr::Name { .. }))
}

/// Whether binding `b` is an assignment of a conditional expression, one arm of which is the
/// alias (`io = p.clone() if copy else p`).
fn chosen_alias(ctx: &RenderCtx<'_>, b: &crate::domain::Binding) -> bool {
    use crate::ir::{Expr, Stmt};
    let Some(body) = ctx.body(b.stmt.item) else {
        return false;
    };
    (0..body.stmts.len()).any(|i| {
        body.stmt_spans[i] == b.stmt.rel
            && matches!(body.stmts[i], Stmt::Assign { value, .. }
                if matches!(body.expr(value), Expr::IfExp { .. }))
    })
}

/// The message of a stale read of `name` at `read` after write `w` (quoted as `through`): by
/// who keeps the tensor (an object across calls, a dataset's samples), whether the write is an
/// in-place call nested in an expression (`nested`), a backward's or `zero_grad`'s into a
/// `.grad`, through a view (`view`), or an alias.
fn stale_message(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    (through, name, read): (&str, &str, Span),
    next_call: Option<Keeper>,
    (nested, view): (bool, bool),
) -> String {
    if next_call == Some(Keeper::Instance) {
        format!(
            "`{through}` writes in place into `{name}`, which the object keeps: every call changes the kept tensor, and the next call silently reads the changed values ({} reads `{name}`)",
            ctx.line(read)
        )
    } else if next_call.is_some() {
        format!(
            "`{through}` writes in place into a sample `{name}` keeps: each access changes the stored data, and the next epoch silently reads the changed values ({} reads `{name}`)",
            ctx.line(read)
        )
    } else if nested {
        // (Read past the statement: an in-place function of the values used inline.)
        let later = w.stmt.is_some_and(|s| {
            ctx.body(s.item)
                .is_some_and(|b| read.item != s.item || !b.stmt_span(s.stmt).contains(read.rel))
        });
        let where_ = match later {
            true => format!("`{name}` is read again later"),
            false => format!("the same statement reads `{name}` again"),
        };
        format!(
            "`{through}` writes `{name}` in place and its result is used as a new value, but {where_} ({}), which silently sees the written values, not the ones before",
            ctx.line(read)
        )
    } else if w.kind == WriteKind::GradAccumulate {
        format!(
            "`{through}` adds its gradient in place into the `.grad` tensor `{name}` holds (a backward accumulates into an existing `.grad`); `{name}` is read later ({}) and silently sees the sum, not the gradient it was taken as",
            ctx.line(read)
        )
    } else if w.kind == WriteKind::GradZero {
        format!(
            "`{through}` zeroes in place the `.grad` tensor `{name}` holds (with `set_to_none=False` the `.grad` tensors are kept and filled with zeros); `{name}` is read later ({}) and silently sees zeros, not the gradient it was taken as",
            ctx.line(read)
        )
    } else if view {
        format!(
            "`{through}` writes in place into memory the view `{name}` shows; `{name}` is read later ({}) and silently sees the new values",
            ctx.line(read)
        )
    } else if let Some((call, _)) = (w.range.item != read.item)
        .then(|| fix::call_passing(ctx, w, name, read))
        .flatten()
    {
        // (A helper writing what its caller passed, read by the caller.)
        format!(
            "`{through}` writes in place into the tensor the call `{}` ({}) passed, which `{name}` names there; `{name}` is read later ({}) and silently sees the new values",
            ctx.snippet(call),
            ctx.line(call),
            ctx.line(read)
        )
    } else {
        format!(
            "`{through}` writes in place into the tensor `{name}` also names; `{name}` is read later ({}) and silently sees the new values",
            ctx.line(read)
        )
    }
}
