//! The forward pass computed again after an optimizer step that made its saves stale: the
//! GAN's `d_fake = netD(fake)` repeated after `optD.step()`, before the generator's loss is
//! differentiated through the discriminator.

use super::reorder::line_break_before;
use super::*;

/// Statements between the one that made the save and the step, at most.
const MAX_BETWEEN: usize = 256;

/// A `step()` (statement `s`) clobbering a save made by statement `origin` (and others made by
/// `others`) that the `backward()` at `backward` reads: `origin`, and the statements between it and the step that
/// carry its result to what the backward differentiates, are repeated after the step (after
/// the statement of `origin`'s block that holds it), so that the backward goes through a graph
/// made with the updated parameters.
/// What the backward needs is followed from its statement back through the assignments made
/// after the step (`g_loss = F.softplus(-d_fake).mean()`, not repeated) to those made before
/// it (`d_fake = netD(fake)`, repeated). Each repeated statement is a one-line assignment to
/// plain names, in `origin`'s block, that reads none of the names it binds and nothing
/// another statement binds again before the repeat; none of what the backward needs may be
/// computed between the step and the repeat.
pub(crate) fn recompute_after_step(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    origin: Option<StmtRef>,
    others: &[StmtRef],
    backward: Span,
) -> Option<Fix> {
    let origin = origin?;
    let body = ctx.body(s.item)?;
    let step = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    line_layout(ctx, step)?;
    let scope = scope_items(ctx, s.item);
    if !scope.contains(&backward.item) || !scope.contains(&origin.item) {
        // (The backward or the save is in another function than the step.)
        return None;
    }
    let other = ctx.body(backward.item)?;
    let bspan = other.stmt_span(simple_statement_at(&other, backward.rel)?);
    let brange = ctx.range(Span::new(backward.item, bspan))?;
    let first = ctx.range(Span::new(
        origin.item,
        ctx.body(origin.item)?.stmt_span(origin.stmt),
    ))?;
    if brange.start < step.end || first.end > step.start || !holds(ctx, first, step) {
        return None;
    }
    let (indent, eol) = line_layout(ctx, first)?;
    // Repeated after the statement of `origin`'s block that holds the step (the step itself,
    // or the `if` it is in: a repeat inside the `if` leaves the other path's old result to
    // the backward in the analysis's view; after it, the repeat also runs where no step did,
    // computing the same values again).
    let anchor = (0..body.stmts.len())
        .filter(|&k| body.stmt_spans[k].contains(body.stmt_span(s.stmt)))
        .filter_map(|k| ctx.range(Span::new(s.item, body.stmt_spans[k])))
        .find(|r| indentation(ctx, r.start).is_some_and(|(i, _)| i == indent))?;
    if anchor.end > brange.start {
        return None;
    }
    let assigned = assignments(ctx, s.item);
    let k0 = assigned.iter().position(|a| a.range == first)?;
    let before_step = |k: &usize| assigned[*k].range.end <= step.start;
    // (Each statement between is judged on the text between it and the step: a bound keeps
    // that linear in the item's size.)
    if (k0 + 1..assigned.len()).take_while(before_step).count() > MAX_BETWEEN {
        return None;
    }
    // The statements from `origin` to the step that compute from its result, or that make a
    // graph of their own (another forward through the stepped model, `out_fake = D(x_fake)`
    // beside `out_true = D(x)`: repeated too when the backward needs it).
    // (The statements of the other saves the step clobbers are origins too: `out_fake =
    // D(x_fake)` beside `out_true = D(x)`, before or after it in its block.)
    let origin_at = |a: &Assignment| {
        (others.iter()).any(|o| {
            ctx.body(o.item)
                .and_then(|b| ctx.range(Span::new(o.item, b.stmt_span(o.stmt))))
                == Some(a.range)
        })
    };
    let mut chain: Vec<usize> = (k0.saturating_sub(MAX_BETWEEN)..k0)
        .filter(|k| {
            let a = &assigned[*k];
            origin_at(a) && same_block(ctx, a.range, first, indent) && holds(ctx, a.range, step)
        })
        .collect();
    chain.push(k0);
    let mut carried: Vec<Name> = (chain.iter())
        .flat_map(|k| assigned[*k].names.iter().copied())
        .collect();
    for k in (k0 + 1..assigned.len()).take_while(before_step) {
        let a = &assigned[k];
        let feeds = a.reads.iter().any(|r| carried.contains(r));
        if (feeds || origin_at(a)) && holds(ctx, a.range, step) {
            chain.push(k);
            carried.extend(a.names.iter().copied());
        } else {
            carried.retain(|n| !a.names.contains(n));
        }
    }
    // What the backward differentiates, through the assignments after the step.
    let mut needed: Vec<Name> = names_read(&other, bspan);
    for a in
        (assigned.iter().rev()).filter(|a| a.range.start > step.end && a.range.end <= brange.start)
    {
        if a.names.iter().any(|n| needed.contains(n)) {
            // (One computed before the repeat, inside the step's block, would still read the
            // old result.)
            if a.range.start < anchor.end {
                return None;
            }
            needed.extend(a.reads.iter().copied());
        }
    }
    let mut repeated = Vec::new();
    for &k in chain.iter().rev() {
        let a = &assigned[k];
        // (A value without a graph, `actions = dist.sample()`, is kept as it was: drawn again,
        // it would change what the loss is about, not only the parameters it is taken at.)
        let graphless = a
            .target
            .is_some_and(|t| ctx.unit.graphs.get(&t) == Some(&crate::exec::Held::Plain));
        if k != k0 && graphless {
            continue;
        }
        if a.names.iter().any(|n| needed.contains(n)) {
            needed.extend(a.reads.iter().copied());
            repeated.push(k);
        }
    }
    if !repeated.contains(&k0) {
        return None;
    }
    repeated.reverse();
    for &k in &repeated {
        let a = &assigned[k];
        // (Only the assignments between it and the repeat, in text order.)
        let rebound = |r: &Name| {
            (assigned.iter().enumerate().skip(k + 1))
                .take_while(|(_, b)| b.range.end <= anchor.end)
                .any(|(j, b)| !repeated.contains(&j) && b.names.contains(r))
        };
        if line_layout(ctx, a.range).is_none()
            || !same_block(ctx, first.min(a.range), first.max(a.range), indent) && a.range != first
            || a.reads.iter().any(|r| a.names.contains(r) || rebound(r))
        {
            return None;
        }
    }
    let insert = ctx.lines.line_start(ctx.lines.line_of(anchor.end) + 1);
    if insert < anchor.end {
        return None;
    }
    let stmts: Vec<&str> = repeated
        .iter()
        .map(|k| ctx.slice(assigned[*k].range))
        .collect();
    let sep = line_break_before(ctx, insert, eol);
    let content: String = stmts.iter().map(|t| format!("{indent}{t}{eol}")).collect();
    let title = match stmts.as_slice() {
        [one] => format!("Compute it again after the step: `{one}`"),
        more => format!(
            "Compute the forward pass again after the step ({} statements, from `{}`)",
            more.len(),
            more[0]
        ),
    };
    Some(Fix {
        title,
        applicability: Applicability::Unsafe,
        edits: vec![Edit {
            range: TextRange::new(insert, insert),
            content: format!("{sep}{content}"),
        }],
    })
}
