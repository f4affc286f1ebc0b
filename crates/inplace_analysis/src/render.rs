//! From events to findings: which rule claims each event, one finding per rule and range
//! (and one form ③ finding per write, the most specific), `# noqa`, and only then the
//! rendering of messages, related locations and fixes.

use crate::domain::OpLabel;
use crate::events::{Event, Write, WriteId};
use crate::exec::UnitOutput;
use crate::finding::{Finding, TextRange};
use crate::ir::{Body, Import, Interner, ItemId, Name, Span};
use crate::line_index::LineIndex;
use crate::noqa::NoqaMap;
use crate::notebook::CellLines;
use crate::program::Program;
use crate::registry::{Form, Rule};
use crate::rules;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// What rendering needs of the file and of the unit an event came from.
pub(crate) struct RenderCtx<'a> {
    pub prog: &'a Program<'a>,
    pub names: &'a Interner,
    pub lines: &'a LineIndex,
    pub unit: &'a UnitOutput,
    pub torch: Option<&'a str>,
    /// The file's top-level imports (found once per rendering).
    pub imports: &'a [Import],
    pub cells: Option<&'a CellLines>,
    /// What the fixes look up of a scope's assignments, built once per scope per rendering.
    pub assigned: &'a crate::fix::AssignmentCache,
}

impl<'a> RenderCtx<'a> {
    pub fn range(&self, s: Span) -> Option<TextRange> {
        self.prog.range(s)
    }

    pub fn text(&self, s: Span) -> &'a str {
        self.prog.text_of(s)
    }

    pub fn slice(&self, r: TextRange) -> &'a str {
        self.prog.text.get(r.start..r.end).unwrap_or("")
    }

    pub fn text_all(&self) -> &'a str {
        self.prog.text
    }

    pub fn name(&self, n: Name) -> &'a str {
        self.names.resolve(n)
    }

    pub fn body(&self, item: ItemId) -> Option<Arc<Body>> {
        self.prog.lowered_body(item)
    }

    /// Whether two items are one scope: the same function, or statements of the module's own
    /// code (each its own item).
    pub fn same_scope(&self, a: ItemId, b: ItemId) -> bool {
        let top = |i| self.body(i).is_some_and(|body| body.root_def().is_none());
        a == b || (top(a) && top(b))
    }

    pub fn torch_alias(&self) -> Option<&'a str> {
        self.torch
    }

    /// `place` (`torch`, `F`, `torch.nn.functional`) starts with a name bound by an import at
    /// the file's top level: a module, not a tensor a fix could copy.
    pub fn is_imported_module(&self, place: &str) -> bool {
        let name = place.split('.').next().unwrap_or(place).trim();
        self.imports
            .iter()
            .any(|i| self.names.resolve(i.bind) == name)
    }

    /// Where a span starts, as a message names it: `line 9`, or `cell 3, line 2` in a notebook.
    pub fn line(&self, s: Span) -> String {
        let start = self.range(s).map_or(0, |r| r.start);
        let line = self.lines.line_of(start);
        if start > self.prog.entry_end() {
            let seg = &self.prog.segments[self.prog.segment_at(start)];
            return format!("{}, line {}", seg.label, line - seg.first_line + 1);
        }
        match self.cells {
            Some(cells) => cells.label(line),
            None => format!("line {}", line + 1),
        }
    }

    /// The source of a span when it is one short line (an op named as written).
    fn short_text(&self, s: Span) -> Option<String> {
        let text = self.text(s);
        (!text.is_empty() && text.len() <= 48 && !text.contains('\n')).then(|| text.to_string())
    }

    /// The source of a span as it reads in a message: one line, at most 60 characters.
    pub fn snippet(&self, s: Span) -> String {
        let one: String = self
            .text(s)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if one.chars().count() > 60 {
            one.chars().take(57).collect::<String>() + "..."
        } else {
            one
        }
    }

    pub fn write(&self, w: WriteId) -> &'a Write {
        &self.unit.writes[w as usize]
    }

    /// How an op reads in a message (`torch.sigmoid`, `nn.Sigmoid()`, `*`).
    pub fn op(&self, op: OpLabel) -> String {
        match op {
            OpLabel::Torch(n) => format!("torch.{}", self.name(n)),
            OpLabel::Functional(n) => format!("F.{}", self.name(n)),
            OpLabel::Method(n) => format!(".{}()", self.name(n)),
            OpLabel::Operator(o) => match o {
                crate::ir::BinOp::Add => "+",
                crate::ir::BinOp::Sub => "-",
                crate::ir::BinOp::Mul => "*",
                crate::ir::BinOp::Div => "/",
                crate::ir::BinOp::MatMul => "@",
                crate::ir::BinOp::Pow => "**",
                crate::ir::BinOp::FloorDiv => "//",
                crate::ir::BinOp::Mod => "%",
                crate::ir::BinOp::Other => "?",
            }
            .to_string(),
            OpLabel::Inplace(n) => format!("{}_", self.name(n)),
            OpLabel::Function(n) => format!("{}.apply", self.name(n)),
            OpLabel::Module { origin, class } => self
                .short_text(origin)
                .unwrap_or_else(|| format!("nn.{}", self.name(class))),
            OpLabel::Indexing(at) => self.short_text(at).unwrap_or_else(|| "indexing".into()),
            OpLabel::Static(s) => s.to_string(),
        }
    }
}

/// The local name of the `torch` module (`th` after `import torch as th`), from the module's
/// imports.
fn torch_alias(imports: &[Import], names: &Interner) -> Option<String> {
    let imp = imports.iter().find(|i| names.resolve(i.path) == "torch")?;
    Some(names.resolve(imp.bind).to_string())
}

/// The imports at the top level of the analysed file (in its blocks too), in order.
fn module_imports(prog: &Program<'_>) -> Vec<Import> {
    prog.items[prog.entry_items()]
        .iter()
        .filter(|item| item.parent().is_none())
        .filter_map(|item| prog.lowered_body(item.id))
        .flat_map(|body| body.all_imports())
        .collect()
}

/// Whether any call of the units passes a value that may require grad, by parameter. A
/// parameter given what another function was given (`forward(x)` passing `x` on) gets grad
/// where that one does, and may get it when no call of that one is seen.
fn passed_grad(units: &[&UnitOutput]) -> FxHashMap<Span, bool> {
    let mut all: FxHashMap<Span, bool> = FxHashMap::default();
    for (at, maybe) in units.iter().flat_map(|u| &u.passed_grad) {
        *all.entry(*at).or_default() |= *maybe;
    }
    // (Each pair once: every call records its own.)
    let mut through: Vec<(Span, Span)> = units
        .iter()
        .flat_map(|u| &u.passed_through)
        .copied()
        .collect();
    through.sort_unstable();
    through.dedup();
    // (Chains of such calls: each round takes one more link, until none changes.)
    for _ in 0..=through.len() {
        let mut changed = false;
        for (at, from) in &through {
            let maybe = all.get(from).copied().unwrap_or(true);
            let e = all.entry(*at).or_default();
            if maybe && !*e {
                *e = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    all
}

/// Findings of a file from the outputs of its units, in order.
pub(crate) fn findings(
    prog: &Program<'_>,
    names: &Interner,
    units: &[&UnitOutput],
    cells: Option<&CellLines>,
) -> Vec<Finding> {
    // Which rule claims each event, at which range; the first event per (rule, range) wins.
    // An event inside an imported module is the file's when a call of the file led to it: it
    // is reported there.
    let mut chosen: Vec<(Rule, TextRange, usize, &Event)> = Vec::new();
    let mut seen: FxHashMap<(Rule, TextRange), ()> = FxHashMap::default();
    let passed_grad = passed_grad(units);
    for (u, unit) in units.iter().enumerate() {
        for ev in &unit.events {
            let Some((rule, span)) = rules::classify(ev, unit) else {
                continue;
            };
            // A save that rests on an argument requiring grad, where every call of the file
            // passes one that does not: the callers are analysed with what they pass.
            if let Some((_, save, _)) = rules::clobber_any(ev, unit) {
                if save
                    .assumes
                    .is_some_and(|g| passed_grad.get(&g.at) == Some(&false))
                {
                    continue;
                }
            }
            let Some(mut range) = prog.range(span) else {
                continue;
            };
            if range.start > prog.entry_end() {
                match anchor(prog, unit, ev) {
                    Some(a) => range = a,
                    None => continue,
                }
            }
            if seen.insert((rule, range), ()).is_none() {
                chosen.push((rule, range, u, ev));
            }
        }
    }
    // One form ③ finding per write: the most specific rule.
    let mut best: FxHashMap<TextRange, (u8, Rule)> = FxHashMap::default();
    for (rule, range, ..) in &chosen {
        if let Some(rank) = rules::form3_rank(*rule) {
            let e = best.entry(*range).or_insert((rank, *rule));
            if rank < e.0 {
                *e = (rank, *rule);
            }
        }
    }
    chosen.retain(|(rule, range, ..)| {
        rules::form3_rank(*rule).is_none() || best.get(range).map(|b| b.1) == Some(*rule)
    });
    // One finding per write: a write that raises (forms ① ② ③) is not also reported for the
    // aliases it changes (IP402): the runtime error comes first.
    let raises: Vec<TextRange> = chosen
        .iter()
        .filter(|(rule, ..)| {
            matches!(
                rule.form(),
                Form::Leaf | Form::LeafView | Form::OutArg | Form::RefusedView | Form::Saved
            )
        })
        .map(|(_, range, ..)| *range)
        .collect();
    chosen.retain(|(rule, range, ..)| *rule != Rule::ClobberedAlias || !raises.contains(range));
    // A write into a refused view raises at once: no backward after it reads what it clobbers.
    let refused: Vec<TextRange> = chosen
        .iter()
        .filter(|(rule, ..)| rule.form() == Form::RefusedView)
        .map(|(_, range, ..)| *range)
        .collect();
    chosen.retain(|(rule, range, ..)| rule.form() != Form::Saved || !refused.contains(range));
    // Nor does a write that raises at once (into a leaf, a view of one; an `out=` that requires
    // grad) also clobber a save: not the very write, nor the same text seen by another unit.
    // (The same text called on another tensor by the same unit may: a helper's `t.mul_(s)`
    // given a sigmoid's output first, a leaf later.)
    let raising: Vec<(usize, TextRange, Option<WriteId>)> = (chosen.iter())
        .filter(|(rule, ..)| matches!(rule.form(), Form::Leaf | Form::LeafView | Form::OutArg))
        .map(|(_, range, u, ev)| (*u, *range, event_write(ev)))
        .collect();
    chosen.retain(|(rule, range, u, ev)| {
        if rule.form() != Form::Saved {
            return true;
        }
        let w = event_write(ev);
        let here = |x: &&(usize, TextRange, Option<WriteId>)| x.1 == *range;
        let same_unit = raising.iter().filter(here).any(|x| x.0 == *u);
        let same_write = raising.iter().filter(here).any(|x| x.0 == *u && x.2 == w);
        !same_write && (same_unit || !raising.iter().any(|x| here(&x)))
    });
    // One finding per chain of writes: `y.mul_(a).add_(b)` is reported at `y.mul_(a)`, the
    // write its fix (a copy of `y`) covers along with the rest of the chain.
    let starts: Vec<(Rule, TextRange)> = chosen.iter().map(|(r, range, ..)| (*r, *range)).collect();
    chosen.retain(|(rule, range, ..)| {
        !starts
            .iter()
            .any(|(r, inner)| r == rule && inner.start == range.start && inner.end < range.end)
    });
    // A `.data` write a backward reads (IP401) is not also the opt-in note on `.data` (IP410).
    let bypasses: Vec<TextRange> = chosen
        .iter()
        .filter(|(rule, ..)| *rule == Rule::DataBypass)
        .map(|(_, range, ..)| *range)
        .collect();
    // Nor is a `.data` read whose save such a write changed (its `.detach()` would raise).
    let saved_reads: Vec<TextRange> = (chosen.iter())
        .filter(|(rule, ..)| *rule == Rule::DataBypass)
        .filter_map(|(_, _, u, ev)| {
            let (w, save, _) = rules::clobber_any(ev, units[*u])?;
            save.through_data
                .filter(|_| rules::silent_through_data(w, save))
        })
        .filter_map(|span| prog.range(span))
        .collect();
    // Nor also IP402 for the names that read the values: the gradient is the harm named. And
    // a `.data` write IP402 reports (a name reads what it changed) is not also the note.
    chosen.retain(|(rule, range, ..)| *rule != Rule::ClobberedAlias || !bypasses.contains(range));
    // The note on `.data` is never a second finding of a write another rule reports (IP401,
    // IP402: a name reads what it changed; IP302: a save through that very alias).
    let reported: Vec<TextRange> = (chosen.iter())
        .filter(|(rule, ..)| *rule != Rule::DataAccess)
        .map(|(_, range, ..)| *range)
        .chain(saved_reads)
        .collect();
    chosen.retain(|(rule, range, ..)| *rule != Rule::DataAccess || !reported.contains(range));
    if chosen.is_empty() {
        return Vec::new();
    }
    let lines = &LineIndex::new(prog.text);
    let noqa = NoqaMap::from_comments(prog.text, &prog.noqa_comments, lines);
    chosen.retain(|(rule, range, ..)| !noqa.suppresses(lines.line_of(range.start), *rule));
    let imports = &module_imports(prog);
    let torch = torch_alias(imports, names);
    let assigned = &crate::fix::AssignmentCache::default();
    let mut out: Vec<Finding> = chosen
        .into_iter()
        .filter_map(|(rule, range, u, ev)| {
            let ctx = RenderCtx {
                prog,
                names,
                lines,
                unit: units[u],
                torch: torch.as_deref(),
                imports,
                cells,
                assigned,
            };
            let mut f = rules::render(rule, &ctx, ev)?;
            if prog.segments.len() > 1 {
                keep_in_file(&ctx, &mut f, range);
            }
            Some(f)
        })
        .collect();
    out.sort_by_key(|f| (f.range, f.rule));
    out
}

/// The write an event of a raising form or of form ③ is about.
fn event_write(ev: &Event) -> Option<WriteId> {
    match ev {
        Event::LeafWrite { write, .. }
        | Event::OutArgRefused { write, .. }
        | Event::Clobber { write, .. } => Some(*write),
        _ => None,
    }
}

/// Where a call of the file led to an event inside an imported module: the outermost call of
/// its write.
fn anchor(prog: &Program<'_>, unit: &UnitOutput, ev: &Event) -> Option<TextRange> {
    let write = match ev {
        Event::LeafWrite { write, .. }
        | Event::OutArgRefused { write, .. }
        | Event::RefusedViewWrite { write, .. }
        | Event::RefusedViewRead { write, .. }
        | Event::Clobber { write, .. }
        | Event::DataWrite { write, .. }
        | Event::StaleRead { write, .. } => rules::write_of(unit, *write)?.call_site,
        Event::Rebind { call_site, .. } => *call_site,
        _ => return None,
    };
    let call = prog.range(write?)?;
    (call.end <= prog.entry_end()).then_some(call)
}

/// A finding of the file whose rendering reaches into imported modules: at `range` (its call
/// in the file, when what it reports lies in a module, which becomes related information),
/// with related locations in modules naming their file, and no fix that would edit a module.
fn keep_in_file(ctx: &RenderCtx<'_>, f: &mut Finding, range: TextRange) {
    let prog = ctx.prog;
    let entry_end = prog.entry_end();
    if f.range != range {
        let inside = f.range;
        f.related.retain(|r| r.range != range);
        f.related.insert(
            0,
            crate::finding::Related {
                source: None,
                range: inside,
                message: format!(
                    "the in-place write, inside the called code: `{}`",
                    ctx.slice(inside).lines().next().unwrap_or("").trim()
                ),
            },
        );
        f.range = range;
    }
    for r in &mut f.related {
        if r.source.is_none() && r.range.start > entry_end {
            let seg = &prog.segments[prog.segment_at(r.range.start)];
            let base = seg.start as usize;
            r.range = TextRange::new(r.range.start - base, r.range.end.saturating_sub(base));
            r.source = Some(seg.origin.clone());
        }
    }
    let edits_outside = f.fix.as_ref().is_some_and(|fix| {
        fix.edits
            .iter()
            .any(|e| e.range.end > entry_end || e.range.start > entry_end)
    });
    if edits_outside {
        f.fix = None;
    }
}
