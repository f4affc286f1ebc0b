//! A `step()` in a loop whose `backward()` reaches the save it clobbers through what was
//! computed once before the loop and is read in it (PPO's `old_log_probs` kept with its graph,
//! `dist, values = ac(states)` reused each epoch): detached before the loop, or computed again
//! on each turn.

use super::reorder::{loop_around, names_bound_by, names_bound_in, names_in};
use super::*;
use crate::exec::Held;

/// A `step()` (statement `s`) in a loop whose `backward()` reaches the save it clobbers through
/// what a statement before the loop bound and the loop reads (`origin`: the statement that
/// made the save; `backward`: the backward that raises). One tensor: detached just before the
/// loop (`old_log_probs = old_log_probs.detach()`), so the loop's backward no longer goes
/// through the graph the first step made stale (what runs before the loop keeps it). Several
/// names, or an object that keeps the graph and has no `.detach()` (a distribution), all bound
/// by one statement: that statement is computed again at the top of the loop's body, a fresh
/// forward on each turn. Only a one-line assignment in the block the loop is in, whose values
/// the analysis saw carrying a graph, which the loop reads (not only through `.detach()`) and
/// neither binds nor differentiates itself.
pub(crate) fn detach_loop_input(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    origin: Option<StmtRef>,
    backward: Span,
) -> Option<Fix> {
    let origin = origin?;
    let body = ctx.body(s.item)?;
    let lp = loop_around(&body, body.stmt_span(s.stmt))?;
    let loop_range = ctx.range(Span::new(s.item, body.stmt_spans[lp]))?;
    // What runs on each iteration: the loop's body (its header's iterable is read once).
    let (Stmt::For { body: block, .. } | Stmt::While { body: block, .. }) = body.stmts[lp] else {
        return None;
    };
    let stmts: Vec<StmtId> = body.stmts_of(block).collect();
    let within = Rel {
        start: body.stmt_span(*stmts.first()?).start,
        end: body.stmt_span(*stmts.last()?).end,
    };
    // The statement that made the save; or, when that is inside a call made from this scope
    // (`advantages, returns = self._compute_advantages(batch)` in a method a script calls),
    // each assignment before the loop in its block.
    let own = scope_items(ctx, s.item).contains(&origin.item);
    let candidates: Vec<StmtRef> = match own {
        true => vec![origin],
        false => (body.siblings(StmtId(lp as u32)).into_iter())
            .take_while(|x| x.idx() != lp)
            .filter(|x| matches!(body.stmt(*x), Stmt::Assign { .. }))
            .map(|x| StmtRef {
                item: s.item,
                stmt: x,
            })
            .collect(),
    };
    let assigned = assignments(ctx, s.item);
    let (indent, eol) = indentation(ctx, loop_range.start)?;
    // Read by the loop, not bound by it (nor its target), not read by the backward that
    // raises (`loss.backward()`, `scaler.scale(loss).backward()`,
    // `torch.autograd.backward(loss)`: what it differentiates needs its graph).
    let other = ctx.body(backward.item)?;
    let differentiated = names_read(
        &other,
        other.stmt_span(super::simple_statement_at(&other, backward.rel)?),
    );
    let mut target_names = Vec::new();
    if let Stmt::For { target, .. } = body.stmts[lp] {
        names_in(&body, target, &mut target_names);
    }
    let in_loop = |n: &Name| target_names.iter().any(|(t, _)| t == n);
    let (read_in_loop, bound_in_loop) = (
        names_read_with_graph(ctx, &body, within),
        names_bound_in(&body, within),
    );
    let mut carried: Vec<(StmtRef, Name, Held)> = Vec::new();
    let keep =
        |n: Name| !differentiated.contains(&n) && !bound_in_loop.contains(&n) && !in_loop(&n);
    // (Made inside an earlier loop of the block, SinGAN's `fake = netG(noise)` at the end of
    // the discriminator's loop reused by every turn of the generator's: what it made is the
    // input the loop trains through, not a constant: computed again, never detached.)
    let mut earlier = false;
    for c in candidates {
        let found =
            loop_inputs_bound_by(ctx, c, (loop_range, indent), &assigned, keep).or_else(|| {
                let found = (own && c.item == s.item)
                    .then(|| made_in_earlier_loop(ctx, &body, c, lp, loop_range, &assigned, keep))
                    .flatten();
                earlier = found.is_some();
                found
            });
        match found {
            Some(names) => carried.extend(
                (names.into_iter())
                    .filter(|(n, _)| read_in_loop.contains(n))
                    .map(|(n, held)| (c, n, held)),
            ),
            None if own => return None,
            None => {}
        }
    }
    match carried.as_slice() {
        [(_, name, Held::Graph)] if !earlier => {
            let name = ctx.name(*name);
            let insert = ctx.lines.line_start(ctx.lines.line_of(loop_range.start));
            let stmt = format!("{name} = {name}.detach()");
            Some(one(
                format!("Detach what the loop reuses from before it: `{stmt}`"),
                Applicability::Unsafe,
                TextRange::new(insert, insert),
                format!("{indent}{stmt}{eol}"),
            ))
        }
        // (Of several names holding a graph, `feats, values = encoder(obs), critic(obs)`,
        // which carries the stale save is not known here, and detaching the other would stop
        // the loop's gradient into what made it: an encoder another optimizer trains. A fresh
        // forward on each turn keeps both.)
        [(c, ..), rest @ ..] if rest.iter().all(|r| r.0 == *c) => {
            let first = ctx.body(s.item).and_then(|b| {
                let at = b.stmt_span(*stmts.first()?);
                ctx.range(Span::new(s.item, at))
            })?;
            recompute_on_each_turn(ctx, *c, (loop_range, first), &assigned, &bound_in_loop)
                .filter(|_| target_names.iter().all(|(t, _)| !reads_name(ctx, *c, *t)))
        }
        _ => None,
    }
}

/// The names statement `c` binds that carry a graph, when `c` is a one-line assignment inside
/// a loop that comes before loop `lp` in its block (reading none of that loop's targets), and
/// is the last to bind each of them before `lp` (`keep`: which names may be taken).
fn made_in_earlier_loop(
    ctx: &RenderCtx<'_>,
    body: &Body,
    c: StmtRef,
    lp: usize,
    loop_range: TextRange,
    assigned: &[Assignment],
    keep: impl Fn(Name) -> bool,
) -> Option<Vec<(Name, Held)>> {
    let at = body.stmt_span(c.stmt);
    let outer = (body.siblings(StmtId(lp as u32)).into_iter())
        .take_while(|x| x.idx() != lp)
        .find(|x| body.stmt_span(*x).contains(at))?;
    let mut targets = Vec::new();
    match *body.stmt(outer) {
        Stmt::For { target, .. } => names_in(body, target, &mut targets),
        Stmt::While { .. } => {}
        _ => return None,
    }
    let first = ctx.range(Span::new(c.item, at))?;
    line_layout(ctx, first)?;
    let Stmt::Assign {
        targets: bound,
        value,
    } = *body.stmt(c.stmt)
    else {
        return None;
    };
    let reads = names_read(body, body.expr_span(value));
    if targets.iter().any(|(t, _)| reads.contains(t)) {
        return None;
    }
    let mut out = Vec::new();
    for (n, e) in names_bound_by(body, bound) {
        let last = last_assignment(assigned, n, loop_range.start).map(|l| l.range);
        if last != Some(first) || !keep(n) {
            return None;
        }
        if let Some(Held::Graph) = ctx.unit.graphs.get(&Span::new(c.item, body.expr_span(e))) {
            out.push((n, Held::Graph));
        }
    }
    Some(out)
}

/// Statement `c` (before the loop at `loop_range`, in its block) repeated just before the
/// loop body's first statement (`first`): only when what it reads is bound neither in the loop
/// (`bound_in_loop`) nor between it and the loop, and it reads none of the names it binds.
fn recompute_on_each_turn(
    ctx: &RenderCtx<'_>,
    c: StmtRef,
    (loop_range, first): (TextRange, TextRange),
    assigned: &[Assignment],
    bound_in_loop: &[Name],
) -> Option<Fix> {
    let cb = ctx.body(c.item)?;
    let range = ctx.range(Span::new(c.item, cb.stmt_span(c.stmt)))?;
    line_layout(ctx, range)?;
    let (indent, eol) = indentation(ctx, first.start)?;
    if ctx.lines.line_of(first.start) == ctx.lines.line_of(loop_range.start) {
        // (`for ...: stmt` on one line.)
        return None;
    }
    let Stmt::Assign { targets, value } = *cb.stmt(c.stmt) else {
        return None;
    };
    let bound: Vec<Name> = names_bound_by(&cb, targets)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let reads = names_read(&cb, cb.expr_span(value));
    let rebound_before_loop = |r: &Name| {
        (assigned.iter())
            .filter(|a| a.range.start > range.end && a.range.end <= loop_range.start)
            .any(|a| a.names.contains(r))
    };
    if reads
        .iter()
        .any(|r| bound.contains(r) || bound_in_loop.contains(r) || rebound_before_loop(r))
    {
        return None;
    }
    let stmt = ctx.slice(range);
    let insert = ctx.lines.line_start(ctx.lines.line_of(first.start));
    Some(one(
        format!("Compute it again on each turn of the loop: `{stmt}`"),
        Applicability::Unsafe,
        TextRange::new(insert, insert),
        format!("{indent}{stmt}{eol}"),
    ))
}

/// Whether the value statement `c` assigns reads `name`.
fn reads_name(ctx: &RenderCtx<'_>, c: StmtRef, name: Name) -> bool {
    ctx.body(c.item).is_some_and(|b| match *b.stmt(c.stmt) {
        Stmt::Assign { value, .. } => names_read(&b, b.expr_span(value)).contains(&name),
        _ => true,
    })
}

/// The names read within `within`, less those read only as `name.detach()` (what is read that
/// way needs no graph).
fn names_read_with_graph(ctx: &RenderCtx<'_>, body: &Body, within: Rel) -> Vec<Name> {
    let detached: Vec<ExprId> = (0..body.exprs.len())
        .filter(|i| within.contains(body.expr_spans[*i]))
        .filter_map(|i| match body.exprs[i] {
            Expr::Attr { value, attr, .. } if ctx.name(attr) == "detach" => Some(value),
            _ => None,
        })
        .collect();
    let mut out: Vec<Name> = (0..body.exprs.len())
        .filter(|i| within.contains(body.expr_spans[*i]))
        .filter(|i| !detached.contains(&ExprId(*i as u32)))
        .filter_map(|i| match body.exprs[i] {
            Expr::Name { name, reads: true } => Some(name),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The names assignment `c` binds (one, or those of a tuple target, `advantages, returns =
/// compute(batch)`) that the analysis saw holding a graph (see [`Held`]), when `c` is a
/// one-line assignment in the block of the loop at `loop_range` (at `indent`), none of its
/// names is bound again before the loop, and each passes `keep`; else `None`.
fn loop_inputs_bound_by(
    ctx: &RenderCtx<'_>,
    c: StmtRef,
    (loop_range, indent): (TextRange, &str),
    assigned: &[Assignment],
    keep: impl Fn(Name) -> bool,
) -> Option<Vec<(Name, Held)>> {
    let cb = ctx.body(c.item)?;
    let first = ctx.range(Span::new(c.item, cb.stmt_span(c.stmt)))?;
    assigned.iter().find(|a| a.range == first)?;
    let (in_block, _) = line_layout(ctx, first)?;
    if in_block != indent || !same_block(ctx, first, loop_range, indent) {
        return None;
    }
    let Stmt::Assign { targets, .. } = *cb.stmt(c.stmt) else {
        return None;
    };
    let bound = names_bound_by(&cb, targets);
    let mut out = Vec::new();
    for (n, e) in bound {
        let rebound =
            last_assignment(assigned, n, loop_range.start).map(|l| l.range) != Some(first);
        if rebound || !keep(n) {
            return None;
        }
        if let Some(held @ (Held::Graph | Held::GraphInObject)) =
            ctx.unit.graphs.get(&Span::new(c.item, cb.expr_span(e)))
        {
            out.push((n, *held));
        }
    }
    Some(out)
}
