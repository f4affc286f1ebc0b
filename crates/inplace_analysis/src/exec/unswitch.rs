//! Loop unswitching: an `if` inside a loop whose condition reads only names the loop never
//! rebinds, holding plain values (numbers, strings, flags, `None`), takes the same branch on
//! every iteration. Such a loop runs once with the condition true and once with it false, and
//! the two exits are joined. Without it, the join after the `if` lets one iteration take the
//! branch and the next skip it, and a hazard that needs both (GriffinLim's
//! `if momentum: angles = angles - tprev.mul_(momentum)`, where `tprev` is the `rebuilt`
//! that the iteration before saved only when the branch did not run) is reported on code that
//! cannot raise.

use super::{Code, Interp};
use crate::domain::*;
use crate::ir::{Block, Body, Expr, ExprId, Name, Rel, Span, Stmt};
use rustc_hash::FxHashSet;
use smallvec::SmallVec;

/// A loop's candidate: the condition of an `if` in its body and the names it reads, none of
/// them rebound in the body.
pub(crate) type Invariant = Option<(ExprId, SmallVec<[Name; 2]>)>;

impl Interp<'_, '_> {
    /// The condition an `if` in the loop body `block` may be decided by (see the module doc):
    /// undecided now, and reading only names that hold plain values. One per loop, and none
    /// inside a loop already unswitched (the cost stays twice the loop's).
    pub(super) fn invariant_condition(&mut self, c: Code<'_>, block: Block) -> Option<Span> {
        if !self.assumed.is_empty() || self.exhausted() {
            return None;
        }
        let first = c.body.stmts_of(block).next()?;
        let key = Span::new(c.item, c.body.stmt_span(first));
        let (cond, names) = match self.invariant_bodies.get(&key) {
            Some(known) => known.clone(),
            None => {
                let found = candidate(c.body, block);
                self.invariant_bodies.insert(key, found.clone());
                found
            }
        }?;
        let plain = |it: &Self, n: &Name| {
            it.state.env.get(n).is_some_and(|vals| {
                vals.iter()
                    .all(|v| matches!(it.obj(*v), Obj::Other | Obj::Str(_)))
            })
        };
        if !names.iter().all(|n| plain(self, n)) {
            return None;
        }
        let value = self.eval(c, cond);
        if value.as_slice() == [TRUE] || value.as_slice() == [FALSE] {
            return None;
        }
        Some(c.span(cond))
    }

    /// The value an unswitched loop assumes for this condition, if it is one.
    pub(super) fn assumed_value(&self, c: Code<'_>, cond: ExprId) -> Option<ObjId> {
        let at = (c.span(cond), self.frames.len());
        self.assumed
            .iter()
            .find(|(s, depth, _)| (*s, *depth) == at)
            .map(|(.., v)| if *v { TRUE } else { FALSE })
    }
}

/// The first `if` in `block` (at any depth of its control flow) whose condition is made of
/// names and constants (`flag`, `not flag`, `mode == "train"`, `p is None and k > 0`), none of
/// them rebound anywhere in the block.
fn candidate(body: &Body, block: Block) -> Invariant {
    let mut bound = FxHashSet::default();
    let mut conds = Vec::new();
    if !scan(body, block, &mut bound, &mut conds) {
        return None;
    }
    let (cond, names) = conds.into_iter().find_map(|cond| {
        let mut names = SmallVec::new();
        (plain_test(body, cond, &mut names)
            && !names.is_empty()
            && names.iter().all(|n| !bound.contains(n)))
        .then_some((cond, names))
    })?;
    // A walrus in the block's expressions may rebind them too (looked for only now: most loops
    // have no candidate, and this reads the whole body's expressions).
    let (first, last) = (body.stmts_of(block).next()?, body.stmts_of(block).last()?);
    let within = Rel::new(body.stmt_span(first).start, body.stmt_span(last).end);
    let rebound = body.exprs.iter().zip(&body.expr_spans).any(|(e, at)| {
        matches!(e, Expr::Named { target, .. } if names.contains(target)) && within.contains(*at)
    });
    (!rebound).then_some((cond, names))
}

/// Collect the names `block` binds and the conditions of its `if`s; false where a statement
/// may bind names this does not follow (`match`).
fn scan(body: &Body, block: Block, bound: &mut FxHashSet<Name>, conds: &mut Vec<ExprId>) -> bool {
    for s in body.stmts_of(block) {
        match *body.stmt(s) {
            Stmt::Assign { targets, .. } => {
                for t in body.exprs_of(targets) {
                    target_names(body, t, bound);
                }
            }
            Stmt::AugAssign { target, .. } => target_names(body, target, bound),
            Stmt::For { target, .. } => target_names(body, target, bound),
            Stmt::If { cond, .. } => conds.push(cond),
            Stmt::With { items, .. } => {
                for i in body.list(items) {
                    target_names(body, body.with_items[*i as usize].alias, bound);
                }
            }
            Stmt::Try(t) => {
                for h in body.list(body.tries[t as usize].handlers) {
                    target_names(body, body.handlers[*h as usize].alias, bound);
                }
            }
            Stmt::Def(f) => {
                bound.insert(body.func(f).name);
            }
            Stmt::Class(k) => {
                bound.insert(body.class(k).name);
            }
            Stmt::Import(list) => {
                for i in body.list(list) {
                    bound.insert(body.imports[*i as usize].bind);
                }
            }
            // `del x`, `global x`, ...: their names count as rebound.
            Stmt::Other(list) => {
                for e in body.exprs_of(list) {
                    target_names(body, e, bound);
                }
            }
            Stmt::Match { .. } => return false,
            _ => {}
        }
        for inner in body.inner_blocks(s) {
            if !scan(body, inner, bound, conds) {
                return false;
            }
        }
    }
    true
}

/// The names a target binds (`a`, `a, *b`, `(a, b)`); attributes and subscripts bind none.
fn target_names(body: &Body, e: ExprId, out: &mut FxHashSet<Name>) {
    let Some(e) = e.get() else {
        return;
    };
    match *body.expr(e) {
        Expr::Name { name, .. } => {
            out.insert(name);
        }
        Expr::Seq { items, .. } => {
            for i in body.exprs_of(items) {
                target_names(body, i, out);
            }
        }
        Expr::Starred(inner) => target_names(body, inner, out),
        _ => {}
    }
}

/// A condition made only of names and constants, with `not`, `and`/`or` and comparisons; its
/// names in `names`.
fn plain_test(body: &Body, e: ExprId, names: &mut SmallVec<[Name; 2]>) -> bool {
    match *body.expr(e) {
        Expr::Name { name, .. } => {
            if !names.contains(&name) {
                names.push(name);
            }
            true
        }
        Expr::Not(x) => plain_test(body, x, names),
        Expr::Bool { left, right, .. } => {
            plain_test(body, left, names) && plain_test(body, right, names)
        }
        Expr::Compare { operands, .. } => {
            body.exprs_of(operands).all(|o| plain_test(body, o, names))
        }
        Expr::True | Expr::False | Expr::None | Expr::Int(_) | Expr::Float | Expr::Str(_) => true,
        _ => false,
    }
}
