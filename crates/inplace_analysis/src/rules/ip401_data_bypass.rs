//! # IP401 data-bypass
//!
//! **What it finds.** A write through `.data` (`y.data.mul_(0)`, `y.data.clamp_(0, 1)`,
//! `p.data -= lr * p.grad` before the `backward()` that reads `p`) into a tensor that something
//! saved for a backward that may still run, or into an op's result a backward then runs through
//! (autograd takes the write it never saw for the identity). Other `.data` uses (reads,
//! `x.data = v`, writes into what nothing saved and no backward runs through) cannot corrupt a
//! gradient there: they are IP410, an opt-in rule. So is a masking fill of an op's result
//! (`scores.data.masked_fill_(mask, -float("inf"))`, `-1e9`, `torch.finfo(dtype).min`, the
//! value of `fill_`/`index_fill_` or a subscript assignment): the softmax or exponential after
//! it has zero gradient at those places, as the out-of-place fill gives (measured with torch;
//! a row masked whole with a finite value is the exception: its softmax is uniform).
//! The same holds for a NumPy array that shares a tensor's memory: `a = t.detach().numpy()`
//! (on the CPU), or the array `a` given to `torch.from_numpy(a)`; `a *= 255` or `a[:] = batch`
//! before that backward.
//!
//! It also finds a differentiable update written through `.data`: MAML's inner step
//! `p.data -= lr * g` with `g` from `torch.autograd.grad(..., create_graph=True)` (the gradient
//! is taken with its graph so that the outer backward differentiates through the update, and
//! `.data` drops that graph: the meta-gradient silently misses the second-order terms). No fix:
//! the update must produce new tensors the next forward uses (`fast = p - lr * g` with
//! `torch.func.functional_call`).
//!
//! And the mirror image: a write through the tensor itself into memory an op saved through a
//! `.data` alias (`y = x.data * w` then `x.add_(1)` before the backward; `x.mul_(x.data)`, which
//! saves its operand and then writes it). The saved alias has a version counter of its own,
//! which the write does not bump: `w`'s gradient silently reads the new values (measured:
//! `x.mul_(x.data)` gives `2x²` where `2x` was meant).
//!
//! **Why it breaks.** `.data` shares the memory but *not* the version counter. A write through
//! it changes values autograd saved without bumping the version, so backward runs on the new
//! values and silently computes wrong gradients (form ④). In the seed example the sigmoid
//! gradient 0.10499362647533417 becomes 0.0 and `_version` stays 0.
//!
//! **Runtime message.** None: that is the danger.
//!
//! **Example**
//! ```python
//! y = torch.sigmoid(x)
//! y.data.mul_(0)          # IP401: gradient silently wrong
//! y.sum().backward()
//! ```
//!
//! **Fix.** For memory saved through `.data`: save a copy there, `x.detach().clone()`.
//! Otherwise out of place. Arithmetic is written as itself, so the gradient goes through it
//! (`wav.data /= wsq` -> `wav = wav / wsq`: a `.data` write of arithmetic is how code silences
//! autograd's error, pytorch#96110), and so is a mask (`alpha.data.masked_fill_(~m, 1e-8)` ->
//! `alpha = alpha.masked_fill(~m, 1e-8)`: the masked places get no gradient, as a mask means).
//! Other writes keep the values they made and the gradient
//! autograd computed without them, a straight-through estimator (what such a `.data` write is
//! used for): `y.data.clamp_(0, 1)` -> `y = y.clamp(0, 1).detach() + (y - y.detach())`. When
//! the tensor is a parameter that
//! something saved (rebinding it would cut it off from its optimizer), the write, or the call
//! it is made in (`prune(model)` between the loss and `loss.backward()`), moves after the
//! `backward()`.
//!
//! For a NumPy array, one side gets its own memory where it is shared: `t.numpy().copy()`,
//! `torch.from_numpy(a).clone()`; none when the tensor is read by its name after the write
//! (the write is meant to reach it: mask it out of place instead).
//!
//! **Fix safety.** *Unsafe*: it changes which tensor the name holds (or, for an array, stops the
//! sharing some code may rely on).

use super::{clobber_any, located, write_of, write_related, RuleImpl};
use crate::domain::graph::Save;
use crate::events::{Event, Trigger, Write, WriteKind};
use crate::exec::UnitOutput;
use crate::finding::{Applicability, Edit, Finding, Fix, Related, Severity, TextRange};
use crate::fix;
use crate::ir::{Rel, Span};
use crate::registry::Rule;
use crate::render::RenderCtx;

pub(crate) const RULE: RuleImpl = RuleImpl {
    rule: Rule::DataBypass,
    claims,
    render,
    form3_rank: None,
};

fn claims(ev: &Event, u: &UnitOutput) -> Option<Span> {
    match ev {
        Event::DataWrite {
            write, live: true, ..
        }
        | Event::DataDropsGraph { write, .. } => Some(write_of(u, *write)?.range),
        _ => clobber_any(ev, u)
            .filter(|(w, save, _)| super::silent_through_data(w, save))
            .map(|(w, ..)| w.range),
    }
}

/// The finding of a `.data` read or write (IP401 for a write into what a backward still
/// reads, IP410 for the rest).
pub(crate) fn render(ctx: &RenderCtx<'_>, ev: &Event) -> Option<Finding> {
    match ev {
        Event::DataWrite {
            write,
            live,
            leaf,
            trigger,
        } => write_finding(ctx, *write, *live, *leaf, *trigger),
        Event::DataDropsGraph { write, grad } => drops_graph_finding(ctx, *write, *grad),
        Event::DataRead {
            attr,
            name_at,
            kept,
        } => read_finding(ctx, *attr, *name_at, *kept),
        _ => {
            let (w, save, trigger) = clobber_any(ev, ctx.unit)?;
            saved_through_data_finding(ctx, w, save, trigger)
        }
    }
}

/// A write into a tensor an op saved through a `.data` alias (`y = x.data * w` then
/// `x.add_(1)`, or `x.mul_(x.data)`, whose own write changes the saved operand): the saved
/// alias has a version counter of its own, which the write does not bump, so the backward
/// reads the new values without an error. Fix: save a copy where `.data` was read.
fn saved_through_data_finding(
    ctx: &RenderCtx<'_>,
    w: &Write,
    save: &Save,
    trigger: Trigger,
) -> Option<Finding> {
    let Some(data) = save.through_data else {
        return shown_memory_finding(ctx, w, save, trigger);
    };
    let alias = ctx.snippet(data);
    // (Saved through a tensor given that memory by `t.data = s.data`: `{alias}` is where that
    // tensor was made, not a `.data` read.)
    let shown = !alias.ends_with(".data");
    let kept = if shown {
        "the other tensor".to_string()
    } else {
        format!("`{alias}`")
    };
    let op = ctx.op(save.op);
    let own = save.range == w.range;
    let mut related = located([
        (
            ctx.range(save.range).filter(|_| !own),
            format!("`{op}` saves {kept} here, for its backward"),
        ),
        (
            ctx.range(trigger.range),
            "the backward reads the changed values here, without an error".into(),
        ),
    ]);
    write_related(ctx, w, &mut related);
    let saved = match (own, shown) {
        (true, false) => format!("saves `{alias}` and then writes it"),
        (_, true) => format!(
            "writes in place into memory that `{op}` ({}) saved through another tensor, given that memory through `.data`",
            ctx.line(save.range)
        ),
        (false, false) => format!(
            "writes in place into memory that `{op}` ({}) saved through `{alias}`",
            ctx.line(save.range)
        ),
    };
    // (Not where the alias is bound to a name, `g = gate.data`: later writes through the name
    // are meant to reach the tensor, and a copy there would take them.)
    let bound = ctx.body(data.item).is_some_and(|b| {
        b.stmts.iter().any(|st| {
            matches!(*st, crate::ir::Stmt::Assign { value, .. } if b.expr_span(value) == data.rel)
        })
    });
    let fix = replace_data(&alias, ".detach().clone()")
        .filter(|_| !bound && !shown)
        .and_then(|text| {
            Some(Fix {
                title: format!("Save a copy: `{text}`"),
                applicability: Applicability::Unsafe,
                edits: vec![Edit {
                    range: ctx.range(data)?,
                    content: text,
                }],
            })
        });
    Some(Finding {
        rule: Rule::DataBypass,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` {saved}; {} has a version counter of its own, which this write does not bump, so `{}` ({}) computes the gradient from the new values without an error",
            ctx.snippet(w.site),
            if shown { "that tensor" } else { "`.data`" },
            ctx.snippet(trigger.range),
            ctx.line(trigger.range),
        ),
        related,
        fix,
        alternatives: Vec::new(),
    })
}

/// A write through a tensor made to show another's memory (`pk.data = pq.data`, then
/// `pk.mul_(m)`) into what an op saved of that other one: `pk` keeps a version counter of its
/// own, so the backward reads the new values without an error (measured with torch 2.15).
fn shown_memory_finding(
    ctx: &RenderCtx<'_>,
    w: &Write,
    save: &Save,
    trigger: Trigger,
) -> Option<Finding> {
    w.data_alias?;
    let op = ctx.op(save.op);
    let mut related = located([
        (
            ctx.range(save.range),
            format!("`{op}` saves the tensor here, for its backward"),
        ),
        (
            ctx.range(trigger.range),
            "the backward reads the changed values here, without an error".into(),
        ),
    ]);
    write_related(ctx, w, &mut related);
    Some(Finding {
        rule: Rule::DataBypass,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes in place into memory that `{op}` ({}) saved, which the written tensor shows since it was given that memory through `.data`; it keeps a version counter of its own, which is not the one the save checks, so `{}` ({}) computes the gradient from the new values without an error",
            ctx.snippet(w.site),
            ctx.line(save.range),
            ctx.snippet(trigger.range),
            ctx.line(trigger.range),
        ),
        related,
        fix: None,
        alternatives: Vec::new(),
    })
}

fn write_finding(
    ctx: &RenderCtx<'_>,
    write: u32,
    in_graph: bool,
    leaf: bool,
    trigger: Option<Trigger>,
) -> Option<Finding> {
    let w = ctx.write(write);
    if let Some(share) = w.numpy_share {
        // A NumPy array written where nothing saved its memory is just an array.
        return in_graph.then(|| numpy_finding(ctx, w, share))?;
    }
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    let (severity, why) = if in_graph {
        (
            Severity::Warning,
            "autograd will not notice, and gradients through it come out silently wrong",
        )
    } else {
        (
            Severity::Information,
            "prefer writing the tensor itself under `torch.no_grad()`, which autograd can check",
        )
    };
    // `x.data = v` swaps the storage: no statement without `.data` does the same. A write
    // into something a backward still reads: out of place, outside autograd, unless it is a
    // parameter (rebinding it would cut it off from its optimizer and `.grad`): then the write
    // (or the call it is made in) moves after the `backward()` that reads the parameter.
    // (So too for a parameter made a graph node by an earlier in-place add, a merged LoRA
    // weight: a module refuses a plain tensor bound to its parameter's name.)
    let fix = if in_graph && (leaf || w.param) {
        trigger.and_then(|t| fix::write_after_backward(ctx, w, &t))
    } else if in_graph {
        fix::data_write_out_of_place(ctx, w)
    } else {
        fix::simple_statement(ctx, w.stmt)
            .filter(|_| w.kind != WriteKind::DataAssign)
            .and_then(|s| {
                let text = without_data(ctx.slice(s))?;
                fix::wrap_no_grad(
                    ctx,
                    s,
                    &text,
                    "Write under `torch.no_grad()` without `.data`",
                    Applicability::Unsafe,
                )
            })
    };
    Some(Finding {
        rule: if in_graph {
            Rule::DataBypass
        } else {
            Rule::DataAccess
        },
        severity,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes through `.data`, which shares memory but not the version counter: {why}",
            ctx.snippet(w.site)
        ),
        related,
        fix,
        alternatives: Vec::new(),
    })
}

/// A differentiable update written through `.data` (MAML's inner step `p.data -= lr * g`
/// with `g` from `autograd.grad(..., create_graph=True)`): the update's graph is dropped, so
/// the outer backward gets no gradient through it. No fix: the update must go to new tensors
/// the next forward uses (`fast = p - lr * g`, `torch.func.functional_call`).
fn drops_graph_finding(ctx: &RenderCtx<'_>, write: u32, grad: Span) -> Option<Finding> {
    let w = ctx.write(write);
    let mut related = Vec::new();
    write_related(ctx, w, &mut related);
    if let Some(range) = ctx.range(grad) {
        related.push(Related {
            source: None,
            range,
            message: "the gradient is taken here with `create_graph=True`: its graph is meant to be differentiated".into(),
        });
    }
    Some(Finding {
        rule: Rule::DataBypass,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes through `.data` a value that carries the graph of a gradient taken with `create_graph=True` ({}): `.data` drops that graph, so the backward through the updated weights silently gets no gradient through this update (the second-order, meta-learning terms are lost)",
            ctx.snippet(w.site),
            ctx.line(grad)
        ),
        related,
        fix: None,
        alternatives: Vec::new(),
    })
}

/// A write into a NumPy array that shares a saved tensor's memory (`t.numpy()`,
/// `torch.from_numpy(a)`): fixed where the memory is shared, by giving one side its own copy.
fn numpy_finding(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    share: crate::domain::NumpyShare,
) -> Option<Finding> {
    // (An array's views are NumPy's: no "view shares the version counter" note.)
    let mut related = Vec::new();
    let plain = crate::events::Write {
        view_origin: None,
        ..w.clone()
    };
    write_related(ctx, &plain, &mut related);
    let call = ctx.snippet(share.at);
    related.push(crate::finding::Related {
        source: None,
        range: ctx.range(share.at)?,
        message: format!("`{call}` shares this memory without a version counter"),
    });
    Some(Finding {
        rule: Rule::DataBypass,
        severity: Severity::Warning,
        range: ctx.range(w.range)?,
        message: format!(
            "`{}` writes into a NumPy array that shares memory with a tensor (`{call}`, {}) \
             but not its version counter: autograd will not notice, and gradients through it \
             come out silently wrong",
            ctx.snippet(w.site),
            ctx.line(share.at)
        ),
        related,
        fix: fix::own_memory(ctx, share, w),
        alternatives: Vec::new(),
    })
}

/// The statement's text with every `.data` attribute dropped (`p.data.add_(1)` -> `p.add_(1)`).
fn without_data(text: &str) -> Option<String> {
    replace_data(text, "")
}

/// `text` with every `.data` attribute replaced by `by` (None when it has none).
fn replace_data(text: &str, by: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    let mut found = false;
    while let Some(i) = rest.find(".data") {
        let after = &rest[i + 5..];
        let boundary = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
        out.push_str(&rest[..i]);
        if boundary {
            found = true;
            out.push_str(by);
        } else {
            out.push_str(".data");
        }
        rest = after;
    }
    out.push_str(rest);
    found.then_some(out)
}

fn read_finding(ctx: &RenderCtx<'_>, attr: Span, name_at: u32, kept: bool) -> Option<Finding> {
    let range = ctx.range(attr)?;
    // The `.` before `data` (after the object, parentheses included).
    let name = ctx
        .range(Span::new(attr.item, Rel::new(name_at, name_at)))?
        .start;
    let before = ctx.slice(TextRange::new(range.start, name));
    let dot = range.start + before.trim_end_matches([' ', '\t', '\\', '\n', '\r']).len();
    // `x.data.data` (one finding): every `.data` of the chain at once.
    let chain = ctx.slice(TextRange::new(range.start, dot.saturating_sub(1)));
    let edit = if dot > range.start && ctx.slice(TextRange::new(dot - 1, dot)) == "." {
        let head = replace_data(chain, ".detach()");
        Some(Edit {
            range: TextRange::new(head.as_ref().map_or(dot - 1, |_| range.start), range.end),
            content: head.unwrap_or_default() + ".detach()",
        })
    } else {
        None
    };
    let fix = edit.map(|edit| Fix {
        title: "Use `.detach()` instead of `.data`".into(),
        applicability: if kept {
            Applicability::Unsafe
        } else {
            Applicability::Safe
        },
        edits: vec![edit],
    });
    Some(Finding {
        rule: Rule::DataAccess,
        severity: Severity::Information,
        range,
        message: format!(
            "`{}` bypasses the version counter; `.detach()` gives the same values and keeps autograd's checks",
            ctx.snippet(attr)
        ),
        related: Vec::new(),
        fix,
        alternatives: Vec::new(),
    })
}
