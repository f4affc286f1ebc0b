//! A write into a row a loop took by iterating a tensor (`for ch, m, s in zip(t[0], mean, std):
//! ch.mul_(s).add_(m)`): iteration unbinds the tensor, and torch refuses in-place writes into
//! the views `unbind` returns while autograd records. The loop is made to count its rows and
//! the name is bound to the row taken by index (`ch = t[0][i]`), a view torch lets a write go
//! through into the tensor: the loop then changes the tensor as it meant to.

use super::*;

/// The fix above, for write `w` through a plain name a `for` loop around it binds to the rows
/// of a tensor spelled as a name, attribute or subscript (its text is evaluated again per row).
pub(crate) fn index_loop_rows(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let s = w.stmt?;
    if w.into_leaf || w.under_no_grad || w.memory_saved {
        return None;
    }
    let body = ctx.body(s.item)?;
    let root = root_place(&body, copy::written_expr(&body, s.stmt, w)?)?;
    let Expr::Name { name, .. } = *body.expr(root) else {
        return None;
    };
    let at = body.stmt_span(s.stmt);
    // (The innermost loop around the write that binds the name.)
    let (target, iter, block) = (body.stmts.iter().zip(&body.stmt_spans))
        .filter(|(_, sp)| sp.contains(at) && **sp != at)
        .filter_map(|(st, sp)| match *st {
            Stmt::For {
                target,
                iter,
                body: block,
                ..
            } => {
                let mut bound = Vec::new();
                reorder::names_in(&body, target, &mut bound);
                bound
                    .iter()
                    .any(|(n, _)| *n == name)
                    .then_some(((target, iter, block), *sp))
            }
            _ => None,
        })
        .min_by_key(|(_, sp)| sp.end - sp.start)?
        .0;
    // (A loop that counts already, `for i, row in enumerate(x)`, keeps its target and index.)
    let counted = counted_loop(ctx, &body, target, iter);
    let (row_target, row_iter) = counted.map_or((target, iter), |(_, t, it)| (t, it));
    let rows = iterated_tensor(ctx, &body, row_target, row_iter, name)?;
    let text = |e: ExprId| ctx.text(Span::new(s.item, body.expr_span(e)));
    let tensor = text(rows);
    if tensor.contains(['(', '\n', '#']) {
        return None;
    }
    // The row read anywhere else in the loop (`outs.append(row * w)` before or after the write,
    // `row.div_(row.norm())`): the op that read it may save it, and rows taken by index share the
    // tensor's version counter, so a write through any of them, in this pass or the next, would
    // fail that op's backward. A comparison or a metadata read (`row.shape`) saves nothing.
    // A name of the tensor's text bound in the loop (`x = x + 1`): the text taken again per row
    // would read another tensor.
    let loop_body = block_span(&body, block)?;
    let within = |sp: &Rel| loop_body.contains(*sp);
    let compared: Vec<ExprId> = (body.exprs.iter().zip(&body.expr_spans))
        .filter(|(_, sp)| within(sp))
        .filter_map(|(e, _)| match *e {
            Expr::Compare { operands, .. } => Some(operands),
            _ => None,
        })
        .flat_map(|l| body.exprs_of(l))
        .collect();
    let reads = (body.exprs.iter().zip(&body.expr_spans))
        .enumerate()
        .filter(|(i, (e, sp))| {
            within(sp)
                && matches!(**e, Expr::Name { name: n, reads: true } if n == name)
                && !compared.contains(&ExprId(*i as u32))
        })
        .count();
    let mut named = Vec::new();
    names_of(&body, rows, &mut named);
    let bound = body.bound_in(block);
    if counted.is_some_and(|(i, _, _)| bound.contains(&i)) {
        return None;
    }
    if reads > 1 || bound.iter().any(|n| named.contains(n)) {
        return None;
    }
    // The tensor itself read in the loop (`acc = acc + (h * w).sum()`): what read it may have
    // saved it, and the next row's write through it would break that. A tensor that is itself a
    // row of an outer loop (`for row in h: for v in row:`): its rows by index are views of a view
    // torch refuses to write through as well.
    let tensor_read =
        (body.expr_spans.iter()).any(|sp| within(sp) && ctx.text(Span::new(s.item, *sp)) == tensor);
    let outer_row = (body.stmts.iter().zip(&body.stmt_spans)).any(|(st, sp)| {
        let Stmt::For { target: t, .. } = *st else {
            return false;
        };
        let mut bound = Vec::new();
        reorder::names_in(&body, t, &mut bound);
        sp.contains(at) && t != target && bound.iter().any(|(n, _)| named.contains(n))
    });
    if tensor_read || outer_row {
        return None;
    }
    let index = match counted {
        Some((i, _, _)) => ctx.name(i),
        None => fresh_name(ctx, &body)?,
    };
    let first = body.stmts_of(block).next()?;
    let first_at = ctx.range(Span::new(s.item, body.stmt_span(first)))?;
    let (indent, eol) = indentation(ctx, first_at.start)?;
    let line = first_at.start - indent.len();
    let target_text = text(target);
    let new_target = match *body.expr(target) {
        Expr::Name { .. } => format!("{index}, {target_text}"),
        _ => format!("{index}, ({target_text})"),
    };
    let span = |e: ExprId| ctx.range(Span::new(s.item, body.expr_span(e)));
    let row = ctx.name(name);
    let mut edits = Vec::new();
    if counted.is_none() {
        edits.push(Edit {
            range: span(target)?,
            content: new_target,
        });
        edits.push(Edit {
            range: span(iter)?,
            content: format!("enumerate({})", text(iter)),
        });
    }
    edits.push(Edit {
        range: TextRange::new(line, line),
        content: format!("{indent}{row} = {tensor}[{index}]{eol}"),
    });
    Some(Fix {
        title: format!("Write through the tensor: `{row} = {tensor}[{index}]` in the loop"),
        applicability: Applicability::Unsafe,
        edits,
    })
}

/// A loop that counts its rows from 0 (`for i, row in enumerate(x)`, `for i, (a, b) in
/// enumerate(zip(x, y))`): its index name, and the target and iterable of the rows.
fn counted_loop(
    ctx: &RenderCtx<'_>,
    body: &Body,
    target: ExprId,
    iter: ExprId,
) -> Option<(Name, ExprId, ExprId)> {
    let (Expr::Seq { items, .. }, Expr::Call { func, args }) =
        (*body.expr(target), *body.expr(iter))
    else {
        return None;
    };
    let mut parts = body.exprs_of(items);
    let (Some(index), Some(rows_target), None) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let (Expr::Name { name: index, .. }, Expr::Name { name: f, .. }) =
        (*body.expr(index), *body.expr(func))
    else {
        return None;
    };
    let args = &body.args[args as usize];
    let mut positional = body.exprs_of(args.positional);
    let (Some(rows_iter), None) = (positional.next(), positional.next()) else {
        return None;
    };
    (ctx.name(f) == "enumerate" && args.keywords.is_empty()).then_some((
        index,
        rows_target,
        rows_iter,
    ))
}

/// The tensor whose rows loop target `target` binds `name` to: `iter` itself (`for row in x`),
/// or the argument of `zip(...)` at the name's position in a tuple target (`for ch, m in
/// zip(x, mean)`); a name, attribute or subscript.
fn iterated_tensor(
    ctx: &RenderCtx<'_>,
    body: &Body,
    target: ExprId,
    iter: ExprId,
    name: Name,
) -> Option<ExprId> {
    let starred = |l: List| (body.exprs_of(l)).any(|e| matches!(*body.expr(e), Expr::Starred(_)));
    let rows = match (*body.expr(target), *body.expr(iter)) {
        (Expr::Name { name: n, .. }, _) if n == name => iter,
        // (Positions match only without `*rest` in the target or `*args` in the call.)
        (Expr::Seq { items, .. }, Expr::Call { func, args }) if !starred(items) => {
            let Expr::Name { name: zip, .. } = *body.expr(func) else {
                return None;
            };
            let args = &body.args[args as usize];
            if ctx.name(zip) != "zip" || !args.keywords.is_empty() || starred(args.positional) {
                return None;
            }
            let j = body
                .exprs_of(items)
                .position(|t| matches!(*body.expr(t), Expr::Name { name: n, .. } if n == name))?;
            body.exprs_of(args.positional).nth(j)?
        }
        _ => return None,
    };
    place_like(body, rows).then_some(rows)
}

/// A name, attribute or subscript of one (`x`, `self.rows`, `t[0]`).
fn place_like(body: &Body, e: ExprId) -> bool {
    match *body.expr(e) {
        Expr::Name { .. } => true,
        Expr::Attr { value, .. } => place_like(body, value),
        Expr::Subscript { value, .. } => place_like(body, value),
        _ => false,
    }
}

/// A short index name the loop's scope does not use: in a function, a variable its body (nested
/// functions included) never reads or binds; at module level, where each statement is an item of
/// its own and a name bound here may be read anywhere (in items the analysis did not lower, whose
/// names the interner may not hold), one the file's text never spells as a word.
fn fresh_name(ctx: &RenderCtx<'_>, body: &Body) -> Option<&'static str> {
    let in_function = body.root_def().is_some();
    let text = ctx.text_all();
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let spelled = |candidate: &str| {
        text.match_indices(candidate).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + candidate.len()..].chars().next();
            !before.is_some_and(word) && !after.is_some_and(word)
        })
    };
    ["i", "k", "j", "idx", "row_index"]
        .into_iter()
        .find(|c| match ctx.names.get(c) {
            Some(n) if in_function => !body.mentions(n),
            None if in_function => true,
            _ => !spelled(c),
        })
}

/// The text span of a block's statements.
fn block_span(body: &Body, block: Block) -> Option<Rel> {
    let mut spans = body.stmts_of(block).map(|s| body.stmt_span(s));
    let first = spans.next()?;
    let last = spans.last().unwrap_or(first);
    Some(Rel::new(first.start, last.end))
}

/// The names an expression reads (`t[0]` -> `t`, `self.rows` -> `self`).
fn names_of(body: &Body, e: ExprId, out: &mut Vec<Name>) {
    match *body.expr(e) {
        Expr::Name { name, .. } => out.push(name),
        Expr::Attr { value, .. } | Expr::Subscript { value, .. } => names_of(body, value, out),
        _ => {}
    }
}
