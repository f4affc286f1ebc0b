//! Updates run in another order: the later loss's whole update moved before the step that
//! breaks it (rlkit's "optimize the actor before the critic").
//!
//! An update is a run of one-line statements of one block: `opt.zero_grad()`, then
//! `loss.backward(...)`, gradient clipping or unscaling, `opt.step()` (or `scaler.step(opt)`)
//! and a `scaler.update()`. Where the statements between the step that breaks a save and the
//! `backward()` that needs it are only such updates, each starting by zeroing gradients, the
//! later update can run first: its `backward()` then meets the saves unchanged, and the
//! gradients it leaves in the parameters of the updates it now precedes are zeroed by them
//! before their own `backward()`. What it changes: the later update no longer sees the earlier
//! steps (the critic before its step, in an actor-critic), so the fix is unsafe. Whether the
//! moved step breaks a save of the updates it now precedes is left to the fix's verification.

use super::*;

/// What a line of an update is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// Empty, or only a comment.
    Blank,
    ZeroGrad,
    Backward,
    /// `clip_grad_norm_(...)`, `scaler.unscale_(opt)`.
    Clip,
    Step,
    /// `scaler.update()`.
    ScalerUpdate,
    Other,
}

fn classify(line: &str) -> Line {
    let code = line.split('#').next().unwrap_or_default().trim();
    if code.is_empty() {
        return Line::Blank;
    }
    if code.contains(';') {
        return Line::Other;
    }
    if super::reorder::only_zeroes_grad(code) {
        return Line::ZeroGrad;
    }
    let plain_call = |method: &str| {
        code.split_once(method).is_some_and(|(path, args)| {
            !path.is_empty()
                && path
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '[' | ']' | '"' | '\''))
                && args.ends_with(')')
        })
    };
    // (An assignment binds a name: `norm = clip_grad_norm_(...)` is not moved.)
    let head = code.split('(').next().unwrap_or_default();
    if head.contains('=') {
        return Line::Other;
    }
    // (`scaler.scale(loss).backward()`: what it differentiates may be a call.)
    let backward = code
        .split_once(".backward(")
        .is_some_and(|(path, args)| !path.is_empty() && !path.contains(' ') && args.ends_with(')'));
    if backward {
        Line::Backward
    } else if code.contains("clip_grad_norm_(")
        || code.contains("clip_grad_value_(")
        || plain_call(".unscale_(")
    {
        Line::Clip
    } else if plain_call(".step(") {
        Line::Step
    } else if plain_call(".update(")
        && code.ends_with(".update()")
        && code.to_ascii_lowercase().contains("scaler")
    {
        Line::ScalerUpdate
    } else {
        Line::Other
    }
}

/// The lines of a block, from `first` on, as far as they share `indent`.
struct Lines<'a> {
    ctx: &'a RenderCtx<'a>,
    indent: &'a str,
}

impl Lines<'_> {
    fn text(&self, line: usize) -> Option<&str> {
        if line >= self.ctx.lines.line_count() {
            return None;
        }
        let (s, e) = self.ctx.lines.line_range(self.ctx.text_all(), line);
        self.ctx.text_all().get(s..e)
    }

    /// The kind of `line`, where it is in the block (a blank line anywhere).
    fn kind(&self, line: usize) -> Option<Line> {
        let t = self.text(line)?;
        let k = classify(t);
        if k == Line::Blank {
            return Some(k);
        }
        let indent = &t[..t.len() - t.trim_start().len()];
        (indent == self.indent).then_some(k)
    }

    /// The update starting at `line` (blank lines before it skipped): its first and last line.
    fn update_from(&self, mut line: usize) -> Option<(usize, usize)> {
        while self.kind(line)? == Line::Blank {
            line += 1;
        }
        let first = line;
        let mut zeroed = false;
        while self.kind(line)? == Line::ZeroGrad {
            zeroed = true;
            line += 1;
        }
        if !zeroed || self.kind(line)? != Line::Backward {
            return None;
        }
        line += 1;
        while self.kind(line)? == Line::Clip {
            line += 1;
        }
        if self.kind(line)? != Line::Step {
            return None;
        }
        if self.kind(line + 1) == Some(Line::ScalerUpdate) {
            line += 1;
        }
        Some((first, line))
    }

    /// The update ending at `line` (blank lines after it skipped, going up).
    fn update_to(&self, mut line: usize) -> Option<(usize, usize)> {
        while self.kind(line)? == Line::Blank {
            line = line.checked_sub(1)?;
        }
        let last = line;
        if self.kind(line)? == Line::ScalerUpdate {
            line = line.checked_sub(1)?;
        }
        if self.kind(line)? != Line::Step {
            return None;
        }
        line = line.checked_sub(1)?;
        while self.kind(line)? == Line::Clip {
            line = line.checked_sub(1)?;
        }
        if self.kind(line)? != Line::Backward {
            return None;
        }
        let mut first = line;
        while first > 0 && self.kind(first - 1) == Some(Line::ZeroGrad) {
            first -= 1;
        }
        (first < line).then_some((first, last))
    }

    /// The comment lines right above `line` that introduce it (`# Update classifier.`).
    fn heading(&self, line: usize) -> usize {
        let mut first = line;
        while first > 0
            && self
                .text(first - 1)
                .is_some_and(|t| t.trim_start().starts_with('#') && t.starts_with(self.indent))
        {
            first -= 1;
        }
        first
    }
}

/// Move the update whose `backward()` is `backward` before the updates, the one of `step`
/// among them, that run between (see the module's documentation).
pub(crate) fn update_first(ctx: &RenderCtx<'_>, step: StmtRef, backward: Span) -> Option<Fix> {
    if backward.item != step.item {
        return None;
    }
    let body = ctx.body(step.item)?;
    let stepped = ctx.range(Span::new(step.item, body.stmt_span(step.stmt)))?;
    let target = simple_statement_at(&body, backward.rel)?;
    let target = ctx.range(Span::new(step.item, body.stmt_span(target)))?;
    let (indent, eol) = indentation(ctx, stepped.start)?;
    let lines = Lines { ctx, indent };
    let step_line = ctx.lines.line_of(stepped.start);
    let back_line = ctx.lines.line_of(target.start);
    if lines.kind(step_line)? != Line::Step || lines.kind(back_line)? != Line::Backward {
        return None;
    }
    // The step's update, and the updates right before it.
    let (mut first, mut last) = lines.update_to(step_line)?;
    if lines.kind(last + 1) == Some(Line::ScalerUpdate) {
        last += 1;
    }
    while let Some((f, _)) = first.checked_sub(1).and_then(|l| lines.update_to(l)) {
        first = f;
    }
    // The updates after it, up to the one of the `backward()`.
    let moved = loop {
        let (f, l) = lines.update_from(last + 1)?;
        if (f..=l).contains(&back_line) {
            break (lines.heading(f), l);
        }
        last = l;
    };
    let before = lines.text(first)?.trim();
    let first = lines.heading(first);
    if moved.0 <= first {
        return None;
    }
    let text = ctx.text_all();
    let (from, to) = (
        ctx.lines.line_start(moved.0),
        ctx.lines.line_start(moved.1 + 1),
    );
    let block = text.get(from..to)?;
    let jumped_text = text.get(ctx.lines.line_start(first)..from)?;
    if !keeps_graphs_it_shares(jumped_text, block) {
        return None;
    }
    let block = if block.ends_with('\n') {
        block.to_string()
    } else {
        format!("{block}{eol}")
    };
    // (A blank line that set the moved update apart goes with it.)
    let blank_before = moved.0 > first && lines.kind(moved.0 - 1) == Some(Line::Blank);
    let cut_from = if blank_before {
        ctx.lines.line_start(moved.0 - 1)
    } else {
        from
    };
    let insert = ctx.lines.line_start(first);
    let spacer = if blank_before { eol } else { "" };
    let loss = text
        .get(target.start..target.end)?
        .split(".backward(")
        .next()
        .unwrap_or_default();
    let title = format!("Run the update of `{loss}` first: move it before `{before}`");
    Some(moved_up(
        title,
        insert,
        format!("{block}{spacer}"),
        (cut_from, to, text.len()),
    ))
}

/// The fix that moves lines up: `content` inserted at `insert`, the lines `from..to` (below
/// it, in a text of length `len`) removed.
fn moved_up(
    title: String,
    insert: usize,
    content: String,
    (from, to, len): (usize, usize, usize),
) -> Fix {
    Fix {
        title,
        applicability: Applicability::Unsafe,
        edits: vec![
            Edit {
                range: TextRange::new(insert, insert),
                content,
            },
            Edit {
                range: TextRange::new(from, to.min(len)),
                content: String::new(),
            },
        ],
    }
}

/// A statement's text on one line (`update_params(\n    opt, loss)` as `update_params(opt,
/// loss)`).
fn one_line(text: &str) -> String {
    let mut out = String::new();
    for l in text.lines().map(str::trim) {
        if out.ends_with(',') {
            out.push(' ');
        }
        out.push_str(l);
    }
    out
}

/// Whether the moved update keeps what the updates it now precedes need: where one of those
/// kept its graph for a later backward (`retain_graph=True`, FQF's fraction update sharing the
/// entropy term with the quantile update), the moved one must keep it too, or it frees the
/// graph they go on to differentiate ("Trying to backward through the graph a second time").
fn keeps_graphs_it_shares(jumped: &str, moved: &str) -> bool {
    // (Any way of asking for it: `retain_graph=True`, `retain_graph=self.retain`, a positional
    // `True` to a helper or to `backward(None, True)`.)
    let retains = |t: &str| {
        let t = t.split_whitespace().collect::<String>();
        (t.contains("retain_graph") && !t.contains("retain_graph=False")) || t.contains("True")
    };
    !retains(jumped) || retains(moved)
}

/// Nothing but blank lines and comments.
fn only_blank(text: &str) -> bool {
    text.lines().all(|l| classify(l) == Line::Blank)
}

/// The same reordering where each update is a call of one helper of the program's own that
/// zeroes the gradients, runs the `backward()` and steps (`update_params(self.q1_optim,
/// q1_loss)`, toshikwa's SAC): the later call, whose `backward()` the earlier call's step
/// breaks, moves before the run of such calls the earlier one is in.
pub(crate) fn update_call_first(
    ctx: &RenderCtx<'_>,
    w: &crate::events::Write,
    t: &crate::events::Trigger,
) -> Option<Fix> {
    // Where the two chains of calls part: the calls of the helper, one scope up.
    let k = (0..t.calls.len()).find(|&k| w.call_path.get(k).copied() != t.calls[k])?;
    let (step_call, trig_call) = (*w.call_path.get(k)?, t.calls[k]?);
    // (Each runs the helper's own statements: no call between.)
    let direct = w.call_path.len() == k + 1 && t.calls.get(k + 1).copied().flatten().is_none();
    if !direct || k + 1 >= t.calls.len() || step_call.item != trig_call.item {
        return None;
    }
    if w.stmt?.item != t.range.item || crate::project::is_module_item(t.range.item) {
        return None;
    }
    let helper = ctx.body(t.range.item)?;
    let def = ctx.text(Span::new(
        t.range.item,
        helper.func(helper.root_def()?).span,
    ));
    let (z, b, st) = (
        def.find("zero_grad(")?,
        def.find(".backward(")?,
        def.rfind(".step(")?,
    );
    if !(z < b && b < st) {
        return None;
    }
    let item = step_call.item;
    let caller = ctx.body(item)?;
    let callee_of = |id: usize| match caller.stmts[id] {
        Stmt::Expr(e) => match *caller.expr(e) {
            Expr::Call { func, .. } => Some((e, ctx.text(Span::new(item, caller.expr_span(func))))),
            _ => None,
        },
        _ => None,
    };
    let at = |call: Span| {
        (0..caller.stmts.len())
            .find(|&i| callee_of(i).is_some_and(|(e, _)| caller.expr_span(e) == call.rel))
    };
    let (first_id, trig_id) = (at(step_call)?, at(trig_call)?);
    let name = callee_of(first_id)?.1;
    if callee_of(trig_id)?.1 != name {
        return None;
    }
    let range = |i: usize| ctx.range(Span::new(item, caller.stmt_spans[i]));
    let mut calls: Vec<TextRange> = (0..caller.stmts.len())
        .filter(|&i| callee_of(i).is_some_and(|(_, n)| n == name))
        .filter_map(range)
        .collect();
    calls.sort_by_key(|r| r.start);
    let text = ctx.text_all();
    let (step_stmt, trig_stmt) = (range(first_id)?, range(trig_id)?);
    let pos = calls.iter().position(|r| *r == step_stmt)?;
    let end = calls.iter().position(|r| *r == trig_stmt)?;
    if end <= pos {
        return None;
    }
    // Only such calls (blank lines, comments) from the step's call to the backward's.
    let gap = |a: TextRange, b: TextRange| text.get(a.end..b.start).is_some_and(only_blank);
    if !(pos..end).all(|i| gap(calls[i], calls[i + 1])) {
        return None;
    }
    // And those right before it.
    let mut first = pos;
    while first > 0 && gap(calls[first - 1], calls[first]) {
        first -= 1;
    }
    let (indent, _) = indentation(ctx, calls[first].start)?;
    if indentation(ctx, trig_stmt.start)?.0 != indent {
        return None;
    }
    let jumped = text.get(calls[first].start..calls[end - 1].end)?;
    if !keeps_graphs_it_shares(jumped, ctx.slice(trig_stmt)) {
        return None;
    }
    let from = ctx.lines.line_start(ctx.lines.line_of(trig_stmt.start));
    let to = ctx
        .lines
        .line_start(ctx.lines.line_of(trig_stmt.end.saturating_sub(1)) + 1);
    let insert = ctx.lines.line_start(ctx.lines.line_of(calls[first].start));
    let moved = text.get(from..to)?;
    let eol = if moved.ends_with('\n') { "" } else { "\n" };
    let title = format!(
        "Run this update first: move `{}` before `{}`",
        one_line(ctx.slice(trig_stmt)),
        one_line(ctx.slice(calls[first]))
    );
    Some(moved_up(
        title,
        insert,
        format!("{moved}{eol}"),
        (from, to, text.len()),
    ))
}

#[cfg(test)]
mod tests {
    use super::{classify, Line};

    /// Each line with the kind `classify` must give it.
    fn check(cases: &[(&str, Line)]) {
        for (line, kind) in cases {
            assert_eq!(classify(line), *kind, "{line}");
        }
    }

    #[test]
    fn lines_of_an_update() {
        check(&[
            ("        self.qf1_optimizer.zero_grad()", Line::ZeroGrad),
            (
                "    opt.zero_grad(set_to_none=True)  # clear",
                Line::ZeroGrad,
            ),
            ("    loss.backward()", Line::Backward),
            ("    d_loss.backward(retain_graph=True)", Line::Backward),
            ("    self.scaler.scale(loss).backward()", Line::Backward),
            ("    losses[\"total\"].backward()", Line::Backward),
            ("    scaler.unscale_(opt)", Line::Clip),
            (
                "    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)",
                Line::Clip,
            ),
            ("    self.policy_optimizer.step()", Line::Step),
            ("    scaler.step(opt_g)", Line::Step),
            ("    scaler.update()", Line::ScalerUpdate),
            ("    # Update the critic.", Line::Blank),
            ("", Line::Blank),
        ]);
    }

    #[test]
    fn a_graph_kept_for_a_later_backward_is_kept_by_the_moved_update() {
        use super::keeps_graphs_it_shares;
        let fqf = "update_params(self.fraction_optim, fraction_loss + entropy_loss,\n    retain_graph=True)";
        assert!(!keeps_graphs_it_shares(
            fqf,
            "update_params(self.quantile_optim, quantile_loss + entropy_loss)"
        ));
        assert!(keeps_graphs_it_shares(
            fqf,
            "update_params(opt, loss, retain_graph = True)"
        ));
        assert!(keeps_graphs_it_shares(
            "opt_d.zero_grad()\nd_loss.backward()\nopt_d.step()",
            "g_loss.backward()"
        ));
        // (Asked for by position or through a name.)
        let moved = "update_params(self.quantile_optim, quantile_loss)";
        assert!(!keeps_graphs_it_shares(
            "update_params(self.fraction_optim, loss, True)",
            moved
        ));
        assert!(!keeps_graphs_it_shares(
            "loss.backward(retain_graph=self.retain)",
            moved
        ));
        assert!(!keeps_graphs_it_shares("loss.backward(None, True)", moved));
    }

    #[test]
    fn other_lines_end_an_update() {
        // (A name bound, a loss computed, a call whose effect is not an update's.)
        check(&[
            (
                "    norm = clip_grad_norm_(model.parameters(), 1.0)",
                Line::Other,
            ),
            ("    loss = criterion(out, y)", Line::Other),
            ("    loss.backward(); opt.step()", Line::Other),
            ("    ema.update()", Line::Other),
            ("    log(loss.item())", Line::Other),
        ]);
    }
}
