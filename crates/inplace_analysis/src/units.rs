//! Which scopes are analysed: only what can matter.
//!
//! A finding needs an in-place write, a `.data`, an optimizer, a `.grad` update, `inplace=`,
//! `out=` or anomaly mode somewhere in the code the analysis runs (the *seeds* of
//! [`crate::syntax::outline::Seeds`], or a `True` given to a name another item binds to an
//! activation: `Act(True)` after `from torch.nn import ReLU as Act`). An item is *relevant*
//! when its own tokens hold a seed, or
//! when it uses a relevant function or class, a global that a relevant statement binds (names
//! resolve in the module that uses them; an item that imports from the program's modules, or
//! one of a module with such a `*` import, may name any module's), a relevant function of an
//! imported module as an attribute (`utils.f`), a relevant method name on any receiver (an
//! instance reaches code through module state that binds no name: `BLOCKS.append(Block())`),
//! or (a method) a relevant method of its class through `self` or `super()`, or when its
//! class's `__init__` is relevant in a way that outlives the constructor's run (see
//! [`CARRIED`]) or a statement of its class body is relevant. The decision is a
//! fixpoint over the items, sound by construction: an item that is not relevant cannot reach a
//! seed, so analysing it could not find anything. Only relevant functions are analysed on their
//! own; the module body runs when anything is relevant (it makes the globals).

use crate::exec::{Frozen, Interp, UnitOutput};
use crate::ir::{DefLoc, FuncId, Interner, ItemId};
use crate::program::Program;
use crate::syntax::outline::{name_hash, ItemKind, Seeds};
use rustc_hash::{FxHashMap, FxHashSet};

/// The units of a file, in the order they run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Whether the module body runs (anything at all is relevant).
    pub module: bool,
    /// Functions analysed on their own, in source order.
    pub functions: Vec<DefLoc>,
    /// Classes whose methods are among them (their instances are built once).
    pub classes: Vec<ItemId>,
}

/// The classes of a program: their methods by name and their bases among its classes (by
/// name, in any of its modules).
struct Classes {
    /// Method items of each class item, by name hash.
    methods: FxHashMap<usize, FxHashMap<u64, Vec<usize>>>,
    /// Base classes of each class item (classes of the program named in its header).
    bases: FxHashMap<usize, Vec<usize>>,
}

impl Classes {
    fn of(prog: &Program<'_>) -> Classes {
        let items = &prog.items;
        let name_of = |i: usize| {
            items[i]
                .outline
                .name
                .map(|(s, e)| name_hash(&prog.text[s as usize..e as usize]))
        };
        let mut by_name: FxHashMap<u64, Vec<usize>> = FxHashMap::default();
        let mut methods: FxHashMap<usize, FxHashMap<u64, Vec<usize>>> = FxHashMap::default();
        for (i, it) in items.iter().enumerate() {
            match (it.kind(), name_of(i)) {
                (ItemKind::Class, Some(h)) => by_name.entry(h).or_default().push(i),
                (ItemKind::Function, Some(h)) => {
                    if let Some(p) = it.parent() {
                        let m = methods.entry(p as usize).or_default();
                        m.entry(h).or_default().push(i);
                    }
                }
                _ => {}
            }
        }
        let mut bases = FxHashMap::default();
        for (i, it) in items.iter().enumerate() {
            if it.kind() == ItemKind::Class {
                // (`class Child(layers.Base)`: a base named as a module attribute too.)
                let sm = &it.outline.summary;
                let b: Vec<usize> = (sm.names.iter().chain(&sm.attrs))
                    .filter_map(|h| by_name.get(h))
                    .flatten()
                    .copied()
                    .filter(|b| *b != i)
                    .collect();
                bases.insert(i, b);
            }
        }
        Classes { methods, bases }
    }

    /// The class and its bases of the file, transitively.
    fn hierarchy(&self, class: usize) -> Vec<usize> {
        let mut out = vec![class];
        let mut k = 0;
        while k < out.len() && out.len() < 64 {
            for b in self.bases.get(&out[k]).into_iter().flatten() {
                if !out.contains(b) {
                    out.push(*b);
                }
            }
            k += 1;
        }
        out
    }

    /// Whether a class of `classes` has a relevant method named `h`.
    fn has_relevant(&self, classes: &[usize], h: u64, rel: &[bool]) -> bool {
        self.has_method(classes, h, |m| rel[m])
    }

    /// Whether a class of `classes` has a method named `h` for which `pred` holds.
    fn has_method(&self, classes: &[usize], h: u64, pred: impl Fn(usize) -> bool) -> bool {
        classes.iter().any(|k| {
            self.methods
                .get(k)
                .and_then(|m| m.get(&h))
                .is_some_and(|ms| ms.iter().any(|m| pred(*m)))
        })
    }
}

/// The last relevance decision of a file and what it was decided from (an edit that changes
/// no item's summary, kind, name, place, bound names, module or imports decides the same).
#[derive(Debug, Default, Clone)]
pub(crate) struct RelevanceMemo {
    key: u64,
    rel: Vec<bool>,
}

/// Names each top-level statement binds, from its lowered body (statements are small).
fn statement_binds(prog: &Program<'_>, names: &mut Interner, prelower: bool) -> Vec<Vec<u64>> {
    let items = &prog.items;
    let binding = |it: &crate::program::Item| {
        it.kind() == ItemKind::Statement
            && it.parent().is_none()
            && !it.outline.summary.names.is_empty()
    };
    if prelower {
        let ids: Vec<ItemId> = items.iter().filter(|i| binding(i)).map(|i| i.id).collect();
        prog.prelower(&ids, names);
    }
    let mut binds: Vec<Vec<u64>> = vec![Vec::new(); items.len()];
    for (i, it) in items.iter().enumerate() {
        if binding(it) {
            if let Some(body) = prog.body(it.id, names) {
                binds[i] = bound_names(&body, names);
            }
        }
    }
    binds
}

/// The items that may import a name from a module of the program (by position): a top-level
/// statement that imports from a relative path or from a path whose first part is that of an
/// imported module (`import torch` imports nothing the program holds), and any other item
/// that imports (a function's imports are not parsed to decide this).
fn project_importers(prog: &Program<'_>, names: &mut Interner) -> Vec<bool> {
    let root = |path: &str| name_hash(path.split('.').next().unwrap_or(""));
    let roots: FxHashSet<u64> = (prog.segments.iter().skip(1))
        .map(|s| root(names.resolve(s.name)))
        .collect();
    (prog.items.iter())
        .map(|it| {
            if !it.outline.summary.imports || roots.is_empty() {
                return false;
            }
            if it.kind() != ItemKind::Statement || it.parent().is_some() {
                return true;
            }
            // (Lowered already, here or by another file's analysis, by [`statement_binds`]:
            // an import binds a name.)
            let Some(body) = prog.body(it.id, names) else {
                return true;
            };
            body.imports_within(false).iter().any(|i| {
                let path = names.resolve(i.full);
                path.starts_with('.') || roots.contains(&root(path))
            })
        })
        .collect()
}

/// Everything [`relevant_from`] reads.
fn relevance_key(prog: &Program<'_>, binds: &[Vec<u64>], importers: &[bool]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    importers.hash(&mut h);
    for seg in &prog.segments {
        seg.items.hash(&mut h);
    }
    for (it, b) in prog.items.iter().zip(binds) {
        let name = it
            .outline
            .name
            .map(|(s, e)| &prog.text[s as usize..e as usize]);
        (
            it.kind(),
            it.parent(),
            name,
            &it.outline.summary,
            &it.children,
            b,
        )
            .hash(&mut h);
    }
    h.finish()
}

/// Which items are relevant, by position, reusing `memo` when nothing it reads changed.
fn relevant_memo(
    prog: &Program<'_>,
    names: &mut Interner,
    memo: &mut RelevanceMemo,
    prelower: bool,
) -> Vec<bool> {
    let seeded = seeded(prog);
    if !seeded.iter().any(|s| *s) {
        return seeded;
    }
    let binds = statement_binds(prog, names, prelower);
    let importers = project_importers(prog, names);
    let key = relevance_key(prog, &binds, &importers);
    if key != memo.key || memo.rel.len() != prog.items.len() {
        *memo = RelevanceMemo {
            key,
            rel: relevant_from(prog, &binds, &importers, seeded),
        };
    }
    memo.rel.clone()
}

/// The items whose own tokens hold a seed: one of [`crate::syntax::outline::Seeds`], or a
/// `True` given to a name another item binds to an activation (`Act(True)` after
/// `from torch.nn import ReLU as Act`).
fn seeded(prog: &Program<'_>) -> Vec<bool> {
    let aliases: FxHashSet<u64> = (prog.items.iter())
        .flat_map(|i| i.outline.summary.activation_aliases.iter().copied())
        .collect();
    (prog.items.iter())
        .map(|i| {
            let s = &i.outline.summary;
            s.seeds.any() || (s.has_true && s.names.iter().any(|h| aliases.contains(h)))
        })
        .collect()
}

/// Seeds whose effect outlives the call that runs them: an in-place activation built (`inplace=`,
/// `Act(True)`), an optimizer built or stepped, an attribute replaced by name. A constructor
/// whose only seeds are others (a write, `.data`, `.grad`, `out=`, anomaly mode) finds what it
/// finds while it runs (the state it leaves for the other methods keeps no record of its
/// writes); the other methods of its class are not relevant because of it, unless it stores
/// code that runs later (a `lambda`, a nested `def`) or uses a relevant item, or the program
/// mentions a backward pass at all (kept where one is, to stay on the safe side).
const CARRIED: u16 = Seeds::INPLACE_ARG | Seeds::OPTIM | Seeds::STEP | Seeds::SETATTR;

/// What the relevant items bind, in one pass of [`relevant_from`].
struct Bound {
    /// Relevant names bound at module level, by module (segment).
    names_in: FxHashSet<(u32, u64)>,
    /// The module binding each relevant name (`MANY` when several do).
    bound_by: FxHashMap<u64, u32>,
    /// The names of relevant methods.
    methods_rel: FxHashSet<u64>,
    /// Classes with a relevant statement in their body (a class attribute holding what
    /// writes later: `helper = Block()`).
    class_state: FxHashSet<usize>,
}

impl Bound {
    fn of(prog: &Program<'_>, binds: &[Vec<u64>], segment: &[u32], rel: &[bool]) -> Bound {
        const MANY: u32 = u32::MAX;
        let mut names_in: FxHashSet<(u32, u64)> = FxHashSet::default();
        let mut bound_by: FxHashMap<u64, u32> = FxHashMap::default();
        let mut methods_rel: FxHashSet<u64> = FxHashSet::default();
        let mut class_state: FxHashSet<usize> = FxHashSet::default();
        for (i, it) in prog.items.iter().enumerate() {
            if !rel[i] {
                continue;
            }
            let name = it
                .outline
                .name
                .map(|(s, e)| name_hash(&prog.text[s as usize..e as usize]));
            let bound: &[u64] = match (it.kind(), it.parent(), &name) {
                (ItemKind::Function | ItemKind::Class, None, Some(h)) => std::slice::from_ref(h),
                (ItemKind::Function, Some(_), Some(h)) => {
                    methods_rel.insert(*h);
                    &[]
                }
                (ItemKind::Statement, None, _) => &binds[i],
                (ItemKind::Statement, Some(class), _) => {
                    class_state.insert(class as usize);
                    &[]
                }
                _ => &[],
            };
            for h in bound {
                names_in.insert((segment[i], *h));
                bound_by
                    .entry(*h)
                    .and_modify(|s| {
                        if *s != segment[i] {
                            *s = MANY
                        }
                    })
                    .or_insert(segment[i]);
            }
        }
        Bound {
            names_in,
            bound_by,
            methods_rel,
            class_state,
        }
    }
}

/// Which items are relevant, by position, from those `seeded`.
fn relevant_from(
    prog: &Program<'_>,
    binds: &[Vec<u64>],
    importers: &[bool],
    seeded: Vec<bool>,
) -> Vec<bool> {
    let items = &prog.items;
    let mut rel = seeded;
    if !rel.iter().any(|r| *r) {
        return rel;
    }
    let classes = Classes::of(prog);
    let (init, forward, call) = (
        name_hash("__init__"),
        name_hash("forward"),
        name_hash("__call__"),
    );
    // (See [`CARRIED`]: where the program mentions `backward` or `grad`, every relevant
    // constructor carries.)
    let backward = [name_hash("backward"), name_hash("grad")];
    let any_backward = items.iter().any(|it| {
        let s = &it.outline.summary;
        backward.iter().any(|h| s.uses_name(*h) || s.uses_attr(*h))
    });
    let aliases: FxHashSet<u64> = (items.iter())
        .flat_map(|i| i.outline.summary.activation_aliases.iter().copied())
        .collect();
    // The methods named `__init__`.
    let constructors: Vec<usize> = (items.iter().enumerate())
        .filter(|(_, it)| it.kind() == ItemKind::Function && it.parent().is_some())
        .filter(|(_, it)| {
            let name = it
                .outline
                .name
                .map(|(s, e)| &prog.text[s as usize..e as usize]);
            name == Some("__init__")
        })
        .map(|(k, _)| k)
        .collect();
    let carries_seed = |i: usize| {
        let s = &items[i].outline.summary;
        any_backward
            || s.nested_code
            || s.seeds.0 & CARRIED != 0
            || (s.has_true && s.names.iter().any(|h| aliases.contains(h)))
    };
    // A name resolves in the module (segment) that uses it; an item that imports from the
    // program's modules, or one of a module with a `*` import of one, may name what another
    // module binds.
    let segment: Vec<u32> = (0..items.len())
        .map(|i| prog.segment_of_position(i) as u32)
        .collect();
    let star: FxHashSet<u32> = (0..items.len())
        .filter(|&i| items[i].outline.summary.star_import && importers[i])
        .map(|i| segment[i])
        .collect();
    let any_module = |i: usize| importers[i] || star.contains(&segment[i]);
    loop {
        let Bound {
            names_in,
            bound_by,
            methods_rel,
            class_state,
        } = Bound::of(prog, binds, &segment, &rel);
        // Whether item `i` uses a relevant item (the init rule aside).
        let reaches = |i: usize, rel: &[bool]| {
            let it = &items[i];
            let s = &it.outline.summary;
            let uses_name = |h: &u64| match any_module(i) {
                true => bound_by.contains_key(h),
                false => names_in.contains(&(segment[i], *h)),
            };
            // `m.f` of an imported module `m` binding a relevant `f`; `x.m()` of any relevant
            // method name: an instance of the file's classes reaches an item through module
            // state that binds no name (`BLOCKS.append(Block())`, a registry a decorator
            // fills, a `global`), which the names above do not follow.
            let module_attr = |h: &u64| bound_by.get(h).is_some_and(|s| *s != segment[i]);
            let r = s.names.iter().any(uses_name)
                || s.attrs
                    .iter()
                    .any(|h| module_attr(h) || methods_rel.contains(h));
            r || match (it.kind(), it.parent()) {
                (ItemKind::Function, Some(class)) => {
                    // A method: `self.m` and `super().m` resolve in its class and bases.
                    let hier = classes.hierarchy(class as usize);
                    hier.iter().any(|k| class_state.contains(k))
                        || s.self_attrs
                            .iter()
                            .any(|h| classes.has_relevant(&hier, *h, rel))
                        || s.super_attrs
                            .iter()
                            .any(|h| classes.has_relevant(&hier[1..], *h, rel))
                        || (s.calls_self
                            && (classes.has_relevant(&hier, forward, rel)
                                || classes.has_relevant(&hier, call, rel)))
                }
                (ItemKind::Class, _) => it.children.iter().any(|c| rel[*c as usize]),
                _ => {
                    // `self.m` outside a method: any method of that name.
                    s.self_attrs.iter().any(|h| methods_rel.contains(h))
                        || s.super_attrs.iter().any(|h| methods_rel.contains(h))
                }
            }
        };
        // The relevant constructors whose effect reaches the other methods: one with a seed
        // that outlives it, or one that uses a relevant item (a block it builds, a function it
        // stores). Decided once per pass.
        let carrying: FxHashSet<usize> = (constructors.iter().copied())
            .filter(|&k| rel[k] && (carries_seed(k) || reaches(k, &rel)))
            .collect();
        let mut changed = false;
        for (i, it) in items.iter().enumerate() {
            if rel[i] {
                continue;
            }
            let mut r = reaches(i, &rel);
            if let (false, ItemKind::Function, Some(class)) = (r, it.kind(), it.parent()) {
                // Its instance is built by a constructor of its class or bases.
                let hier = classes.hierarchy(class as usize);
                r = classes.has_method(&hier, init, |k| carrying.contains(&k));
            }
            if r {
                rel[i] = true;
                changed = true;
            }
        }
        if !changed {
            return rel;
        }
    }
}

/// Names a statement binds at its own level (assignments, imports, loops, `with`, definitions),
/// as hashes.
fn bound_names(body: &crate::ir::Body, names: &Interner) -> Vec<u64> {
    use crate::ir::Expr;
    let mut out: Vec<u64> = (body.bound_in(body.root).into_iter())
        .map(|n| name_hash(names.resolve(n)))
        .collect();
    for e in &body.exprs {
        if let Expr::Named { target, .. } = *e {
            out.push(name_hash(names.resolve(target)));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The units to run for a file.
pub(crate) fn plan(prog: &Program<'_>, names: &mut Interner) -> Plan {
    plan_memo(prog, names, &mut RelevanceMemo::default(), false)
}

/// [`plan`], reusing the relevance decided for the last version when it still holds; with
/// `prelower`, the items it lowers are lowered first all at once (see [`Program::prelower`]).
pub(crate) fn plan_memo(
    prog: &Program<'_>,
    names: &mut Interner,
    memo: &mut RelevanceMemo,
    prelower: bool,
) -> Plan {
    let rel = relevant_memo(prog, names, memo, prelower);
    if !rel.iter().any(|r| *r) {
        return Plan::default();
    }
    // Statements of a class body are not run (only its methods are); imported modules' items
    // run only where the file's code reaches them.
    let entry = prog.entry_items();
    let runs = |i: usize, it: &crate::program::Item| {
        rel[i] && entry.contains(&i) && !(it.kind() == ItemKind::Statement && it.parent().is_some())
    };
    if prelower {
        let ids: Vec<ItemId> = (prog.items.iter().enumerate())
            .filter(|(i, it)| runs(*i, it))
            .map(|(_, it)| it.id)
            .collect();
        prog.prelower(&ids, names);
    }
    let mut functions = Vec::new();
    let mut classes = Vec::new();
    for (i, it) in prog.items.iter().enumerate() {
        if !runs(i, it) {
            continue;
        }
        let Some(body) = prog.body(it.id, names) else {
            continue;
        };
        // Every function defined in the item (nested ones too), in source order; lambdas are
        // analysed where they are called.
        let mut defs: Vec<(u32, FuncId)> = body
            .funcs
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.lambda)
            .map(|(k, f)| (f.span.start, FuncId(k as u32)))
            .collect();
        defs.sort();
        functions.extend(
            defs.into_iter()
                .map(|(_, func)| DefLoc { item: it.id, func }),
        );
        if let (ItemKind::Function, Some(p)) = (it.kind(), it.parent()) {
            let class = prog.items[p as usize].id;
            if !classes.contains(&class) {
                classes.push(class);
            }
        }
    }
    Plan {
        module: true,
        functions,
        classes,
    }
}

/// Run a plan: the module unit, then each function unit from the module's final state.
pub(crate) fn run(prog: &Program<'_>, names: &mut Interner, plan: &Plan) -> Vec<UnitOutput> {
    if !plan.module {
        return Vec::new();
    }
    let mut it = Interp::new(prog, names, &Frozen::default());
    it.run_module();
    let (frozen, module) = it.finish_module();
    let mut out = vec![module];
    let frozen = if plan.classes.is_empty() {
        frozen
    } else {
        let it = Interp::new(prog, names, &frozen);
        let (frozen, instances) = it.build_instances(&plan.classes, &frozen);
        out.push(instances);
        frozen
    };
    for def in &plan.functions {
        out.push(run_function(prog, names, &frozen, *def));
    }
    out
}

/// One function unit.
pub(crate) fn run_function(
    prog: &Program<'_>,
    names: &mut Interner,
    frozen: &Frozen,
    def: DefLoc,
) -> UnitOutput {
    let mut it = Interp::new(prog, names, frozen);
    it.run_function(def);
    it.output()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the methods and functions the plan analyses on their own.
    fn planned(text: &str) -> Vec<String> {
        let mut names = Interner::new();
        let prog = Program::of(text, &mut names);
        let plan = plan(&prog, &mut names);
        (plan.functions.iter())
            .filter_map(|d| {
                let it = prog.item(d.item)?;
                let (s, e) = it.outline.name?;
                Some(text[s as usize..e as usize].to_string())
            })
            .collect()
    }

    const BLOCK: &str = "import torch\nfrom torch import nn\n\nclass Block(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(n))\n{INIT}\n    def forward(self, x):\n        return torch.sigmoid(x * self.w)\n{MORE}";

    fn block(init: &str, more: &str) -> String {
        BLOCK.replace("{INIT}", init).replace("{MORE}", more)
    }

    #[test]
    fn a_constructor_that_writes_only_for_itself_leaves_the_other_methods_out() {
        let p = planned(&block("        self.w.data.mul_(0.5)", ""));
        assert_eq!(p, ["__init__"]);
        // A backward pass somewhere can run over what the constructor wrote.
        let more = "\ndef train(b, x):\n    b(x).sum().backward()\n";
        assert_eq!(
            planned(&block("        self.w.data.mul_(0.5)", more)),
            ["__init__", "forward"]
        );
    }

    #[test]
    fn a_constructor_that_stores_code_brings_the_other_methods() {
        let p = planned(&block("        self.post = lambda t: t.mul_(2.0)", ""));
        assert_eq!(p, ["__init__", "forward"]);
        let nested =
            "        def post(t):\n            return t.mul_(2.0)\n        self.post = post";
        // (The nested `def` is a unit of its own, named by its item.)
        assert_eq!(
            planned(&block(nested, "")),
            ["__init__", "__init__", "forward"]
        );
    }

    #[test]
    fn an_instance_kept_in_module_state_that_binds_no_name_brings_its_users() {
        // `BLOCKS.append(Scale())` binds no name, yet `step` reaches `Scale.forward` through
        // it (found by review when a method name on another receiver brought nothing).
        let text = "import torch\nfrom torch import nn\n\nclass Scale(nn.Module):\n    def forward(self, x):\n        return x.mul_(2.0)\n\nBLOCKS = []\nBLOCKS.append(Scale())\n\ndef step():\n    w = torch.randn(3, requires_grad=True)\n    z = BLOCKS[0].forward(torch.exp(w))\n    z.sum().backward()\n";
        assert_eq!(planned(text), ["forward", "step"]);
    }

    #[test]
    fn a_method_of_its_own_class_on_another_receiver_brings_a_method() {
        let text = "class Spec:\n    @staticmethod\n    def bump(t):\n        t += 1\n        return t\n\n    @classmethod\n    def make(cls, t):\n        return cls.bump(t)\n\n    def again(self, t):\n        return type(self).bump(t)\n";
        assert_eq!(planned(text), ["bump", "make", "again"]);
    }

    #[test]
    fn a_class_attribute_that_writes_later_brings_the_methods() {
        let text = "import torch\nfrom torch import nn\n\nclass Scale(nn.Module):\n    def forward(self, x):\n        return x.mul_(2.0)\n\nclass Net(nn.Module):\n    post = Scale()\n\n    def forward(self, x):\n        return self.post.forward(torch.sigmoid(x))\n";
        assert_eq!(planned(text), ["forward", "forward"]);
    }

    #[test]
    fn a_constructor_that_builds_what_writes_later_brings_the_other_methods() {
        let p = planned(&block("        self.act = nn.ReLU(inplace=True)", ""));
        assert_eq!(p, ["__init__", "forward"]);
        let more = "\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.b = Block(3)\n    def forward(self, x):\n        return self.b(x)\n";
        let p = planned(&block("        self.w.data.mul_(0.5)", more));
        // `Net.forward` runs the block (inlined there), not `Block.forward` on its own.
        assert_eq!(p, ["__init__", "__init__", "forward"]);
    }
}
