//! An in-place op whose other operand is a view of the elements it writes: `a -= a[:, :1]`,
//! `a[:, 1:] -= a[:, :-1]`, `a.div_(a[:, :1])`, `a += a.t()`. Torch updates the elements in an
//! order of its own and reads the operand as it goes, so some elements are read after they
//! were changed (measured with torch 2.15: `a -= a[:, :1]` is wrong for a (4, 6) tensor and
//! right for (64, 64), where the loop is vectorised), or it refuses (`a -= a[0]`, `a += a.t()`:
//! "unsupported operation: some elements of the input tensor and the written-to tensor refer to
//! a single memory location"). Decided from the two expressions: the same base, and constant
//! indices whose elements overlap without being the same ones (`boxes[:, 2:] -= boxes[:, :2]`
//! selects other elements and is fine; a non-constant slice, or a name holding a number, is the
//! same as a part of the same text, `x[i, 1:] -= x[i, :-1]` in a loop over rows; anything else
//! that is not a constant decides nothing).
//!
//! On the CPU torch updates a strided view in memory order, so an operand that only reads ahead
//! of the writes is right (measured with torch 2.15 on shapes from (4, 6) to (8, 65536)):
//! shifted to later positions along one dimension other than the first (`x[:, :-1] -= x[:, 1:]`),
//! or the last position broadcast over the dimension (`p /= p[..., -1:]`, normalising by the
//! last element, which is written last). This holds only where the program uses no accelerator
//! (a GPU kernel writes the elements in parallel, in no order). Along the first dimension both
//! views are contiguous and torch refuses instead (`x[:-1] -= x[1:]`, and `x[i, :-1] -= x[i, 1:]`,
//! whose first kept dimension is the shifted one): still reported. (So does
//! a tensor whose dimensions before the shifted one all have size 1, or a 1-D tensor under
//! `...`: sizes are not known here, and such shapes are taken not to occur.)

use super::*;
use crate::events::{Event, WriteId};

/// A bound of a range of one dimension: a position from the start, or from the end (`-1`, or
/// the end itself: `(true, 0)`). Sizes are unknown: a position from the end is taken to lie
/// after every position from the start.
type Bound = (bool, i64);

/// The elements of a base a place selects.
struct Region {
    /// The base's span (compared by text).
    base: Span,
    /// Per dimension, from the first (after a leading `...`, from the last).
    dims: Vec<(Bound, Bound)>,
    /// A leading `...`: the dimensions count from the last.
    from_last: bool,
    /// `.t()`, `.T`, `.transpose(...)`, `.permute(...)`: the same elements in other places.
    moved: bool,
    /// Which of `dims` an integer index drops (bit `k`: `dims[k]`; the operand broadcasts
    /// against the other ones).
    dropped: u64,
}

const ALL: (Bound, Bound) = ((false, 0), (true, 0));

/// Bounds from here on stand for a part that is no constant, by its text (see
/// [`Interp::region`]): equal only to the same part.
const SYMBOLIC: i64 = 1 << 40;

fn symbolic(d: (Bound, Bound)) -> bool {
    d.0 .1 >= SYMBOLIC
}

fn bound(v: i64) -> Bound {
    (v < 0, v)
}

impl Interp<'_, '_> {
    /// Report an in-place write (`write`, into `written`, from `target`) that reads `operand`,
    /// a view of elements it writes (see the module's documentation). Only into what is known
    /// to be a tensor, not a NumPy array's memory (NumPy copies an overlapping operand first).
    pub(super) fn check_self_overlap(
        &mut self,
        c: Code<'_>,
        (target, written): (ExprId, &Vals),
        operand: Option<ExprId>,
        write: WriteId,
    ) {
        let Some(operand) = operand.filter(|e| e.get().is_some()) else {
            return;
        };
        let tensor = |v: &ObjId| {
            self.tensor(*v)
                .is_some_and(|t| t.known && t.numpy.is_none())
        };
        if !written.iter().all(tensor) {
            return;
        }
        let (Some(t), Some(o)) = (self.region(c, target), self.region(c, operand)) else {
            return;
        };
        // (A whole name, `x -= x[..., :1]`, counts from either end.)
        let ends_differ = t.from_last != o.from_last && !t.dims.is_empty() && !o.dims.is_empty();
        if self.prog.text_of(t.base) != self.prog.text_of(o.base) || ends_differ {
            return;
        }
        let n = t.dims.len().max(o.dims.len());
        let dim = |r: &Region, k: usize| r.dims.get(k).copied().unwrap_or(ALL);
        // (A part that is no constant decides only against the same part.)
        let unknown = (0..n).any(|k| {
            let (a, b) = (dim(&t, k), dim(&o, k));
            a != b && (symbolic(a) || symbolic(b))
        });
        if unknown {
            return;
        }
        let overlap = (0..n).all(|k| {
            let ((a_lo, a_hi), (b_lo, b_hi)) = (dim(&t, k), dim(&o, k));
            a_lo.max(b_lo) < a_hi.min(b_hi)
        });
        let same = !o.moved && !t.moved && (0..n).all(|k| dim(&t, k) == dim(&o, k));
        // (On an accelerator the elements are written in parallel, in no order.)
        let in_order = self.prog.cpu_only() && reads_ahead(&t, &o);
        if overlap && !same && !in_order {
            self.report(Event::SelfOverlap {
                write,
                operand: c.span(operand),
            });
        }
    }

    /// The elements `e` selects of its base: a name or attribute, a subscript of one with
    /// constant indices, or a transpose of one.
    fn region(&self, c: Code<'_>, e: ExprId) -> Option<Region> {
        let place = |e: ExprId| match *c.expr(e) {
            Expr::Name { .. } => true,
            Expr::Attr { value, .. } => matches!(*c.expr(value), Expr::Name { .. }),
            _ => false,
        };
        let whole = |base: ExprId, moved: bool| Region {
            base: c.span(base),
            dims: Vec::new(),
            from_last: false,
            moved,
            dropped: 0,
        };
        match *c.expr(e) {
            // `a.T`, `a.mT` (`a.weight` is a place of its own).
            Expr::Attr { value, attr, .. }
                if place(value) && matches!(self.name(attr), "T" | "mT") =>
            {
                Some(whole(value, true))
            }
            _ if place(e) => Some(whole(e, false)),
            Expr::Call { func, .. } => match *c.expr(func) {
                Expr::Attr { value, attr, .. }
                    if place(value)
                        && matches!(
                            self.name(attr),
                            "t" | "transpose" | "permute" | "swapaxes"
                        ) =>
                {
                    Some(whole(value, true))
                }
                _ => None,
            },
            Expr::Subscript { value, sub } if place(value) => {
                let parts = c.body.list(c.body.subscripts[sub as usize].parts);
                let mut dims = Vec::new();
                let mut from_last = false;
                let mut dropped = 0u64;
                for (k, p) in parts.iter().enumerate() {
                    match *c.expr(ExprId(*p)) {
                        Expr::Ellipsis if k == 0 => from_last = true,
                        // (A trailing `...`, `x[1:, ...]`: the dimensions after are whole.)
                        Expr::Ellipsis if k + 1 == parts.len() => {}
                        Expr::Int(i) => {
                            dropped |= 1u64.checked_shl(dims.len() as u32).unwrap_or(0);
                            dims.push((
                                bound(i),
                                if i == -1 {
                                    (true, 0)
                                } else {
                                    bound(i.saturating_add(1))
                                },
                            ))
                        }
                        Expr::Slice { lo, hi } => {
                            let lo = if lo == Expr::NO_BOUND {
                                (false, 0)
                            } else {
                                bound(lo.into())
                            };
                            let hi = if hi == Expr::NO_BOUND {
                                (true, 0)
                            } else {
                                bound(hi.into())
                            };
                            dims.push((lo, hi));
                        }
                        // A slice that is no constant (`:fold`), or a name holding a Python
                        // integer (`x[i, 1:]` in a loop over rows): the same elements as a part
                        // of the same text, and nothing known otherwise. (Not another index: a
                        // mask or index tensor gathers a copy, `h[done, 1:]`.)
                        ref part => {
                            let text = self.prog.text_of(c.span(ExprId(*p)));
                            let integer = match *part {
                                Expr::Name { name, .. } => self.holds_integer(name),
                                _ => false,
                            };
                            if integer {
                                dropped |= 1u64.checked_shl(dims.len() as u32).unwrap_or(0);
                            }
                            if !integer && (!text.contains(':') || text.contains('[')) {
                                return None;
                            }
                            let key = text.bytes().filter(|b| !b.is_ascii_whitespace());
                            let h = key.fold(0i64, |h, b| (h * 31 + b as i64) % (1 << 30));
                            dims.push(((false, SYMBOLIC + 2 * h), (false, SYMBOLIC + 2 * h + 1)));
                        }
                    }
                }
                if from_last {
                    dims.reverse();
                    // (Counted from the last dimension: which are dropped is kept as "some".)
                    dropped = u64::from(dropped != 0);
                }
                Some(Region {
                    base: c.span(value),
                    dims,
                    from_last,
                    moved: false,
                    dropped,
                })
            }
            _ => None,
        }
    }
}

impl Interp<'_, '_> {
    /// Whether `name` holds values known to be no tensor (a loop's position over `range`, a
    /// count): as an index, a number.
    fn holds_integer(&self, name: Name) -> bool {
        (self.state.env.get(&name)).is_some_and(|vs| {
            !vs.is_empty() && vs.iter().all(|v| matches!(self.obj(*v), Obj::Other))
        })
    }
}

/// Whether every element `operand` reads is read before the write reaches it, in memory order
/// (see the module's documentation): the two differ in one dimension, not the first, where the
/// operand lies further on (both bounds later), or is the last position alone while the target
/// runs to the end.
fn reads_ahead(target: &Region, operand: &Region) -> bool {
    // (Both drop the same dimensions, the same integer index: `x[i, :, :-1] -= x[i, :, 1:]`
    // shifts along the second dimension of the view `x[i]`. Counted from the last, any dropped
    // dimension decides nothing.)
    if target.moved || operand.moved || target.dropped != operand.dropped {
        return false;
    }
    if target.dropped != 0 && (target.from_last || operand.from_last) {
        return false;
    }
    // (A whole name, `p /= p[..., -1:]`, counts from either end.)
    let whole = target.dims.is_empty() || operand.dims.is_empty();
    if target.from_last != operand.from_last && !whole {
        return false;
    }
    let from_last = target.from_last || operand.from_last;
    let n = target.dims.len().max(operand.dims.len());
    let dim = |r: &Region, k: usize| r.dims.get(k).copied().unwrap_or(ALL);
    let mut differ = (0..n).filter(|k| dim(target, *k) != dim(operand, *k));
    let (Some(k), None) = (differ.next(), differ.next()) else {
        return false;
    };
    // (Counted from the first dimension, the first one kept is contiguous; counted from the
    // last, the dimension is not the first unless the tensor has no others.)
    let kept_before = (0..k).any(|j| j >= 64 || target.dropped & (1 << j) == 0);
    if !from_last && !kept_before {
        return false;
    }
    let ((t_lo, t_hi), (o_lo, o_hi)) = (dim(target, k), dim(operand, k));
    let shifted = o_lo > t_lo && o_hi > t_hi && o_lo.0 == t_lo.0 && o_hi.0 == t_hi.0;
    let last = (o_lo, o_hi) == ((true, -1), (true, 0)) && t_hi == (true, 0);
    shifted || last
}
