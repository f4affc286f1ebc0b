//! Writes that are updates, under `with torch.no_grad():` (one statement, a run of them, or a
//! loop over a module tree).

use super::*;

/// Replace a one-line statement by `with torch.no_grad():` around `new_stmt`.
pub(crate) fn wrap_no_grad(
    ctx: &RenderCtx<'_>,
    stmt: TextRange,
    new_stmt: &str,
    title: &str,
    applicability: Applicability,
) -> Option<Fix> {
    let (indent, eol) = line_layout(ctx, stmt)?;
    let unit = if indent.contains('\t') { "\t" } else { "    " };
    let (torch, import) = match ctx.torch_alias() {
        Some(t) => (t, None),
        None => ("torch", Some(import_torch(ctx)?)),
    };
    let content = format!("with {torch}.no_grad():{eol}{indent}{unit}{new_stmt}");
    let mut fix = one(title.into(), applicability, stmt, content);
    fix.edits.splice(0..0, import);
    Some(fix)
}

/// `import torch` on a line of its own before the file's first import (after any
/// `from __future__` import), for a fix that needs `torch` in a file that imports only
/// `torch.nn as nn` or the like.
fn import_torch(ctx: &RenderCtx<'_>) -> Option<Edit> {
    let prog = ctx.prog;
    let first = prog.items.iter().find(|it| {
        it.parent().is_none()
            && ctx.body(it.id).is_some_and(|b| {
                b.stmts_of(b.root).any(|s| match *b.stmt(s) {
                    Stmt::Import(list) => b.list(list).iter().all(|i| {
                        !ctx.name(b.imports[*i as usize].path)
                            .starts_with("__future__")
                    }),
                    _ => false,
                })
            })
    })?;
    let at = first.outline.start as usize;
    let (indent, eol) = indentation(ctx, at)?;
    indent.is_empty().then(|| Edit {
        range: TextRange::new(at, at),
        content: format!("import torch{eol}"),
    })
}

/// The write under `with torch.no_grad():` (a parameter's initialisation or update, written
/// where autograd must not record it), with the writes around it that would raise next: the
/// whole loop over a module tree (`for m in model.modules():`) when the write is in one, else
/// the run of consecutive statements that write into leaves.
pub(crate) fn write_under_no_grad(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let s = w.stmt?;
    // A write in an imported module's code: this file's statement that calls it.
    if crate::project::is_module_item(s.item) {
        let site = w.call_site?;
        // (A call that trains, `fit(model)`, needs grad: the write is to be mended where it is,
        // in the other file.)
        if ctx.unit.training_calls.contains(&site) {
            return None;
        }
        let body = ctx.body(site.item)?;
        let call = super::simple_statement_at(&body, site.rel)?;
        // (Nor a call whose result is kept, `z, logdet = flow(x)`: under `no_grad` it would
        // have no history for the backward after it.)
        if !matches!(body.stmt(call), Stmt::Expr(_)) {
            return None;
        }
        let stmt = simple_statement(
            ctx,
            Some(StmtRef {
                item: site.item,
                stmt: call,
            }),
        )?;
        return wrap_lines_no_grad(ctx, stmt, "Call it under `torch.no_grad()`", None);
    }
    let stmt = simple_statement(ctx, Some(s))?;
    // Every finding of a block carries the whole block: a bound keeps that linear.
    let lines = |r: TextRange| ctx.lines.line_of(r.end) - ctx.lines.line_of(r.start) + 1;
    let block = module_tree_loop(ctx, s)
        .or_else(|| Some(leaf_write_run(ctx, stmt)))
        .filter(|b| lines(*b) <= MAX_WRAPPED_LINES)
        .unwrap_or(stmt);
    if w.kind == crate::events::WriteKind::OutArg {
        // `torch.arange(n, out=w)` -> `w.copy_(torch.arange(n))`: a factory called with `out=`
        // drops the parameter's `requires_grad` even under `no_grad` (measured with torch 2.15:
        // `arange`, `zeros`, `ones`, `full`, `linspace`, `rand`); `copy_` keeps it.
        let rewrite = out_arg_as_copy(ctx, w)?;
        return wrap_lines_no_grad(
            ctx,
            block,
            "Copy into it under `torch.no_grad()`",
            Some(rewrite),
        );
    }
    wrap_lines_no_grad(ctx, block, "Update under `torch.no_grad()`", None)
}

/// The call of an `out=` write rewritten to copy its result into the `out=` tensor: its range
/// and new text. None where the rewrite is not plain: the keyword outside the call (bound by a
/// `functools.partial`), a comment in the call, a tuple of outputs.
fn out_arg_as_copy(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<(TextRange, String)> {
    let call = ctx.range(w.site)?;
    let kw = ctx.range(w.range)?;
    if kw.start < call.start || kw.end > call.end {
        return None;
    }
    let text = ctx.slice(call);
    let target = ctx.slice(kw).split_once('=')?.1.trim();
    if text.contains('#') || target.starts_with('(') {
        return None;
    }
    let (at, end) = (kw.start - call.start, kw.end - call.start);
    // The keyword with the comma before it, or after it when it comes first.
    let before = text.get(..at)?.trim_end();
    let after = text.get(end..)?;
    let stripped = if let Some(head) = before.strip_suffix(',') {
        format!("{head}{after}")
    } else {
        let rest = after.trim_start();
        format!(
            "{before}{}",
            rest.strip_prefix(',').unwrap_or(rest).trim_start()
        )
    };
    // (`out=a if flag else b` copies into whichever it names.)
    let plain = target
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.'));
    let target = if plain {
        target.to_string()
    } else {
        format!("({target})")
    };
    Some((call, format!("{target}.copy_({stripped})")))
}

/// `torch.round(x, out=buf)` -> `buf.copy_(torch.round(x))`, where an input requires grad and
/// `buf` does not: the op runs out of place and autograd records the copy into `buf`.
pub(crate) fn out_arg_copied(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let (call, rewrite) = out_arg_as_copy(ctx, w)?;
    Some(Fix {
        title: format!("Copy the result into it: `{rewrite}`"),
        applicability: Applicability::Unsafe,
        edits: vec![Edit {
            range: call,
            content: rewrite,
        }],
    })
}

/// The most lines a fix puts under one `torch.no_grad()` block (else it wraps the write alone).
const MAX_WRAPPED_LINES: usize = 60;

/// The outermost `for` around statement `s` (in its item) that walks a module tree or its
/// parameters.
fn module_tree_loop(ctx: &RenderCtx<'_>, s: StmtRef) -> Option<TextRange> {
    const WALKS: &[&str] = &[
        "modules",
        "named_modules",
        "children",
        "named_children",
        "parameters",
        "named_parameters",
    ];
    let body = ctx.body(s.item)?;
    let at = body.stmt_span(s.stmt);
    // A call of one of those methods anywhere in the loop's iterable (`list(m.modules())`).
    let walks = |iter: Rel| {
        body.exprs
            .iter()
            .zip(&body.expr_spans)
            .any(|(e, span)| match *e {
                Expr::Call { func, .. } if iter.contains(*span) => matches!(
                    *body.expr(func),
                    Expr::Attr { attr, .. } if WALKS.contains(&ctx.name(attr))
                ),
                _ => false,
            })
    };
    let outer = (0..body.stmts.len())
        .filter_map(|i| match body.stmts[i] {
            Stmt::For { iter, .. } if body.stmt_spans[i].contains(at) => {
                walks(body.expr_span(iter)).then_some(body.stmt_spans[i])
            }
            _ => None,
        })
        .max_by_key(|r| r.end - r.start)?;
    ctx.range(Span::new(s.item, outer))
}

/// The statements next to `stmt` (one after the other at its indentation, blank lines and
/// comments between them allowed) that also write into a leaf, `stmt` included.
fn leaf_write_run(ctx: &RenderCtx<'_>, stmt: TextRange) -> TextRange {
    let mut writes: Vec<TextRange> = ctx
        .unit
        .events
        .iter()
        .filter_map(|e| match e {
            crate::events::Event::LeafWrite { write, .. } => {
                simple_statement(ctx, ctx.unit.writes.get(*write as usize)?.stmt)
            }
            _ => None,
        })
        .collect();
    writes.sort_by_key(|r| (r.start, r.end));
    writes.dedup();
    let next_code = |from: usize| -> Option<usize> {
        let text = ctx.text_all();
        let mut line = ctx.lines.line_of(from) + 1;
        loop {
            let (s, e) = ctx.lines.line_range(text, line);
            if s >= text.len() {
                return None;
            }
            let t = text[s..e].trim_start();
            if !t.is_empty() && !t.starts_with('#') {
                return Some(e - t.len());
            }
            line += 1;
        }
    };
    let Some(mut i) = writes.iter().position(|r| *r == stmt) else {
        return stmt;
    };
    let mut run = stmt;
    let mut j = i;
    while let Some(next) = writes.get(j + 1) {
        if next_code(run.end) != Some(next.start) || !same_indent(ctx, run, *next) {
            break;
        }
        run = TextRange::new(run.start, next.end);
        j += 1;
    }
    while i > 0 {
        let prev = writes[i - 1];
        if next_code(prev.end) != Some(run.start) || !same_indent(ctx, prev, run) {
            break;
        }
        run = TextRange::new(prev.start, run.end);
        i -= 1;
    }
    run
}

/// Whole statements (from the start of their first line's code) under
/// `with torch.no_grad():`, each of their lines indented one level more.
fn wrap_lines_no_grad(
    ctx: &RenderCtx<'_>,
    block: TextRange,
    title: &str,
    rewrite: Option<(TextRange, String)>,
) -> Option<Fix> {
    let text = ctx.text_all();
    let (indent, eol) = indentation(ctx, block.start)?;
    let last = ctx.lines.line_of(block.end);
    let (_, end) = ctx.lines.line_range(text, last);
    let mut lines = std::borrow::Cow::Borrowed(text.get(block.start..end)?);
    if let Some((r, new)) = rewrite {
        let (a, b) = (
            r.start.checked_sub(block.start)?,
            r.end.checked_sub(block.start)?,
        );
        lines = format!("{}{new}{}", lines.get(..a)?, lines.get(b..)?).into();
    }
    // Indenting a line inside a multi-line string would change the string.
    if lines.contains("\"\"\"") || lines.contains("'''") {
        return None;
    }
    let unit = if indent.contains('\t') { "\t" } else { "    " };
    let (torch, import) = match ctx.torch_alias() {
        Some(t) => (t, None),
        None => ("torch", Some(import_torch(ctx)?)),
    };
    let mut content = format!("with {torch}.no_grad():{eol}{indent}{unit}");
    for (k, line) in lines.split_inclusive('\n').enumerate() {
        if k > 0 && !line.trim().is_empty() {
            content.push_str(unit);
        }
        content.push_str(line);
    }
    let mut fix = self::one(
        title.into(),
        Applicability::Unsafe,
        TextRange::new(block.start, end),
        content,
    );
    fix.edits.splice(0..0, import);
    Some(fix)
}

/// `w = w - lr * w.grad` -> `with torch.no_grad(): w -= lr * w.grad`.
pub(crate) fn augmented_update(ctx: &RenderCtx<'_>, s: StmtRef, target: Span) -> Option<Fix> {
    let body = ctx.body(s.item)?;
    let Stmt::Assign { value, targets } = *body.stmt(s.stmt) else {
        return None;
    };
    if targets.len != 1 {
        return None;
    }
    let Expr::Binary { op, left, right } = *body.expr(value) else {
        return None;
    };
    let span = |e: ExprId| Span::new(s.item, body.expr_span(e));
    let t = ctx.text(target);
    if ctx.text(span(left)) != t || !matches!(op, BinOp::Sub | BinOp::Add | BinOp::Mul | BinOp::Div)
    {
        return None;
    }
    let new = format!("{t} {}= {}", op_text(op)?, ctx.text(span(right)));
    let stmt = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    wrap_no_grad(
        ctx,
        stmt,
        &new,
        "Update in place under `torch.no_grad()`",
        Applicability::Unsafe,
    )
}
