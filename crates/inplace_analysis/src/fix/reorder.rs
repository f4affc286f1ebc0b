//! Statements moved or repeated: a `step()` after the `backward()` it would break, an
//! optimizer built again after what it holds was replaced.

use super::*;
use crate::events::Shape;
use crate::syntax::outline::ItemKind;

/// A one-line statement `s` moved to just after the statement around `after` (later in the
/// same block: same indentation, and no line between them less indented; checked on the
/// text). For a `step()` that runs before a `backward()` through what it updates.
/// `zero_grad`: whether it may move past gradients being zeroed (`actor_opt.zero_grad()` of
/// another optimizer over a shared trunk), after which a step would apply other gradients
/// than its own.
pub(crate) fn move_after(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    after: Span,
    zero_grad: ZeroGrad,
) -> Option<Fix> {
    move_group_after(ctx, s, after, zero_grad, false)
}

/// [`move_after`], or, with `group`, the statement together with the simple statements
/// after it in its block that use what it uses, up to the first that does not (an EMA's
/// `apply_shadow(model)`, the validation that reads `model`, `restore(model)`: the three move
/// after the `backward()` as one). None of them may step, zero gradients or run a backward,
/// and nothing left before the target may read what they bind.
fn move_group_after(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    after: Span,
    zero_grad: ZeroGrad,
    group: bool,
) -> Option<Fix> {
    let across_zero_grad = zero_grad != ZeroGrad::Blocks;
    let body = ctx.body(s.item)?;
    let moved = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    // (A module-level statement is an item of its own: the two may be in different items.)
    let other = ctx.body(after.item)?;
    let target = simple_statement_at(&other, after.rel)?;
    let target = ctx.range(Span::new(after.item, other.stmt_span(target)))?;
    let (indent, eol) = indentation(ctx, moved.start)?;
    let text = ctx.text_all();
    let line = ctx.lines.line_of(moved.start);
    // (A compound statement moves with all its lines: `with torch.no_grad():` and its loop.)
    let last_line = ctx
        .lines
        .line_of(moved.end.saturating_sub(1).max(moved.start));
    let (from, to) = (
        ctx.lines.line_start(line),
        ctx.lines.line_start(last_line + 1),
    );
    let last = ctx.lines.line_of(target.end);
    if !same_block(ctx, moved, target, indent) {
        return None;
    }
    let insert = ctx.lines.line_start(last + 1);
    if insert < target.end {
        return None;
    }
    // (Where it may cross gradients being zeroed, a line that only zeroes them commutes with
    // it: `self.pull()` loading weights moves past `self.model.zero_grad()`.)
    let commuting = |between: &str| -> String {
        if zero_grad == ZeroGrad::Commutes {
            let kept = between.lines().filter(|l| !only_zeroes_grad(l));
            kept.collect::<Vec<_>>().join("\n")
        } else {
            between.to_string()
        }
    };
    // What may not be in between, nor move with it: a call of the program's own functions or
    // methods that may touch the optimizer or the gradients (`self.reset_grad()` zeroing
    // them), judged on their text.
    let own_touching = |between: &str, paths: &[&str]| {
        let touches = |def: &str| {
            ["zero_grad", ".step(", "backward(", ".grad"]
                .iter()
                .any(|w| def.contains(w))
                || paths
                    .iter()
                    .any(|p| mentions_path(def, p.rsplit('.').next().unwrap_or(p)))
        };
        calls_own_code(between, |name| definitions(ctx, name).any(touches))
    };
    // The statements that follow it in the group: `to` is where the group ends.
    let mut to = to;
    let mut joined = Vec::new();
    while group && joined.len() < MAX_GROUP {
        let rest = commuting(text.get(to..target.start)?);
        let moving = text.get(moved.start..to)?;
        if !(used_paths(moving).iter()).any(|p| mentions_path(&rest, p)) {
            break;
        }
        let len = first_statement(text.get(to..target.start)?, indent.len())?;
        let next = text.get(to..to + len)?;
        let stepping = ["backward(", ".step(", "zero_grad(", ".grad"];
        if stepping.iter().any(|w| next.contains(w)) || own_touching(next, &[]) {
            return None;
        }
        joined.push(next);
        to += len;
    }
    let moving = text.get(moved.start..to)?;
    // Nothing in between may use what the statement uses (`scaler.update()` after
    // `scaler.step(opt)`, `opt.zero_grad()` after `opt.step()`): that order must stay. What
    // it uses is each dotted path it reads, its method names left out (`self.opt_g` of
    // `self.opt_g.step()`: `self.disc(fake)` in between does not use it).
    let at = body.stmt_span(s.stmt);
    let between = commuting(text.get(to..target.start)?);
    let between = between.as_str();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let paths = used_paths(moving);
    if paths.iter().any(|p| mentions_path(between, p)) {
        return None;
    }
    if !across_zero_grad && between.contains("zero_grad(") {
        return None;
    }
    if own_touching(between, &paths) {
        return None;
    }
    // Nor may what follows, the target included, read a name it binds: `loss = model(a) +
    // model(b)` (or `loss += model(b)`) cannot move after `loss.backward()`.
    let upto = text.get(to..target.end)?;
    let reads = |n: &str| upto.split(|c: char| !is_word(c)).any(|w| w == n);
    // (Nor, of the statements moved with it, anything they use: `losses.append(reg)` before
    // `sum(losses).backward()`, `loss: Tensor = loss + reg`. Everything else in between
    // mentions none of it.)
    let after_group = text.get(to..target.end).unwrap_or_default();
    if names_bound_in(&body, at)
        .iter()
        .any(|n| reads(ctx.name(*n)))
        || (joined
            .iter()
            .flat_map(|j| bound_paths(j).into_iter().chain(used_paths(j))))
        .any(|p| mentions_path(after_group, p))
    {
        return None;
    }
    // The statement with what follows it on its last line (a comment).
    let stmt = ctx.slice(moved).lines().next().unwrap_or_default();
    let stmt = stmt.trim_end_matches(':');
    let (_, end) = ctx.lines.line_range(text, last_line);
    let rest = text.get(moved.end..end)?.trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) || to <= end {
        return None;
    }
    let whole = match joined.last() {
        None => text.get(moved.start..end)?,
        Some(_) => text.get(moved.start..to)?.trim_end_matches(['\n', '\r']),
    };
    // The same statement already follows there (`optimizer.step()` after each of two
    // backwards): moving it would run it twice in a row (two updates from one gradient); the
    // early one goes, and the one after the backward takes both losses' gradients.
    let next = text
        .get(insert..)
        .and_then(|t| t.lines().find(|l| !l.trim().is_empty()));
    let code = |l: &str| l.split('#').next().unwrap_or_default().trim().to_string();
    // (In the same block: the same indentation, not a step after the loop.)
    let same_block = |l: &str| l.len() - l.trim_start().len() == indent.len();
    // (Not for a group: the others are to move, not go.)
    if joined.is_empty() && next.is_some_and(|n| same_block(n) && code(n) == code(stmt)) {
        return Some(Fix {
            title: format!(
                "Remove this `{}`: the one after `{}` steps with both gradients",
                code(stmt),
                ctx.slice(target)
            ),
            applicability: Applicability::Unsafe,
            edits: vec![Edit {
                range: TextRange::new(from, to),
                content: String::new(),
            }],
        });
    }
    let sep = line_break_before(ctx, insert, eol);
    let title = match joined.last() {
        None => format!("Move `{stmt}` after `{}`", ctx.slice(target)),
        Some(last) => format!(
            "Move `{stmt}` through `{}` after `{}`",
            (last.lines().map(str::trim))
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .unwrap_or_default()
                .trim_end_matches(':'),
            ctx.slice(target)
        ),
    };
    Some(Fix {
        title,
        applicability: Applicability::Unsafe,
        edits: vec![
            Edit {
                range: TextRange::new(from, to),
                content: String::new(),
            },
            Edit {
                range: TextRange::new(insert, insert),
                content: format!("{sep}{indent}{whole}{eol}"),
            },
        ],
    })
}

/// The outermost loop around the replacement `s` that only replaces (`for m in
/// model.modules(): prune_(m)`): no `step()`, no `backward()` in it, nor the statement that
/// built the optimizer. The optimizer is built again once, after it.
fn replacing_loop(
    ctx: &RenderCtx<'_>,
    body: &Body,
    s: StmtRef,
    built: TextRange,
) -> Option<StmtId> {
    let at = body.stmt_span(s.stmt);
    // The name the optimizer is bound to (`opt = torch.optim.SGD(...)`).
    let optimizer_name = (ctx.slice(built).split_once('='))
        .map(|(lhs, _)| lhs.trim())
        .filter(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.'))
        });
    let mut loops: Vec<(u32, StmtId)> = (0..body.stmts.len())
        .filter(|&k| matches!(body.stmts[k], Stmt::For { .. } | Stmt::While { .. }))
        .filter(|&k| body.stmt_spans[k].contains(at) && body.stmt_spans[k] != at)
        .map(|k| {
            let sp = body.stmt_spans[k];
            (sp.end - sp.start, StmtId(k as u32))
        })
        .collect();
    loops.sort();
    loops
        .into_iter()
        .map(|(_, k)| k)
        .take_while(|k| {
            ctx.range(Span::new(s.item, body.stmt_span(*k)))
                .is_some_and(|r| {
                    let text = ctx.slice(r);
                    let holds_built = r.start <= built.start && built.end <= r.end;
                    // (Nor one that hands the optimizer on: `train_epoch(model, opt, loader)`.)
                    let names_opt = optimizer_name.is_some_and(|n| mentions_path(text, n));
                    !(holds_built
                        || names_opt
                        || text.contains(".step(")
                        || text.contains("backward("))
                })
        })
        .last()
}

/// How a statement moved after a `backward()` may pass a line that zeroes gradients.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZeroGrad {
    /// Not at all (a step would then apply other gradients than its own).
    Blocks,
    /// It may, when nothing else it uses is in between (another optimizer's `zero_grad()`).
    Crossed,
    /// It may, whatever that line names: a write into parameters commutes with zeroing their
    /// gradients (`self.pull()` loading weights past `self.model.zero_grad()`).
    Commutes,
}

/// A line that is one call zeroing gradients (`opt.zero_grad()`, `self.model.zero_grad(set_to_none=True)`).
pub(super) fn only_zeroes_grad(line: &str) -> bool {
    let code = line.split('#').next().unwrap_or_default().trim();
    code.split_once(".zero_grad(").is_some_and(|(path, args)| {
        !path.is_empty()
            && path
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.'))
            && args.ends_with(')')
            && !args[..args.len() - 1].contains(['(', ')'])
    })
}

/// A write into a parameter (under `no_grad`) between a forward and the `backward()` that
/// reads what the forward saved of it: the statement that writes, or the call it is made in,
/// moves after the `backward()` (a parameter cannot be written on a copy).
pub(crate) fn parameter_write_after(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    trigger: &crate::events::Trigger,
) -> Option<Fix> {
    if !w.into_leaf {
        return None;
    }
    write_after_backward(ctx, w, trigger)
}

/// The statement that writes `w`, or the call it is made in, or the smallest block around it
/// made only of in-place writes, moved after the `backward()` that reads what it writes (a
/// parameter written through `.data` between a forward and its backward).
pub(crate) fn write_after_backward(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    trigger: &crate::events::Trigger,
) -> Option<Fix> {
    if !trigger.backward {
        return None;
    }
    // (The write itself when the `backward()` is in its own function: a method that writes
    // and runs backward, called from elsewhere.)
    // Else the innermost call made there (`self.pull()` in the method that runs the backward,
    // called in turn from the module's code).
    let own = w.stmt.filter(|s| s.item == trigger.range.item);
    let there = (w.call_path.iter().rev()).find(|c| c.item == trigger.range.item);
    let s = match (own, there.or(w.call_site.as_ref())) {
        (None, Some(&site)) => StmtRef {
            item: site.item,
            stmt: simple_statement_at(&*ctx.body(site.item)?, site.rel)?,
        },
        _ => w.stmt?,
    };
    // The statement, else the smallest statement around it that can move (the `with
    // torch.no_grad():` block holding the loop that writes each parameter): only a `with` or a
    // `for` whose simple statements are all in-place writes (a loop that also runs the forward,
    // `losses.append(model(x))`, must stay before the backward).
    let body = ctx.body(s.item)?;
    let at = body.stmt_span(s.stmt);
    // (Not between two backward passes of one loss, the first keeping its graph
    // (`loss.backward(retain_graph=True); opt.first_step(); loss.backward()`, a SAM step): the
    // second is meant to see the update, and after it the write would undo what the code does;
    // the loss is to be computed again.)
    if repeated_backward(ctx, &body, s.item, at, trigger.range) {
        return None;
    }
    // (Or an `if` around the call that writes, `if update_first: head.update_stats(r)`.)
    let only_writes = |span: Rel| {
        (body.stmts.iter().zip(&body.stmt_spans))
            .filter(|(_, sp)| span.contains(**sp) && **sp != span)
            .all(|(st, sp)| match *st {
                _ if *sp == at => true,
                Stmt::For { .. } | Stmt::With { .. } | Stmt::AugAssign { .. } => true,
                Stmt::Expr(e) => match *body.expr(e) {
                    Expr::Call { func, .. } => matches!(
                        *body.expr(func),
                        Expr::Attr { attr, .. } if ctx.name(attr).ends_with('_')
                    ),
                    _ => false,
                },
                _ => false,
            })
    };
    let mut around: Vec<(u32, StmtId)> = (0..body.stmts.len())
        .filter(|&k| body.stmt_spans[k].contains(at) && body.stmt_spans[k] != at)
        .filter(|&k| match body.stmts[k] {
            Stmt::For { .. } | Stmt::With { .. } => true,
            // (Not an `if` whose condition reads a gradient: after the backward it is another.)
            Stmt::If { .. } => !ctx
                .text(Span::new(
                    s.item,
                    Rel::new(body.stmt_spans[k].start, at.start),
                ))
                .contains(".grad"),
            _ => false,
        })
        .filter(|&k| only_writes(body.stmt_spans[k]))
        .map(|k| {
            (
                body.stmt_spans[k].end - body.stmt_spans[k].start,
                StmtId(k as u32),
            )
        })
        .collect();
    around.sort();
    std::iter::once(s.stmt)
        .chain(around.into_iter().map(|(_, k)| k))
        .find_map(|stmt| {
            let s = StmtRef { item: s.item, stmt };
            move_group_after(ctx, s, trigger.range, ZeroGrad::Commutes, true)
        })
}

/// Whether the `backward()` at `backward` repeats one of the same tensor with
/// `retain_graph=True`, a statement of the same block level made before the statement at `at`
/// (of item `item`), in its function (or at module level).
fn repeated_backward(
    ctx: &RenderCtx<'_>,
    body: &Body,
    item: ItemId,
    at: Rel,
    backward: Span,
) -> bool {
    let text = ctx.text(backward);
    let Some(receiver) = text.find(".backward(").map(|k| &text[..k]) else {
        return false;
    };
    !receiver.is_empty()
        && lines_before(ctx, body, item, at).is_some_and(|(indent, before)| {
            let head = format!("{indent}{receiver}.backward(");
            (before.lines()).any(|l| l.starts_with(&head) && l.contains("retain_graph=True"))
        })
}

/// Whether a `backward()` runs in a statement of the same block level (or nested in one) made
/// before the statement `s`, in its function (or at module level): a step there follows its own
/// loss's backward, and a later `backward()` is another loss's.
pub(crate) fn backward_before(ctx: &RenderCtx<'_>, s: StmtRef) -> bool {
    let Some(body) = ctx.body(s.item) else {
        return false;
    };
    // (At its level or nested in a statement there: `if scaler: scaler.scale(l).backward()`.)
    lines_before(ctx, &body, s.item, body.stmt_span(s.stmt)).is_some_and(|(indent, before)| {
        (before.lines()).any(|l| {
            let code = l.split('#').next().unwrap_or_default();
            code.starts_with(indent) && code.contains(".backward(")
        })
    })
}

/// The indentation of the statement at `at` (of item `item`) and the text from the start of
/// its innermost function (or of the module) to it.
fn lines_before<'a>(
    ctx: &RenderCtx<'a>,
    body: &Body,
    item: ItemId,
    at: Rel,
) -> Option<(&'a str, &'a str)> {
    let stmt = ctx.range(Span::new(item, at))?;
    let func = (body.funcs.iter())
        .filter(|f| f.span.contains(at))
        .min_by_key(|f| f.span.end - f.span.start)
        .map_or(Some(0), |f| Some(ctx.range(Span::new(item, f.span))?.start))?;
    let (indent, _) = indentation(ctx, stmt.start)?;
    Some((
        indent,
        ctx.slice(crate::finding::TextRange::new(func, stmt.start)),
    ))
}

/// A write into a parameter (under `no_grad`) after the op that saved it, in the same block
/// (`out = self.bag(ids, offsets, per_sample_weights=g)`, then `with torch.no_grad():
/// self.bag.weight[pad] = 0`): the statement that writes, with the block around it, moves
/// before the statement that saved, so the op reads the written values and `backward()` finds
/// them unchanged. Unsafe: the op now sees the new values. Only over simple statements that do
/// not bind a name it reads.
pub(crate) fn parameter_write_before(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    save: Span,
) -> Option<Fix> {
    let s = w.stmt.filter(|s| w.into_leaf && s.item == save.item)?;
    let body = ctx.body(s.item)?;
    let saving = simple_statement_at(&body, save.rel)?;
    let saving_at = body.stmt_span(saving);
    let saving_range = ctx.range(Span::new(s.item, saving_at))?;
    let (indent, _) = indentation(ctx, saving_range.start)?;
    // The statement around the write at the saving statement's level.
    let write_at = body.stmt_span(s.stmt);
    let moved = (0..body.stmts.len())
        .map(|i| body.stmt_spans[i])
        .filter(|sp| sp.contains(write_at) && sp.start >= saving_at.end)
        .filter_map(|sp| Some((sp, ctx.range(Span::new(s.item, sp))?)))
        .find(|(_, r)| indentation(ctx, r.start).is_some_and(|(i, _)| i == indent))?;
    let (moved_at, moved_range) = moved;
    if !same_block(ctx, saving_range, moved_range, indent) {
        return None;
    }
    // Run once before the trigger: a second call's write would still change what the first
    // call saved (`loss = f(a, p) + f(b, p)`).
    if ctx
        .unit
        .writes
        .iter()
        .filter(|x| x.range == w.range)
        .count()
        > 1
    {
        return None;
    }
    // Between the two (the saving statement included), simple statements only; neither side
    // reads a name the other binds.
    let between = Rel::new(saving_at.start, moved_at.start);
    let simple = (body.stmts.iter().zip(&body.stmt_spans))
        .filter(|(_, sp)| between.contains(**sp))
        .all(|(st, _)| matches!(st, Stmt::Assign { .. } | Stmt::Expr(_)));
    if !simple
        || reads_any(&body, moved_at, &names_bound_in(&body, between))
        || reads_any(&body, between, &names_bound_in(&body, moved_at))
    {
        return None;
    }
    // Whole lines: from the moved statement's line to the end of its last line.
    let text = ctx.text_all();
    let last = ctx.lines.line_of(moved_range.end);
    let (_, end) = ctx.lines.line_range(text, last);
    let rest = text.get(moved_range.end..end)?.trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    let from = ctx.lines.line_start(ctx.lines.line_of(moved_range.start));
    let to = ctx.lines.line_start(last + 1);
    let lines = text.get(from..to)?;
    if to <= end || !lines.ends_with('\n') {
        return None;
    }
    let at = ctx.lines.line_start(ctx.lines.line_of(saving_range.start));
    let first = ctx.slice(moved_range).lines().next().unwrap_or_default();
    Some(Fix {
        title: format!(
            "Move `{}` before `{}`",
            first.trim_end_matches(':'),
            ctx.slice(saving_range)
        ),
        applicability: Applicability::Unsafe,
        edits: vec![
            Edit {
                range: TextRange::new(at, at),
                content: lines.to_string(),
            },
            Edit {
                range: TextRange::new(from, to),
                content: String::new(),
            },
        ],
    })
}

/// A recurrent state carried from one step of a training loop into the next
/// (`out, hidden = model(x, hidden)`) keeps the previous step's graph, whose saved weights the
/// `step()` (`s`) changed: the state is detached right after the call that makes it
/// (`hidden = hidden.detach()`), so each step's backward stops at its own graph.
pub(crate) fn detach_carried_state(ctx: &RenderCtx<'_>, s: StmtRef) -> Option<Fix> {
    let body = ctx.body(s.item)?;
    let step = body.stmt_span(s.stmt);
    let lp = loop_around(&body, step)?;
    let (Stmt::For { body: block, .. } | Stmt::While { body: block, .. }) = body.stmts[lp] else {
        return None;
    };
    for st in body.stmts_of(block) {
        let Stmt::Assign { targets, value } = *body.stmt(st) else {
            continue;
        };
        if body.stmt_span(st).start >= step.start {
            break;
        }
        let Expr::Call { args, .. } = *body.expr(value) else {
            continue;
        };
        let mut passed = Vec::new();
        for a in body.exprs_of(body.args[args as usize].positional) {
            names_in(&body, a, &mut passed);
        }
        let bound = names_bound_by(&body, targets);
        let carried: Vec<(&str, ExprId)> = bound
            .iter()
            .filter(|(n, _)| passed.iter().any(|(p, _)| p == n))
            .map(|(n, e)| (ctx.name(*n), *e))
            .collect();
        if carried.is_empty() {
            // Carried under a second name (`out, h_next = rnn(x, h_cur)` ... `h_cur = h_next`):
            // detached where it is handed over.
            if let Some(fix) = detach_handover(ctx, s.item, &body, block, &passed, &bound) {
                return Some(fix);
            }
            continue;
        }
        // Each carried value detached as what it is (a tensor, a tuple or a `NamedTuple` of
        // tensors); anything else has no one-line detach.
        let mut detached = Vec::new();
        for (n, e) in &carried {
            detached.push(detached_as(ctx, n, Span::new(s.item, body.expr_span(*e)))?);
        }
        let carried: Vec<&str> = carried.iter().map(|(n, _)| *n).collect();
        let at = ctx.range(Span::new(s.item, body.stmt_span(st)))?;
        let stmt = format!("{} = {}", carried.join(", "), detached.join(", "));
        let title = format!("Detach the state carried into the next step: `{stmt}`");
        return statement_after(ctx, at, &stmt, title);
    }
    None
}

/// Statement `stmt` inserted on a line of its own after the one-line statement at `at`, at its
/// indentation (unsafe).
fn statement_after(ctx: &RenderCtx<'_>, at: TextRange, stmt: &str, title: String) -> Option<Fix> {
    let (indent, eol) = line_layout(ctx, at)?;
    let insert = ctx.lines.line_start(ctx.lines.line_of(at.end) + 1);
    if insert < at.end {
        return None;
    }
    let sep = line_break_before(ctx, insert, eol);
    Some(Fix {
        title,
        applicability: Applicability::Unsafe,
        edits: vec![Edit {
            range: TextRange::new(insert, insert),
            content: format!("{sep}{indent}{stmt}{eol}"),
        }],
    })
}

/// A recurrent state a module keeps as an attribute from one call to the next (`out,
/// self.hidden = self.lstm(x, self.hidden)` in its `forward`, or a statement calling it) keeps
/// the previous step's graph, whose saved weights the `step()` changed: detached right after
/// the statement that makes it (`self.hidden = type(self.hidden)(t.detach() for t in
/// self.hidden)`), as a language model's `repackage_hidden` does. `stmts`: the statements, from
/// the innermost, that made the stale save.
pub(crate) fn detach_attribute_state(
    ctx: &RenderCtx<'_>,
    stmts: impl Iterator<Item = StmtRef>,
) -> Option<Fix> {
    for s in stmts {
        let Some(body) = ctx.body(s.item) else {
            continue;
        };
        let Stmt::Assign { targets, value } = *body.stmt(s.stmt) else {
            continue;
        };
        let Expr::Call { args, .. } = *body.expr(value) else {
            continue;
        };
        let text = |e: ExprId| ctx.text(Span::new(s.item, body.expr_span(e)));
        let a = body.args[args as usize];
        let passed: Vec<&str> = (body.exprs_of(a.positional))
            .chain(
                body.list(a.keywords)
                    .iter()
                    .filter_map(|k| body.keywords[*k as usize].value.get()),
            )
            .map(text)
            .collect();
        let mut attrs = Vec::new();
        for t in body.exprs_of(targets) {
            match *body.expr(t) {
                Expr::Attr { .. } => attrs.push(t),
                Expr::Seq { items, .. } => attrs.extend(
                    (body.exprs_of(items)).filter(|i| matches!(body.expr(*i), Expr::Attr { .. })),
                ),
                _ => {}
            }
        }
        let carried: Vec<ExprId> = (attrs.into_iter())
            .filter(|t| passed.contains(&text(*t)))
            .collect();
        let [one] = carried.as_slice() else {
            continue;
        };
        let n = text(*one);
        let detached = detached_as(ctx, n, Span::new(s.item, body.expr_span(*one)))?;
        let at = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
        let stmt = format!("{n} = {detached}");
        let title = format!("Detach the state kept for the next call: `{stmt}`");
        return statement_after(ctx, at, &stmt, title);
    }
    None
}

/// `h_cur = h_next` in loop body `block`, where `h_cur` is passed to a call and `h_next` is
/// what it returned (`bound`): rewritten `h_cur = h_next.detach()`, so the next step starts
/// from the value without the graph the step's parameters were saved in.
fn detach_handover(
    ctx: &RenderCtx<'_>,
    item: crate::ir::ItemId,
    body: &Body,
    block: crate::ir::Block,
    passed: &[(Name, ExprId)],
    bound: &[(Name, ExprId)],
) -> Option<Fix> {
    for st in body.stmts_of(block) {
        let Stmt::Assign { targets, value } = *body.stmt(st) else {
            continue;
        };
        let ([target], Expr::Name { name: from, .. }) = (body.list(targets), body.expr(value))
        else {
            continue;
        };
        let Expr::Name { name: to, .. } = *body.expr(ExprId(*target)) else {
            continue;
        };
        let Some((_, made)) = bound.iter().find(|(n, _)| n == from) else {
            continue;
        };
        if !passed.iter().any(|(p, _)| *p == to) {
            continue;
        }
        let detached = detached_as(ctx, ctx.name(*from), Span::new(item, body.expr_span(*made)))?;
        let at = ctx.range(Span::new(item, body.expr_span(value)))?;
        let stmt = format!("{} = {detached}", ctx.name(to));
        return Some(Fix {
            title: format!("Detach the state carried into the next step: `{stmt}`"),
            applicability: Applicability::Unsafe,
            edits: vec![Edit {
                range: at,
                content: detached,
            }],
        });
    }
    None
}

/// The dotted paths a statement's text reads (`self.opt_g.step(closure)`: `self.opt_g`,
/// `closure`), a called path without its last part (the method).
fn used_paths(stmt: &str) -> Vec<&str> {
    let bytes = stmt.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // (Not inside a string, nor a number.)
        if bytes[i] == b'"' || bytes[i] == b'\'' {
            let q = bytes[i];
            i += 1;
            while i < bytes.len() && bytes[i] != q {
                i += 1 + usize::from(bytes[i] == b'\\');
            }
            i += 1;
            continue;
        }
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        // (A name after a dot, `x['g'].step`, `f(a).b`: part of a path not read from a name.)
        if i > 0 && bytes[i - 1] == b'.' {
            while i < bytes.len() && is_word(bytes[i]) {
                i += 1;
            }
            continue;
        }
        // (A number, `1e-3`: no path.)
        if bytes[i].is_ascii_digit() {
            while i < bytes.len() && (is_word(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
            continue;
        }
        let start = i;
        let mut last_dot = None;
        while i < bytes.len()
            && (is_word(bytes[i])
                || (bytes[i] == b'.' && i + 1 < bytes.len() && is_word(bytes[i + 1])))
        {
            if bytes[i] == b'.' {
                last_dot = Some(i);
            }
            i += 1;
        }
        let called = stmt[i..].trim_start().starts_with('(');
        let end = match (called, last_dot) {
            (true, Some(d)) => d,
            _ => i,
        };
        out.push(&stmt[start..end]);
    }
    out
}

/// The length of the first statement of `rest` (lines of one block indented by `indent`), up
/// to the end of its last line of code; `None` when it is none that moves (see [`COMPOUND`]),
/// a line is less indented, or there is nothing.
fn first_statement(rest: &str, indent: usize) -> Option<usize> {
    let (mut off, mut end) = (0, None);
    // (Brackets still open: a line at the block's indentation continues the statement, as
    // black's closing `)` does.)
    let mut depth = 0i32;
    for line in rest.split_inclusive('\n') {
        let code = line.trim_start();
        // (A triple-quoted string or a backslash continuation: where the statement ends is
        // not read from the text.)
        if code.contains("\"\"\"") || code.contains("'''") || code.trim_end().ends_with('\\') {
            return None;
        }
        if !(code.is_empty() || code.starts_with('#')) {
            let at = line.len() - code.len();
            let head = code
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap_or_default();
            match end {
                _ if depth > 0 => {}
                None if at == indent => {
                    if COMPOUND.contains(&head) {
                        return None;
                    }
                }
                // (`else:`, `elif`, `except`, `finally` go on with the statement above.)
                Some(_) if at == indent && CLAUSES.contains(&head) => {}
                Some(_) if at == indent => break,
                Some(_) if at > indent => {}
                _ => return None,
            }
            depth += bracket_balance(code);
            end = Some(off + line.len());
        }
        off += line.len();
    }
    // (A statement left open, or one that leaves its block early, does not move.)
    let taken = &rest[..end?];
    let exits = taken
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| EXITS.contains(&w));
    (depth == 0 && !exits).then_some(end?)
}

/// Clauses that go on with the compound statement above them.
const CLAUSES: &[&str] = &["else", "elif", "except", "finally"];

/// Words that leave a block early: a statement holding one would skip what follows it when
/// moved (an `if` around a `return` that guarded the backward).
const EXITS: &[&str] = &["return", "break", "continue", "raise", "yield"];

/// Brackets opened minus closed on a line of code (strings and a trailing comment left out).
fn bracket_balance(line: &str) -> i32 {
    let (mut depth, mut quote) = (0, None);
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), _) if ch == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(ch),
            (None, '#') => break,
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// Statements moved along with the one a fix moves, at most.
const MAX_GROUP: usize = 16;

/// Keywords of statements that do not move in a group: definitions, imports, and those that
/// change the control flow or catch it (a `with`, `if` or `for` block moves whole).
const COMPOUND: &[&str] = &[
    "try", "def", "class", "async", "match", "return", "break", "continue", "raise", "yield",
    "del", "global", "nonlocal", "import", "from", "while", "elif", "else", "except", "finally",
    "lambda",
];

/// The names and attribute paths the lines of a statement's text bind (`val = ...`, `a, b =
/// ...`, `self.n += 1`, `for i, b in ...`, `with ... as f`); none for a subscript's target.
fn bound_paths(stmt: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in stmt.lines() {
        let code = line.trim_start();
        out.extend(assigned_paths(code));
        if let Some(targets) = code
            .strip_prefix("for ")
            .and_then(|t| t.split(" in ").next())
        {
            out.extend(targets.split(',').map(|t| t.trim_matches([' ', '(', ')'])));
        }
        if code.starts_with("with ") {
            let names = code.split(" as ").skip(1);
            out.extend(names.filter_map(|n| n.split([',', ':', ')']).next().map(str::trim)));
        }
    }
    out.retain(|p| is_path(p));
    out
}

/// A name or dotted attribute path (`val`, `self.n`).
fn is_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && p.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.'))
}

/// The names and attribute paths an assignment's line binds (see [`bound_paths`]).
fn assigned_paths(code: &str) -> Vec<&str> {
    let bytes = code.as_bytes();
    // The first `=` that is an assignment (not `==`, `<=`, `>=`, `!=`), outside brackets.
    let mut depth = 0i32;
    let mut eq = None;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'"' | b'\'' | b'#' | b'\n' => break,
            b'=' if depth == 0 => {
                let prev = i.checked_sub(1).map(|k| bytes[k]);
                let next = bytes.get(i + 1).copied();
                if next != Some(b'=') && !matches!(prev, Some(b'=' | b'<' | b'>' | b'!')) {
                    eq = Some(i);
                }
                break;
            }
            _ => {}
        }
    }
    let Some(eq) = eq else { return Vec::new() };
    let lhs = code[..eq].trim_end_matches(|c: char| "+-*/%@&|^<> ".contains(c));
    lhs.split(',')
        .map(str::trim)
        .filter(|p| is_path(p))
        .collect()
}

/// Whether `between` calls a name for which `own` holds (a function or method of the program
/// that may touch the optimizer: `self.reset_grad()`).
fn calls_own_code(between: &str, own: impl Fn(&str) -> bool) -> bool {
    let bytes = between.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        let name = &between[start..i];
        let called = between[i..].trim_start().starts_with('(');
        if called && !name.as_bytes()[0].is_ascii_digit() && own(name) {
            return true;
        }
    }
    false
}

/// The texts of the program's functions and methods named `name` (its items: a function
/// nested in another is not one).
fn definitions<'a>(ctx: &'a RenderCtx<'_>, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    (ctx.prog.items.iter())
        .filter(move |it| {
            it.kind() == ItemKind::Function && it.name.is_some_and(|n| ctx.name(n) == name)
        })
        .map(|it| {
            ctx.text_all()
                .get(it.outline.start as usize..it.outline.end as usize)
                .unwrap_or("")
        })
}

/// Whether `text` reads dotted path `path` (or something under it: `opt.zero_grad()` reads
/// `opt`), as a whole path, not a part of a longer name.
fn mentions_path(text: &str, path: &str) -> bool {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    text.match_indices(path).any(|(i, _)| {
        let before = text.as_bytes()[..i].last().copied();
        let after = text.as_bytes().get(i + path.len()).copied();
        !before.is_some_and(|b| is_word(b) || b == b'.') && !after.is_some_and(is_word)
    })
}

/// The innermost loop around `span`.
pub(super) fn loop_around(body: &Body, span: Rel) -> Option<usize> {
    (0..body.stmts.len())
        .filter(|&i| matches!(body.stmts[i], Stmt::For { .. } | Stmt::While { .. }))
        .filter(|&i| body.stmt_spans[i].contains(span))
        .min_by_key(|&i| body.stmt_spans[i].end - body.stmt_spans[i].start)
}

/// The plain names bound by the assignments and augmented assignments within `within`.
pub(super) fn names_bound_in(body: &Body, within: Rel) -> Vec<Name> {
    let mut out = Vec::new();
    for (st, sp) in body.stmts.iter().zip(&body.stmt_spans) {
        if !within.contains(*sp) {
            continue;
        }
        match *st {
            Stmt::Assign { targets, .. } => out.extend(names_bound_by(body, targets)),
            Stmt::AugAssign { target, .. } => names_in(body, target, &mut out),
            _ => {}
        }
    }
    out.into_iter().map(|(n, _)| n).collect()
}

/// Whether a plain name within `within` (read or bound) is one of `names`.
fn reads_any(body: &Body, within: Rel, names: &[Name]) -> bool {
    (body.exprs.iter().zip(&body.expr_spans)).any(|(e, span)| {
        matches!(*e, Expr::Name { name, .. } if within.contains(*span) && names.contains(&name))
    })
}

/// The plain names an assignment's targets bind (`a = b = f()`, `h, c = state`), with their
/// expressions.
pub(super) fn names_bound_by(body: &Body, targets: crate::ir::List) -> Vec<(Name, ExprId)> {
    let mut out = Vec::new();
    for t in body.exprs_of(targets) {
        names_in(body, t, &mut out);
    }
    out
}

/// `n` detached as what the analysis saw its target (`at`) hold: a tensor (`n.detach()`), a
/// tuple or list of tensors, a dict of them (its values), or a `NamedTuple` of them; anything
/// else has no one-line detach.
fn detached_as(ctx: &RenderCtx<'_>, n: &str, at: Span) -> Option<String> {
    Some(match ctx.unit.shapes.get(&at)? {
        Shape::Tensor => format!("{n}.detach()"),
        Shape::Tensors => format!("type({n})(t.detach() for t in {n})"),
        Shape::Dict => format!("{{k: v.detach() for k, v in {n}.items()}}"),
        Shape::NamedTuple => format!("type({n})(*(t.detach() for t in {n}))"),
        Shape::Other => return None,
    })
}

/// The plain names in an expression that is a name or a tuple/list of them.
pub(super) fn names_in(body: &Body, e: ExprId, out: &mut Vec<(Name, ExprId)>) {
    match *body.expr(e) {
        Expr::Name { name, .. } => out.push((name, e)),
        Expr::Seq { items, .. } => {
            for i in body.exprs_of(items) {
                names_in(body, i, out);
            }
        }
        _ => {}
    }
}

/// After a statement that replaces what an optimizer holds, the statement that built the
/// optimizer again (`opt = torch.optim.SGD(model.parameters(), lr=0.1)`), so that it holds
/// the new parameters: when that statement is one line, earlier in the same block.
pub(crate) fn rebuild_optimizer(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    optimizer: Span,
    call_path: &[Span],
) -> Option<Fix> {
    let other = ctx.body(optimizer.item)?;
    let built = simple_statement_at(&other, optimizer.rel)?;
    if !matches!(other.stmt(built), Stmt::Assign { .. }) {
        return None;
    }
    let built = ctx.range(Span::new(optimizer.item, other.stmt_span(built)))?;
    // The replacement, or the call that leads to it from the scope that built the optimizer
    // (`prune_(m)`, whose body assigns `layer.weight = nn.Parameter(...)`).
    let scope = scope_items(ctx, optimizer.item);
    let s = if scope.contains(&s.item) {
        s
    } else {
        let call = call_path.iter().rev().find(|c| scope.contains(&c.item))?;
        StmtRef {
            item: call.item,
            stmt: simple_statement_at(&*ctx.body(call.item)?, call.rel)?,
        }
    };
    let body = ctx.body(s.item)?;
    let (rebind, (indent, eol)) = match replacing_loop(ctx, &body, s, built) {
        // (Inserted after the loop's last line.)
        Some(k) => {
            let r = ctx.range(Span::new(s.item, body.stmt_span(k)))?;
            (r, indentation(ctx, r.start)?)
        }
        None => {
            let r = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
            (r, line_layout(ctx, r)?)
        }
    };
    let outer = line_layout(ctx, built)?.0;
    // In the same block, or in one the replacement is nested in (`model = copy.deepcopy(best)`
    // inside the training loop, the optimizer built before it): the name is bound again in the
    // same scope.
    let placed = match outer == indent {
        true => same_block(ctx, built, rebind, indent),
        false => built.end <= ctx.prog.entry_end() && nested_in_scope(ctx, built, rebind, outer),
    };
    if !placed {
        return None;
    }
    let again = ctx.slice(built);
    let at = ctx.lines.line_start(ctx.lines.line_of(rebind.end) + 1);
    // (Built again on the next line already: what still holds the old optimizer, a trainer
    // made before, is not mended by one more.)
    let next = ctx.text_all()[at..].lines().next().unwrap_or("");
    if next.trim() == again.trim() {
        return None;
    }
    let sep = line_break_before(ctx, at, eol);
    Some(one(
        format!("Build the optimizer again: `{again}`"),
        Applicability::Unsafe,
        TextRange::new(at, at),
        format!("{sep}{indent}{again}{eol}"),
    ))
}

/// What an insertion at `at` (the start of a line, or the end of a text without a final line
/// break) needs first: a line break when the text before does not end with one.
pub(super) fn line_break_before<'a>(ctx: &RenderCtx<'_>, at: usize, eol: &'a str) -> &'a str {
    if ctx.text_all()[..at].ends_with('\n') {
        ""
    } else {
        eol
    }
}

#[cfg(test)]
mod tests {
    use super::{bound_paths, calls_own_code, first_statement, mentions_path, used_paths};

    #[test]
    fn a_group_takes_whole_statements_of_its_block_and_stops_at_control_flow() {
        let rest =
            "    val = f(\n        model)\n    # note\n    ema.restore(model)\n    loss.backward()";
        let first = first_statement(rest, 4).unwrap();
        assert_eq!(&rest[..first], "    val = f(\n        model)\n");
        // (A `with` block moves whole; a `return` or a `try` does not move.)
        let block = "    with torch.no_grad():\n        v = m(x)\n    m.restore()\n";
        assert_eq!(
            first_statement(block, 4),
            Some("    with torch.no_grad():\n        v = m(x)\n".len())
        );
        assert_eq!(first_statement("    return loss\n", 4), None);
        assert_eq!(first_statement("    try:\n        f()\n", 4), None);
        // (A line less indented ends the block: nothing to take.)
        assert_eq!(first_statement("x = 1\n", 4), None);
        // (Black's closing bracket and an `else:` go on with the statement; an early exit
        // inside it keeps it in place.)
        let black = "    out = f(\n        a,\n    )\n    g()\n";
        assert_eq!(
            first_statement(black, 4),
            Some("    out = f(\n        a,\n    )\n".len())
        );
        let branches = "    if a:\n        f()\n    else:\n        g()\n    h()\n";
        assert_eq!(
            first_statement(branches, 4),
            Some(branches.len() - "    h()\n".len())
        );
        assert_eq!(first_statement("    if bad:\n        return\n", 4), None);
        assert_eq!(first_statement("    f(\n", 4), None);
    }

    #[test]
    fn bound_paths_are_assignment_loop_and_with_targets() {
        assert_eq!(bound_paths("val = ((model(x) - y) ** 2).mean()"), ["val"]);
        assert_eq!(bound_paths("a, self.b = f()"), ["a", "self.b"]);
        assert_eq!(bound_paths("n += 1"), ["n"]);
        assert!(bound_paths("x[0] = v").is_empty());
        assert!(bound_paths("f(k=1)").is_empty());
        assert!(bound_paths("if a == b: pass").is_empty());
        assert_eq!(
            bound_paths("for i, b in enumerate(xs):\n    with open(p) as fh:\n        pass"),
            ["i", "b", "fh"]
        );
    }

    #[test]
    fn a_statement_uses_its_receivers_and_arguments_not_its_method_names() {
        assert_eq!(
            used_paths("self.opt_g.step(closure)"),
            ["self.opt_g", "closure"]
        );
        assert_eq!(used_paths("scaler.step(opt)"), ["scaler", "opt"]);
        // (Keyword names count too: harmless; strings and numbers do not.)
        assert_eq!(
            used_paths("opt.step(lr=1e-3, tag='a.b')"),
            ["opt", "lr", "tag"]
        );
    }

    #[test]
    fn a_path_is_mentioned_whole_or_with_something_under_it() {
        assert!(mentions_path("self.opt_g.zero_grad()", "self.opt_g"));
        assert!(mentions_path("f(opt)", "opt"));
        assert!(!mentions_path("self.opt_g2.zero_grad()", "self.opt_g"));
        assert!(!mentions_path("trainer.self.opt_g", "self.opt_g"));
        assert!(!mentions_path("self.disc(fake)", "self.opt_g"));
    }

    #[test]
    fn paths_start_at_names_not_after_a_subscript_or_call() {
        assert_eq!(used_paths("opts['g'].step()"), ["opts"]);
        assert_eq!(used_paths("opts[0].step()"), ["opts"]);
    }

    #[test]
    fn a_call_is_judged_by_what_its_name_defines() {
        let own = |n: &str| n == "reset_grad";
        assert!(calls_own_code("        self.reset_grad()\n", own));
        assert!(!calls_own_code("        x = self.cuda(x)\n", own));
        assert!(!calls_own_code("        reset_grad = 1\n", own));
    }
}
