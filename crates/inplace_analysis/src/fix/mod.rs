//! Rewrites offered as fixes, built from the IR and the text. Each keeps indentation and line
//! endings; whether it parses is verified where a fix is used (see [`crate::verify_fix`]).

use crate::finding::{Applicability, Edit, Fix, TextRange};
use crate::ir::*;
use crate::ops;
use crate::render::RenderCtx;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

mod copy;
mod loop_input;
mod no_grad;
mod out_of_place;
mod recompute;
mod reorder;
mod row_index;
mod update_order;

pub(crate) use copy::{
    assign_before_statement, call_passing, clone_activation_view, clone_argument, clone_before,
    clone_between_save_and_write, clone_dirty_argument, clone_kept_grad,
    clone_leaf_before_computed_write, clone_operand, clone_passed_to_helper, clone_reads_in_value,
    clone_renormalised_weight, clone_saved_read, clone_target_in_operand, clone_view_base,
    copy_detached, copy_in_caller, copy_snapshot, insert_clone, own_memory, used_after,
    written_expr,
};
pub(crate) use loop_input::detach_loop_input;
pub(crate) use no_grad::{augmented_update, out_arg_copied, wrap_no_grad, write_under_no_grad};
pub(crate) use out_of_place::{
    aug_assign_out_of_place, call_out_of_place, chain_all_out_of_place, chain_out_of_place_rebound,
    data_write_out_of_place, fresh_result_out_of_place, inplace_false, lambda_result_out_of_place,
    nested_call_out_of_place, rebind_read_again, result_out_of_place, return_from_hook,
    view_base_read_after,
};
pub(crate) use recompute::recompute_after_step;
pub(crate) use reorder::{
    backward_before, detach_attribute_state, detach_carried_state, move_after,
    parameter_write_after, parameter_write_before, rebuild_optimizer, write_after_backward,
    ZeroGrad,
};
pub(crate) use row_index::index_loop_rows;
pub(crate) use update_order::{update_call_first, update_first};

/// Tensor methods with an out-of-place twin of the same name without `_`.
fn has_out_of_place(base: &str) -> bool {
    const EXTRA: &[&str] = &[
        "add",
        "sub",
        "mul",
        "div",
        "clamp",
        "clamp_min",
        "clamp_max",
        "clip",
        "masked_fill",
        "masked_scatter",
        "index_add",
        "index_fill",
        "index_copy",
        "index_put",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "relu",
        "sigmoid",
        "tanh",
        "exp",
        "log",
        "abs",
        "neg",
        "pow",
        "sqrt",
        "addmm",
        "addcmul",
        "addcdiv",
        "lerp",
        "floor",
        "ceil",
        "round",
        "sign",
        "tril",
        "triu",
        "t",
        "squeeze",
        "unsqueeze",
        "transpose",
        "true_divide",
        "leaky_relu",
        "hardtanh",
        "elu",
        "silu",
        "gelu",
        "mish",
        "softplus",
        "selu",
        "celu",
        "relu6",
        "hardsigmoid",
        "hardswish",
        "threshold",
        "nan_to_num",
        "remainder",
        "fmod",
        "bitwise_and",
        "bitwise_or",
        "logical_not",
        "square",
        "rsqrt",
        "reciprocal",
        "erf",
    ];
    EXTRA.contains(&base) || ops::table().op(base).is_some()
}

/// Expressions that need no parentheses after a binary operator.
fn is_atomic(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Name { .. }
            | Expr::Attr { .. }
            | Expr::Call { .. }
            | Expr::Subscript { .. }
            | Expr::Int(_)
            | Expr::Float
            | Expr::Str(_)
            | Expr::StrPattern { .. }
            | Expr::OtherStr
            | Expr::True
            | Expr::False
            | Expr::None
            | Expr::Seq {
                kind: SeqKind::List,
                ..
            }
            | Expr::Dict { .. }
    )
}

fn op_text(op: BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::MatMul => "@",
        BinOp::Pow => "**",
        BinOp::FloorDiv => "//",
        BinOp::Mod => "%",
        BinOp::Other => return None,
    })
}

/// `target = value`; for a field of a tuple-like record (`state.h`, which cannot be assigned)
/// the record replaced: `state = state._replace(h=value)`.
fn assignment(target: &str, value: &str, record_field: bool) -> String {
    match target.rsplit_once('.').filter(|_| record_field) {
        Some((record, field)) => format!("{record} = {record}._replace({field}={value})"),
        None => format!("{target} = {value}"),
    }
}

/// Whether `name = ...` may be added before or in place of statement `s` (of `body`): a plain
/// name must already be one of the scope's own (a closure's or a global's name rebound inside a
/// function becomes local there, and its reads before raise `UnboundLocalError`); attributes
/// and subscripts always may.
fn rebindable(ctx: &RenderCtx<'_>, body: &crate::ir::Body, s: StmtId, target: &str) -> bool {
    let plain = !target.is_empty() && target.chars().all(|c| c == '_' || c.is_alphanumeric());
    !plain || body.binds_locally(s, |n| ctx.name(n) == target)
}

/// For a plain name that statement `s` may not rebind (see [`rebindable`]): the declaration
/// that lets it, `global name` (or `nonlocal name` where an enclosing function binds it),
/// inserted as the first statement of the function `s` is in, after its docstring. The name
/// then keeps pointing at what the function binds, for the code that reads it afterwards
/// (`def rescale(k): feats.mul_(k)` -> `global feats` and `feats = feats.mul(k)`).
fn declare_outer(
    ctx: &RenderCtx<'_>,
    body: &crate::ir::Body,
    s: StmtRef,
    target: &str,
) -> Option<(Edit, String)> {
    if target.is_empty() || !target.chars().all(|c| c == '_' || c.is_alphanumeric()) {
        return None;
    }
    let at = body.stmt_span(s.stmt);
    let mut funcs: Vec<&crate::ir::FuncDef> = (body.funcs.iter())
        .filter(|f| !f.lambda && f.span.contains(at))
        .collect();
    funcs.sort_by_key(|f| f.span.end - f.span.start);
    let (f, outer) = funcs.split_first()?;
    let binds = |g: &crate::ir::FuncDef| {
        body.param_names(g).any(|p| ctx.name(p) == target)
            || body
                .bound_in(g.body)
                .into_iter()
                .any(|n| ctx.name(n) == target)
    };
    let keyword = match outer.iter().any(|g| binds(g)) {
        true => "nonlocal",
        false => "global",
    };
    let mut stmts = body.stmts_of(f.body);
    let mut first = stmts.next()?;
    if matches!(*body.stmt(first), Stmt::Expr(e) if matches!(body.expr(e), Expr::Str(_))) {
        first = stmts.next()?;
    }
    let first = ctx.range(Span::new(s.item, body.stmt_span(first)))?;
    let (indent, eol) = indentation(ctx, first.start)?;
    let line = ctx.lines.line_start(ctx.lines.line_of(first.start));
    let declaration = format!("{keyword} {target}");
    Some((
        Edit {
            range: TextRange::new(line, line),
            content: format!("{indent}{declaration}{eol}"),
        },
        declaration,
    ))
}

/// `fix` completed, where the name it binds is not the function's own, by the declaration that
/// makes it so (see [`declare_outer`]); `None` when no declaration can.
fn with_declaration(
    ctx: &RenderCtx<'_>,
    body: &crate::ir::Body,
    s: StmtRef,
    target: &str,
    mut fix: Fix,
) -> Option<Fix> {
    if rebindable(ctx, body, s.stmt, target) {
        return Some(fix);
    }
    let (edit, declaration) = declare_outer(ctx, body, s, target)?;
    fix.edits.insert(0, edit);
    fix.title = format!("{} (with `{declaration}`)", fix.title);
    fix.applicability = Applicability::Unsafe;
    Some(fix)
}

/// A single edit as a fix.
fn one(title: String, applicability: Applicability, range: TextRange, content: String) -> Fix {
    Fix {
        title,
        applicability,
        edits: vec![Edit { range, content }],
    }
}

/// The reads of `name` as a plain name within `within`, in order.
fn reads_of(body: &Body, within: Rel, name: Name) -> impl Iterator<Item = ExprId> + '_ {
    (0..body.exprs.len())
        .filter(move |i| within.contains(body.expr_spans[*i]))
        .filter(move |i| matches!(body.exprs[*i], Expr::Name { name: n, .. } if n == name))
        .map(|i| ExprId(i as u32))
}

/// Whether another name is bound to `name` as it is (`queries = q`) in the scope of `item` (its
/// function, or the module's statements, one item each): a rewrite or copy that gives `name` a
/// new tensor would leave that one with the old values. (From the scope's assignments, collected
/// once per rendering.)
pub(crate) fn aliased_by_name(ctx: &RenderCtx<'_>, item: ItemId, name: Name) -> bool {
    (assignments(ctx, item).iter()).any(|a| a.alias_of == Some(name) && a.names != [name])
}

/// Statement `s` replaced by its out-of-place form `new`.
fn rewrite_statement(
    ctx: &RenderCtx<'_>,
    s: StmtRef,
    body: &crate::ir::Body,
    new: String,
    applicability: Applicability,
) -> Option<Fix> {
    let range = ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))?;
    Some(one(
        format!("Rewrite out of place: `{new}`"),
        applicability,
        range,
        new,
    ))
}

/// Indentation and line ending of a single-line statement that starts its line.
fn line_layout<'a>(ctx: &RenderCtx<'a>, stmt: TextRange) -> Option<(&'a str, &'static str)> {
    if ctx.slice(stmt).contains(['\n', '\r']) {
        return None;
    }
    indentation(ctx, stmt.start)
}

/// The simple statement (expression, assignment, augmented assignment) a write is in.
pub(crate) fn simple_statement(ctx: &RenderCtx<'_>, s: Option<StmtRef>) -> Option<TextRange> {
    let s = s?;
    let body = ctx.body(s.item)?;
    match body.stmt(s.stmt) {
        Stmt::Expr(_) | Stmt::Assign { .. } | Stmt::AugAssign { .. } => {
            ctx.range(Span::new(s.item, body.stmt_span(s.stmt)))
        }
        _ => None,
    }
}

fn same_indent(ctx: &RenderCtx<'_>, a: TextRange, b: TextRange) -> bool {
    let ia = indentation(ctx, a.start).map(|i| i.0);
    ia.is_some() && ia == indentation(ctx, b.start).map(|i| i.0)
}

/// Whether statement `later` comes after statement `earlier` in the same block: it starts a
/// later line with the same indentation `indent`, and every line between them is blank, a
/// comment, or at least as indented (checked on the text).
fn same_block(ctx: &RenderCtx<'_>, earlier: TextRange, later: TextRange, indent: &str) -> bool {
    if indentation(ctx, later.start).map(|i| i.0) != Some(indent) {
        return false;
    }
    let Some(between) = lines_between(ctx, earlier, later) else {
        return false;
    };
    between.lines().all(|l| {
        let t = l.trim_start();
        t.is_empty() || t.starts_with('#') || l.len() - t.len() >= indent.len()
    })
}

/// The lines strictly between statement `earlier` and statement `later` (which starts on a
/// line after it); `None` when it does not.
fn lines_between<'a>(ctx: &RenderCtx<'a>, earlier: TextRange, later: TextRange) -> Option<&'a str> {
    let next = ctx.lines.line_start(ctx.lines.line_of(earlier.end) + 1);
    if later.start < next {
        return None;
    }
    ctx.text_all()
        .get(next..ctx.lines.line_start(ctx.lines.line_of(later.start)))
}

/// Whether statement `later` is in a block nested (at any depth) in the block of statement
/// `earlier` (indented `outer`), in the same scope: `later` is indented deeper, no line between
/// them leaves `earlier`'s block, and no `def`, `class` or `lambda` header between them opens a
/// scope (one whose block has ended already counts too: the answer errs on the side of no).
pub(crate) fn nested_in_scope(
    ctx: &RenderCtx<'_>,
    earlier: TextRange,
    later: TextRange,
    outer: &str,
) -> bool {
    let Some((inner, _)) = indentation(ctx, later.start) else {
        return false;
    };
    if inner.len() <= outer.len() || !inner.starts_with(outer) {
        return false;
    }
    let Some(between) = lines_between(ctx, earlier, later) else {
        return false;
    };
    between.lines().all(|l| {
        let t = l.trim_start();
        let depth = l.len() - t.len();
        let opens_scope = ["def ", "async def ", "class ", "lambda"]
            .iter()
            .any(|k| t.starts_with(k));
        t.is_empty() || t.starts_with('#') || (depth >= outer.len() && !opens_scope)
    })
}

/// Whether the block of statement `earlier` holds statement `later` (in it or in a block
/// nested in it, in the same scope).
fn holds(ctx: &RenderCtx<'_>, earlier: TextRange, later: TextRange) -> bool {
    let Some((indent, _)) = indentation(ctx, earlier.start) else {
        return false;
    };
    same_block(ctx, earlier, later, indent) || nested_in_scope(ctx, earlier, later, indent)
}

/// An assignment to plain names (`d_fake = netD(fake)`, `out, h = rnn(x, h)`): what the
/// fixes that repeat or detach what an earlier statement computed look up.
struct Assignment {
    range: TextRange,
    /// The names bound, in order.
    names: Vec<Name>,
    /// The target's span when it is one name (the key of what the unit recorded of the name:
    /// shape, graph).
    target: Option<Span>,
    /// The names the value reads.
    reads: Vec<Name>,
    /// The value is this name as it is (`queries = q`).
    alias_of: Option<Name>,
}

/// The items whose statements share a scope with those of `item`: itself, and for a
/// module-level statement (an item of its own), the module's other statements.
fn scope_items(ctx: &RenderCtx<'_>, item: ItemId) -> Vec<ItemId> {
    use crate::syntax::outline::ItemKind;
    let Some(pos) = ctx.prog.position(item) else {
        return vec![item];
    };
    let it = &ctx.prog.items[pos];
    if it.kind() != ItemKind::Statement || it.parent().is_some() {
        return vec![item];
    }
    let segment = ctx.prog.segment_of_position(pos);
    (ctx.prog.items.iter().enumerate())
        .filter(|(p, o)| {
            o.kind() == ItemKind::Statement
                && o.parent().is_none()
                && ctx.prog.segment_of_position(*p) == segment
        })
        .map(|(_, o)| o.id)
        .collect()
}

/// The names an item's code reads, by position: the names read within a span are found in
/// time logarithmic in the body's size (many spans are looked up per body).
struct Reads(Vec<(u32, u32, Name)>);

impl Reads {
    fn of(body: &Body) -> Reads {
        let mut v: Vec<(u32, u32, Name)> = (body.exprs.iter().zip(&body.expr_spans))
            .filter_map(|(e, sp)| match *e {
                Expr::Name { name, reads: true } => Some((sp.start, sp.end, name)),
                _ => None,
            })
            .collect();
        v.sort_unstable_by_key(|r| (r.0, r.1));
        Reads(v)
    }

    /// The names read within `span`, each once.
    fn within(&self, span: Rel) -> Vec<Name> {
        let from = self.0.partition_point(|r| r.0 < span.start);
        let mut out: Vec<Name> = (self.0[from..].iter())
            .take_while(|r| r.0 < span.end)
            .filter(|r| r.1 <= span.end)
            .map(|r| r.2)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The names read within `span` of `body`.
fn names_read(body: &Body, span: Rel) -> Vec<Name> {
    Reads::of(body).within(span)
}

/// The assignments of each scope (keyed by the item [`assignments`] was asked for), built
/// once per rendering: every IP304 finding of a scope looks them up.
#[derive(Default)]
pub(crate) struct AssignmentCache(RefCell<FxHashMap<ItemId, Rc<[Assignment]>>>);

/// The plain one-name assignments a statement of `item` may see (see [`scope_items`]), in
/// text order.
fn assignments(ctx: &RenderCtx<'_>, item: ItemId) -> Rc<[Assignment]> {
    // (Keyed by the scope: its first item. Every module-level statement shares one.)
    let scope = scope_items(ctx, item).first().copied().unwrap_or(item);
    if let Some(done) = ctx.assigned.0.borrow().get(&scope) {
        return done.clone();
    }
    let out: Rc<[Assignment]> = collect_assignments(ctx, item).into();
    ctx.assigned.0.borrow_mut().insert(scope, out.clone());
    out
}

fn collect_assignments(ctx: &RenderCtx<'_>, item: ItemId) -> Vec<Assignment> {
    let mut out = Vec::new();
    for item in scope_items(ctx, item) {
        let Some(body) = ctx.body(item) else {
            continue;
        };
        let reads = Reads::of(&body);
        for (st, span) in body.stmts.iter().zip(&body.stmt_spans) {
            let Stmt::Assign { targets, value } = *st else {
                continue;
            };
            let mut ts = body.exprs_of(targets);
            let (Some(t), None) = (ts.next(), ts.next()) else {
                continue;
            };
            let mut bound = Vec::new();
            reorder::names_in(&body, t, &mut bound);
            let single = matches!(*body.expr(t), Expr::Name { .. });
            let all_names = match *body.expr(t) {
                Expr::Seq { items, .. } => body.exprs_of(items).count() == bound.len(),
                _ => single,
            };
            if !all_names {
                continue;
            }
            let Some(range) = ctx.range(Span::new(item, *span)) else {
                continue;
            };
            out.push(Assignment {
                range,
                names: bound.into_iter().map(|(n, _)| n).collect(),
                target: single.then(|| Span::new(item, body.expr_span(t))),
                reads: reads.within(body.expr_span(value)),
                alias_of: match *body.expr(value) {
                    Expr::Name { name, .. } => Some(name),
                    _ => None,
                },
            });
        }
    }
    out.sort_by_key(|a| a.range.start);
    out
}

/// The last assignment of `name` that ends before `before` (in text order).
fn last_assignment(assigned: &[Assignment], name: Name, before: usize) -> Option<&Assignment> {
    (assigned.iter()).rfind(|a| a.names.contains(&name) && a.range.end <= before)
}

/// The indentation before `pos` (only blanks between its line's start and it) and the line
/// ending of its line.
fn indentation<'a>(ctx: &RenderCtx<'a>, pos: usize) -> Option<(&'a str, &'static str)> {
    let line = ctx.lines.line_of(pos);
    let start = ctx.lines.line_start(line);
    let indent = ctx.text_all().get(start..pos)?;
    if !indent.chars().all(|c| c == ' ' || c == '\t') {
        return None;
    }
    let (_, end) = ctx.lines.line_range(ctx.text_all(), line);
    let eol = if ctx.text_all()[end..].starts_with("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    Some((indent, eol))
}

/// The innermost simple statement (expression, assignment, `return`) around a range.
fn simple_statement_at(body: &Body, rel: Rel) -> Option<StmtId> {
    (0..body.stmts.len())
        .filter(|&i| {
            matches!(
                body.stmts[i],
                Stmt::Expr(_) | Stmt::Assign { .. } | Stmt::AugAssign { .. } | Stmt::Return(_)
            ) && body.stmt_spans[i].contains(rel)
        })
        .min_by_key(|&i| body.stmt_spans[i].end - body.stmt_spans[i].start)
        .map(|i| StmtId(i as u32))
}

/// A name or attribute path (`y`, `self.buf`).
fn is_place(body: &Body, e: ExprId) -> bool {
    match *body.expr(e) {
        Expr::Name { .. } => true,
        Expr::Attr { value, .. } => is_place(body, value),
        _ => false,
    }
}

/// The plain name a write (statement `s` of `body`) goes through, the innermost function that
/// holds it, and whether that function reads the name after the write's statement (`return x`
/// included). `None` when the write is not through a plain name or not in a function.
pub(crate) fn written_name_in_function<'b>(
    body: &'b Body,
    s: StmtId,
    w: &crate::events::Write,
) -> Option<(Name, &'b FuncDef, bool)> {
    let root = written_expr(body, s, w).and_then(|e| root_place(body, e))?;
    let Expr::Name { name, .. } = *body.expr(root) else {
        return None;
    };
    let at = body.stmt_span(s);
    let func = (body.funcs.iter())
        .filter(|f| !f.lambda && f.span.contains(at))
        .min_by_key(|f| f.span.end - f.span.start)?;
    Some((name, func, read_after(body, name, at, func.span)))
}

/// Whether `name` is read (or bound) after `at` within `within`, for more than its metadata
/// (`x.shape`, `x.device`, `len(x)` read none of its values).
fn read_after(body: &Body, name: Name, at: Rel, within: Rel) -> bool {
    use crate::ir::known;
    let runs_after = RunsAfter::new(body, at, within);
    let after = |sp: &Rel| runs_after.contains(*sp);
    let is_name = |e: ExprId| matches!(*body.expr(e), Expr::Name { name: n, .. } if n == name);
    let mut metadata: Vec<ExprId> = Vec::new();
    for (e, _) in (body.exprs.iter().zip(&body.expr_spans)).filter(|(_, sp)| after(sp)) {
        match *e {
            Expr::Attr { value, attr, .. }
                if is_name(value)
                    && [
                        known::SHAPE,
                        known::SIZE,
                        known::NDIM,
                        known::DEVICE,
                        known::DTYPE,
                    ]
                    .contains(&attr) =>
            {
                metadata.push(value);
            }
            Expr::Call { func, args, .. } if matches!(*body.expr(func), Expr::Name { name: f, .. } if f == known::BUILTIN_LEN) =>
            {
                metadata.extend(
                    body.exprs_of(body.args[args as usize].positional)
                        .filter(|a| is_name(*a)),
                );
            }
            _ => {}
        }
    }
    (0..body.exprs.len())
        .map(|i| ExprId(i as u32))
        .any(|e| is_name(e) && after(&body.expr_span(e)) && !metadata.contains(&e))
}

/// Where code can run after the statement at `at`, within `within`: later in the text, or
/// anywhere in a loop around `at` inside `within` (a later iteration; not `within` itself: a
/// loop that rebinds the name each time is the scope asked about), but not in the other arms
/// of an `if` whose arm holds `at` (`else:` of the `if` whose body holds it) outside such a
/// loop: those do not run after it on the same path.
pub(crate) struct RunsAfter {
    at: Rel,
    within: Rel,
    loops: Vec<Rel>,
    other_arms: Vec<Rel>,
}

impl RunsAfter {
    pub(crate) fn new(body: &Body, at: Rel, within: Rel) -> RunsAfter {
        let block_span = |b: crate::ir::Block| {
            let mut spans = body.stmts_of(b).map(|s| body.stmt_span(s));
            let first = spans.next()?;
            Some(Rel::new(first.start, spans.last().unwrap_or(first).end))
        };
        // (What runs again: a `for`'s body, not its iterable; a `while`'s test and body.)
        let loops: Vec<Rel> = (body.stmts.iter().zip(&body.stmt_spans))
            .filter(|(_, sp)| sp.contains(at) && within.contains(**sp) && **sp != within)
            .filter_map(|(st, sp)| match *st {
                Stmt::For { body: b, .. } => block_span(b),
                Stmt::While { body: b, .. } => Some(Rel::new(sp.start, block_span(b)?.end)),
                _ => None,
            })
            .filter(|l| l.contains(at))
            .collect();
        let mut other_arms = Vec::new();
        for (k, st) in body.stmts.iter().enumerate() {
            let sp = body.stmt_spans[k];
            if !matches!(st, Stmt::If { .. })
                || !sp.contains(at)
                || loops.iter().any(|l| l.contains(sp))
            {
                continue;
            }
            let arms: Vec<Rel> = (body.inner_blocks(StmtId(k as u32)).into_iter())
                .filter_map(block_span)
                .collect();
            if arms.iter().any(|a| a.contains(at)) {
                other_arms.extend(arms.into_iter().filter(|a| !a.contains(at)));
            }
        }
        RunsAfter {
            at,
            within,
            loops,
            other_arms,
        }
    }

    /// Whether code at `sp` can run after the statement.
    pub(crate) fn contains(&self, sp: Rel) -> bool {
        self.within.contains(sp)
            && !self.at.contains(sp)
            && (sp.start >= self.at.end || self.loops.iter().any(|l| l.contains(sp)))
            && !self.other_arms.iter().any(|arm| arm.contains(sp))
    }
}

/// Whether the write's statement writes, through a plain name, the element an enclosing `for`
/// loop binds (`for o in steps: o.mul_(m)`), and nothing in the loop reads that name after it:
/// the write is there to change the element in its container, so an out-of-place rewrite
/// (`o = o.mul(m)`) would be a dead store that silently drops it.
pub(crate) fn loop_element_update(body: &Body, s: StmtId, w: &crate::events::Write) -> bool {
    element_loop(body, s, w).is_some()
}

/// The loop of [`loop_element_update`].
fn element_loop(body: &Body, s: StmtId, w: &crate::events::Write) -> Option<StmtId> {
    let (k, name, the_loop) = taking_loop(body, s, w)?;
    (!read_after(body, name, body.stmt_span(s), the_loop)).then_some(k)
}

/// Whether the name a write (statement `s`) goes through is an element a loop around it takes
/// (`for (key, val), grad in zip(model.named_parameters(), grads): val.sub_(...)`) that the
/// loop then stores, after the write, as it is (`fast[key] = val`, `fast.append(val)`): a
/// value computed for the container, not an update of the parameter.
pub(crate) fn stored_after_in_loop(
    ctx: &RenderCtx<'_>,
    body: &Body,
    s: StmtId,
    w: &crate::events::Write,
) -> bool {
    let Some((_, name, the_loop)) = taking_loop(body, s, w) else {
        return false;
    };
    let at = body.stmt_span(s);
    let is_name = |e: ExprId| matches!(*body.expr(e), Expr::Name { name: n, .. } if n == name);
    (body.stmts.iter().zip(&body.stmt_spans)).any(|(st, sp)| {
        if !(the_loop.contains(*sp) && sp.start >= at.end) {
            return false;
        }
        match *st {
            Stmt::Assign { targets, value } => {
                is_name(value)
                    && body
                        .exprs_of(targets)
                        .all(|t| !matches!(*body.expr(t), Expr::Name { .. }))
            }
            Stmt::Expr(e) => match *body.expr(e) {
                Expr::Call { func, args } => {
                    let appends = matches!(*body.expr(func),
                        Expr::Attr { attr, .. } if matches!(ctx.name(attr), "append" | "insert"));
                    appends
                        && body
                            .exprs_of(body.args[args as usize].positional)
                            .any(is_name)
                }
                _ => false,
            },
            _ => false,
        }
    })
}

/// The innermost loop around statement `s` that binds, as an element, the name the write goes
/// through: the loop, the name, the loop's span.
fn taking_loop(body: &Body, s: StmtId, w: &crate::events::Write) -> Option<(StmtId, Name, Rel)> {
    let written = written_expr(body, s, w)?;
    let Expr::Name { name, .. } = *body.expr(written) else {
        return None;
    };
    let at = body.stmt_span(s);
    let mut bound = Vec::new();
    let (k, the_loop) = (body.stmts.iter().zip(&body.stmt_spans).enumerate())
        .filter(|(_, (_, sp))| sp.contains(at) && **sp != at)
        .filter_map(|(k, (st, sp))| match *st {
            Stmt::For { target, .. } => {
                bound.clear();
                reorder::names_in(body, target, &mut bound);
                (bound.iter().any(|(n, _)| *n == name) || element_bound_in(body, name, *sp, at))
                    .then_some((k, *sp))
            }
            _ => None,
        })
        .min_by_key(|(_, sp)| sp.end - sp.start)?;
    Some((StmtId(k as u32), name, the_loop))
}

/// Whether `name` is bound in loop `the_loop` before `at` to an element of a container
/// (`for k in keys: w = fast[k]`): the loop goes through the container's elements under it.
fn element_bound_in(body: &Body, name: Name, the_loop: Rel, at: Rel) -> bool {
    (body.stmts.iter().zip(&body.stmt_spans)).any(|(st, sp)| {
        the_loop.contains(*sp)
            && sp.end <= at.start
            && matches!(*st, Stmt::Assign { targets, value }
                if matches!(body.expr(value), Expr::Subscript { .. })
                    && body.exprs_of(targets).any(|t| matches!(*body.expr(t), Expr::Name { name: n, .. } if n == name)))
    })
}

/// `for s in scores: s.clamp_(lo, hi)` -> `scores = [s.clamp(lo, hi) for s in scores]`: a loop
/// over a list named by a plain name, whose one statement writes each element in place through
/// the loop's name (the elements being what an op saved), rebuilt out of place as a list of the
/// new tensors. Unsafe: the list is a new one; what else holds the old elements keeps them.
pub(crate) fn loop_list_out_of_place(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    let crate::events::WriteKind::Method(m) = w.kind else {
        return None;
    };
    let (s, call) = (w.stmt?, w.call?);
    let body = ctx.body(s.item)?;
    let k = element_loop(&body, s.stmt, w)?;
    let Stmt::For {
        target,
        iter,
        body: block,
        orelse,
    } = *body.stmt(k)
    else {
        return None;
    };
    let one_statement = body.stmts_of(block).eq([s.stmt]) && body.stmts_of(orelse).next().is_none();
    let (Expr::Name { .. }, Expr::Name { .. }, Stmt::Expr(e)) =
        (*body.expr(target), *body.expr(iter), *body.stmt(s.stmt))
    else {
        return None;
    };
    // (The loop's name stays unbound after a comprehension: not where it is read later.)
    let Expr::Name { name: x_name, .. } = *body.expr(target) else {
        return None;
    };
    let after = Rel::new(body.stmt_span(k).end, u32::MAX);
    if !one_statement || e != call || names_read(&body, after).contains(&x_name) {
        return None;
    }
    // (The list must be this scope's own, made by an assignment before the loop in a function:
    // rebinding a parameter, a global or an outer loop's name would not change what the caller
    // or the rest of the program sees.)
    let Expr::Name {
        name: list_name, ..
    } = *body.expr(iter)
    else {
        return None;
    };
    let loop_span = body.stmt_span(k);
    let is_param = body
        .root_def()
        .is_some_and(|f| body.param_names(body.func(f)).any(|p| p == list_name));
    let mut bound = Vec::new();
    let outer_loop = (body.stmts.iter().zip(&body.stmt_spans)).any(|(st, sp)| match *st {
        Stmt::For { target, .. } if sp.contains(loop_span) && *sp != loop_span => {
            bound.clear();
            reorder::names_in(&body, target, &mut bound);
            bound.iter().any(|(n, _)| *n == list_name)
        }
        _ => false,
    });
    let assigned = (body.stmts.iter().zip(&body.stmt_spans)).any(|(st, sp)| match *st {
        Stmt::Assign { targets, .. } => {
            sp.end <= loop_span.start
                && body
                    .exprs_of(targets)
                    .any(|t| matches!(*body.expr(t), Expr::Name { name, .. } if name == list_name))
        }
        _ => false,
    });
    // (At module level the list is the module's own.)
    let in_function = body.root_def().is_some();
    if is_param || outer_loop || (in_function && !assigned) {
        return None;
    }
    let base = ctx.name(m).strip_suffix('_')?;
    if !has_out_of_place(base) {
        return None;
    }
    let Expr::Call { func, args } = *body.expr(call) else {
        return None;
    };
    let Expr::Attr { value, .. } = *body.expr(func) else {
        return None;
    };
    if value != target
        && ctx.text(Span::new(s.item, body.expr_span(value)))
            != ctx.text(Span::new(s.item, body.expr_span(target)))
    {
        return None;
    }
    let text = |e: Rel| ctx.text(Span::new(s.item, e));
    let (x, list) = (text(body.expr_span(target)), text(body.expr_span(iter)));
    let arguments = text(body.args[args as usize].span);
    if arguments.contains('\n') || arguments.contains('#') {
        return None;
    }
    let range = ctx.range(Span::new(s.item, body.stmt_span(k)))?;
    let new = format!("{list} = [{x}.{base}{arguments} for {x} in {list}]");
    Some(one(
        format!("Rebuild the list out of place: `{new}`"),
        Applicability::Unsafe,
        range,
        new,
    ))
}

/// For a loop that changes the elements of a tensor its function was given (`for t, m in
/// zip(tensor, mean): t.sub_(m)`, `for c in images.unbind(1): c.mul_(s)`): a copy of that
/// tensor, bound to its name before the loop, so the loop changes the copy and what the caller
/// gave stays as it was.
pub(crate) fn clone_loop_tensor(ctx: &RenderCtx<'_>, w: &crate::events::Write) -> Option<Fix> {
    // (The element written is a view: a row or a piece of a tensor, not a list's item.)
    let s = w.stmt.filter(|_| w.view_origin.is_some())?;
    let body = ctx.body(s.item)?;
    let the_loop = element_loop(&body, s.stmt, w)?;
    let Stmt::For { target, iter, .. } = *body.stmt(the_loop) else {
        return None;
    };
    let written = written_expr(&body, s.stmt, w)?;
    let Expr::Name { name, .. } = *body.expr(written) else {
        return None;
    };
    // The iterable the element comes from: `x` of `for t in x`, of `for i, t in enumerate(x)`,
    // or the one at its place in `for t, m in zip(x, mean)`.
    let at_place = |k: usize| match *body.expr(target) {
        Expr::Seq { items, .. } => (body.exprs_of(items).nth(k))
            .is_some_and(|t| matches!(*body.expr(t), Expr::Name { name: n, .. } if n == name)),
        _ => false,
    };
    let source = match *body.expr(iter) {
        Expr::Call { func, args } if matches!(*body.expr(func), Expr::Name { .. }) => {
            let positional: Vec<ExprId> =
                body.exprs_of(body.args[args as usize].positional).collect();
            let f = ctx.text(Span::new(s.item, body.expr_span(func)));
            match f {
                "enumerate" if at_place(1) => *positional.first()?,
                "zip" => (0..positional.len())
                    .find(|k| at_place(*k))
                    .map(|k| positional[k])?,
                _ => return None,
            }
        }
        _ if matches!(*body.expr(target), Expr::Name { .. }) => iter,
        _ => return None,
    };
    // (A parameter of the function: what a helper was handed, a tensor since its rows are
    // views; a module-level name may be a dataset whose samples are views of what it keeps.)
    let root = root_place(&body, source)?;
    let Expr::Name {
        name: root_name, ..
    } = *body.expr(root)
    else {
        return None;
    };
    let at = body.stmt_span(the_loop);
    let func = (body.funcs.iter())
        .filter(|f| !f.lambda && f.span.contains(at))
        .min_by_key(|f| f.span.end - f.span.start)?;
    if !body.param_names(func).any(|p| p == root_name) {
        return None;
    }
    let r = ctx.text(Span::new(s.item, body.expr_span(root)));
    let stmt = ctx.range(Span::new(s.item, at))?;
    let title = format!("Change a copy: `{r} = {r}.clone()` before the loop");
    copy::copy_before_statement(ctx, stmt, r, title)
}

/// The name or attribute path a view chain starts from: `y` of `y[0]`, `y.view(-1)[:, 1]`,
/// `y.detach()`, `self.buf[t]`.
pub(crate) fn root_place(body: &Body, e: ExprId) -> Option<ExprId> {
    chain_root(body, e, &|_| true)
}

/// The place a chain of subscripts and method calls starts from, through the methods
/// `through` accepts (by name).
pub(crate) fn chain_root(
    body: &Body,
    mut e: ExprId,
    through: &dyn Fn(Name) -> bool,
) -> Option<ExprId> {
    loop {
        if is_place(body, e) {
            return Some(e);
        }
        e = match *body.expr(e) {
            Expr::Subscript { value, .. } => value,
            Expr::Call { func, .. } => match *body.expr(func) {
                Expr::Attr { value, attr, .. } if through(attr) => value,
                _ => return None,
            },
            _ => return None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Program;

    /// For the function `f` of `text`: whether each occurrence of `x` after the marker
    /// statement `x.mul_(2)` can run after it (by [`RunsAfter`] over the whole function).
    fn reads_after(text: &str) -> Vec<bool> {
        let mut names = Interner::new();
        let prog = Program::of(text, &mut names);
        let item = (prog.items.iter())
            .find(|i| i.name.is_some())
            .expect("a function");
        let base = item.outline.start as usize;
        let body = prog.body(item.id, &mut names).expect("its body");
        let write = text.find("x.mul_(2)").expect("the write") - base;
        let at = (body.stmt_spans.iter())
            .filter(|sp| sp.start as usize == write)
            .min_by_key(|sp| sp.end - sp.start)
            .copied()
            .expect("its statement");
        let within = body.funcs[0].span;
        let runs = RunsAfter::new(&body, at, within);
        let x = names.intern("x");
        let mut out: Vec<(u32, bool)> = (body.exprs.iter().zip(&body.expr_spans))
            .filter(|(e, sp)| {
                matches!(e, Expr::Name { name, .. } if *name == x) && !at.contains(**sp)
            })
            .map(|(_, sp)| (sp.start, runs.contains(*sp)))
            .collect();
        out.sort_unstable();
        out.into_iter().map(|(_, r)| r).collect()
    }

    #[test]
    fn the_other_arm_of_an_if_runs_after_only_in_a_later_iteration() {
        let straight = "def f(x, c):\n    if c:\n        x.mul_(2)\n    else:\n        y = x + 1\n    return x\n";
        assert_eq!(reads_after(straight), [false, true]);
        let looped = "def f(x, n):\n    for i in range(len(x)):\n        if i == 0:\n            x.mul_(2)\n        else:\n            y = x + 1\n";
        // (`len(x)` runs once, before the loop: not after the write.)
        assert_eq!(reads_after(looped), [false, true]);
        let before_in_loop =
            "def f(x, n):\n    while n:\n        y = x + 1\n        x.mul_(2)\n        n -= 1\n";
        assert_eq!(reads_after(before_in_loop), [true]);
    }
}
