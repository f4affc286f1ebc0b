//! Analysis of a file across its versions (an open document), reusing what did not change.
//!
//! * Items keep an *identity* across versions ([`ItemId`]): a function or class by its place
//!   (its enclosing class, kind, name, and which of that name it is), a statement by its text.
//!   An item's *version* is a fingerprint of its text.
//! * Bodies are reused while their item's version holds, so only edited items are parsed again.
//! * Each unit (the module body, the instances its methods run on, each function on its own)
//!   records what it read: the items whose bodies ran (at their versions), the method tables of
//!   the classes it looked into, the globals it read (their values' fingerprints in the module's
//!   final state), its class's instance. A unit is run again only when one of those changed;
//!   else its events are reused. The result is the same as analysing the version from scratch
//!   (`tests/incremental.rs` checks it on random edits).

use crate::domain::fingerprint::{fingerprint, View};
use crate::domain::Vals;
use crate::exec::{budget_for, Deps, Frozen, Interp, UnitOutput};
use crate::ir::{ClassLoc, DefLoc, Interner, ItemId, Name};
use crate::program::{BodyCache, Program, Version};
use crate::project::{combine, Imports, OutlineCache};
use crate::syntax::outline::{name_hash, outline, reoutline, ItemKind, Outline};
use crate::units::{self, Plan};
use crate::Analysis;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// What identifies an item across versions (with which of its kind it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// A function or class: where it is and its name.
    Named {
        parent: Option<ItemId>,
        kind: ItemKind,
        name: u64,
        ordinal: u32,
    },
    /// A statement: its text.
    Plain {
        parent: Option<ItemId>,
        version: Version,
        ordinal: u32,
    },
}

impl Key {
    fn with_ordinal(self, n: u32) -> Key {
        match self {
            Key::Named {
                parent, kind, name, ..
            } => Key::Named {
                parent,
                kind,
                name,
                ordinal: n,
            },
            Key::Plain {
                parent, version, ..
            } => Key::Plain {
                parent,
                version,
                ordinal: n,
            },
        }
    }
}

/// Item identities of the last version, by key.
#[derive(Debug, Default, Clone)]
struct Identities {
    next: u32,
    by_key: FxHashMap<Key, ItemId>,
}

impl Identities {
    /// Identities for the items of a new version: an item keeps the identity of the item with
    /// its key in the last version, else gets a new one.
    fn assign(&mut self, text: &str, outline: &Outline) -> Vec<ItemId> {
        let mut ids: Vec<ItemId> = Vec::with_capacity(outline.items.len());
        let mut next_map = FxHashMap::default();
        let mut counts: FxHashMap<Key, u32> = FxHashMap::default();
        for o in &outline.items {
            let parent = o.parent.map(|p| ids[p as usize]);
            let base = match (o.kind, o.name) {
                (ItemKind::Function | ItemKind::Class, Some((s, e))) => Key::Named {
                    parent,
                    kind: o.kind,
                    name: name_hash(&text[s as usize..e as usize]),
                    ordinal: 0,
                },
                _ => Key::Plain {
                    parent,
                    version: crate::program::version_of(text, o),
                    ordinal: 0,
                },
            };
            let n = counts.entry(base).or_default();
            let key = base.with_ordinal(*n);
            *n += 1;
            let id = match self.by_key.get(&key) {
                Some(id) => *id,
                None => {
                    self.next += 1;
                    ItemId(self.next)
                }
            };
            ids.push(id);
            next_map.insert(key, id);
        }
        self.by_key = next_map;
        ids
    }
}

/// How much of the last analysis was reused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reuse {
    /// Units analysed again.
    pub units_run: usize,
    /// Units whose events were reused.
    pub units_reused: usize,
    /// Items parsed and lowered (the rest were reused).
    pub items_lowered: u32,
}

#[derive(Clone)]
struct ModuleEntry {
    shape: u64,
    output: Arc<UnitOutput>,
    frozen: Frozen,
}

/// Fingerprints of the globals a unit read: the file's, and imported modules' (module, name).
#[derive(Clone, Default)]
struct GlobalsRead {
    file: Vec<(Name, u128)>,
    modules: Vec<((Name, Name), u128)>,
}

#[derive(Clone)]
struct InstancesEntry {
    classes: Vec<ItemId>,
    globals: GlobalsRead,
    output: Arc<UnitOutput>,
    frozen: Frozen,
}

#[derive(Clone)]
struct FunctionEntry {
    globals: GlobalsRead,
    instance: Option<(ClassLoc, u128)>,
    output: Arc<UnitOutput>,
}

/// One file's analysis state across versions.
#[derive(Default, Clone)]
pub struct FileState {
    names: Interner,
    ids: Identities,
    bodies: BodyCache,
    module: Option<ModuleEntry>,
    instances: Option<InstancesEntry>,
    functions: FxHashMap<DefLoc, FunctionEntry>,
    relevance: units::RelevanceMemo,
    /// The last version's text (shared with the caller) and outline: an edit tokenizes again
    /// only the items around it.
    last: Option<(Arc<str>, Outline)>,
    /// What the last [`FileState::analyze`] reused.
    pub reuse: Reuse,
    /// For a notebook's joined cells: how messages name its lines.
    pub cells: Option<crate::notebook::CellLines>,
    /// The project modules the file imports (their text is analysed with it).
    pub imports: Arc<Imports>,
    module_outlines: OutlineCache,
    /// Where the bodies of imported modules' items are shared with other files' analyses
    /// (`check`: one for the run), if anywhere.
    pub shared: Option<Arc<crate::shared::SharedModules>>,
}

impl std::fmt::Debug for FileState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileState")
            .field("bodies", &self.bodies.len())
            .field("functions", &self.functions.len())
            .field("reuse", &self.reuse)
            .finish()
    }
}

/// The order and kinds of the module's items (the module unit runs them all).
fn module_shape(prog: &Program<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    for it in prog.items.iter().filter(|it| it.parent().is_none()) {
        (it.id, it.kind()).hash(&mut h);
    }
    h.finish()
}

/// Whether what a unit read still holds in this version's text (class method tables hashed
/// once per version).
#[derive(Default)]
struct DepsCheck {
    classes: FxHashMap<ItemId, u64>,
    /// Masking attributes judged again on this version's text, once each.
    masking: FxHashMap<String, bool>,
}

impl DepsCheck {
    fn hold(&mut self, deps: &Deps, prog: &Program<'_>) -> bool {
        deps.items
            .iter()
            .all(|(item, v)| prog.version(*item) == Some(*v))
            && (deps.masking_attrs.iter()).all(|(target, found)| {
                *(self.masking.entry(target.clone()))
                    .or_insert_with(|| crate::exec::attr_is_masking(prog.text, target))
                    == *found
            })
            && deps.classes.iter().all(|(class, h)| {
                *self
                    .classes
                    .entry(*class)
                    .or_insert_with(|| prog.class_fingerprint(*class))
                    == *h
            })
    }
}

/// A unit that did not use up its budget gives the same result under any budget it fits in.
fn budget_holds(out: &UnitOutput, budget: u64) -> bool {
    out.deps.budget == budget || (!out.exhausted && out.steps <= budget)
}

/// Fingerprints of the globals of a frozen state (the file's, and imported modules'),
/// computed once each.
struct Globals<'a> {
    frozen: &'a Frozen,
    memo: FxHashMap<(Option<Name>, Name), u128>,
}

impl Globals<'_> {
    fn new(frozen: &Frozen) -> Globals<'_> {
        Globals {
            frozen,
            memo: FxHashMap::default(),
        }
    }

    /// `module`: `None` for the file's own globals.
    fn of(&mut self, module: Option<Name>, name: Name) -> u128 {
        if let Some(f) = self.memo.get(&(module, name)) {
            return *f;
        }
        let env = match module {
            None => Some(&*self.frozen.globals),
            Some(m) => self.frozen.modules.get(&m).map(|e| &**e),
        };
        let f = match env.and_then(|e| e.get(&name)) {
            Some(v) => fingerprint(&view(self.frozen), v),
            None => 0,
        };
        self.memo.insert((module, name), f);
        f
    }

    fn all(&mut self, deps: &Deps) -> GlobalsRead {
        let mut file: Vec<(Name, u128)> = deps
            .globals
            .iter()
            .map(|n| (*n, self.of(None, *n)))
            .collect();
        file.sort();
        let mut modules: Vec<((Name, Name), u128)> = deps
            .module_globals
            .iter()
            .map(|(m, n)| ((*m, *n), self.of(Some(*m), *n)))
            .collect();
        modules.sort();
        GlobalsRead { file, modules }
    }

    fn hold(&mut self, recorded: &GlobalsRead) -> bool {
        recorded.file.iter().all(|(n, f)| self.of(None, *n) == *f)
            && recorded
                .modules
                .iter()
                .all(|((m, n), f)| self.of(Some(*m), *n) == *f)
    }
}

fn view(frozen: &Frozen) -> View<'_> {
    View {
        heap: &frozen.heap,
        nodes: &frozen.nodes,
        saves: &frozen.saves,
        loose_attrs: &frozen.loose_attrs,
        int_values: &frozen.int_values,
    }
}

/// The fingerprint of the instance a class's methods run on (memoized per class).
fn instance_fingerprint(
    memo: &mut FxHashMap<ClassLoc, u128>,
    frozen: &Frozen,
    class: ClassLoc,
) -> u128 {
    *memo
        .entry(class)
        .or_insert_with(|| match frozen.instances.get(&class) {
            Some(o) => fingerprint(&view(frozen), &Vals::from_slice(&[*o])),
            None => 0,
        })
}

impl FileState {
    pub fn new() -> FileState {
        FileState::default()
    }

    /// Analyse a version of the file, reusing what the previous versions left.
    pub fn analyze(&mut self, text: &str) -> Analysis {
        self.analyze_until(&Arc::from(text), &|| false)
            .expect("never cancelled")
    }

    /// [`FileState::analyze`] of a text the caller shares (an open document's: the state keeps
    /// it to compare the next version with, without a copy), giving up (`None`) once
    /// `cancelled` says so; it is asked between units, and the units done by then are kept for
    /// the next version.
    pub fn analyze_until(
        &mut self,
        text: &Arc<str>,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<Analysis> {
        self.reuse = Reuse::default();
        let imports = self.imports.clone();
        if !crate::mentions_torch(text)
            && !imports
                .modules
                .iter()
                .any(|m| crate::mentions_torch(&m.text))
        {
            *self = FileState {
                imports,
                shared: self.shared.take(),
                ..FileState::default()
            };
            return Some(Analysis::default());
        }
        let mut outline = match self.last.take() {
            Some((old_text, old)) => reoutline(&old_text, &old, text),
            None => outline(text),
        };
        self.last = Some((text.clone(), outline.clone()));
        let mut ids = self.ids.assign(text, &outline);
        let bodies = std::mem::take(&mut self.bodies);
        // The file's text, then its imported modules'.
        let (program_text, layout);
        let ptext: &str = if imports.is_empty() {
            layout = None;
            text
        } else {
            let (t, l) = combine(
                text,
                &mut outline,
                &mut ids,
                &imports,
                &mut self.module_outlines,
                self.shared.as_deref(),
            );
            self.module_outlines.retain(&imports);
            (program_text, layout) = (t, Some(l));
            &program_text
        };
        let mut prog = Program::new(ptext, outline, Some(ids), bodies, &mut self.names);
        prog.shared = self.shared.clone();
        if let Some(l) = &layout {
            l.mark(&mut prog, imports.entry.as_ref(), &mut self.names);
        }
        let plan = units::plan_memo(&prog, &mut self.names, &mut self.relevance, true);
        let Some(outputs) = self.run_units(&prog, &plan, cancelled) else {
            self.bodies = prog.into_bodies();
            return None;
        };
        let refs: Vec<&UnitOutput> = outputs.iter().map(|o| o.as_ref()).collect();
        let analysis = crate::collect(&prog, &self.names, &refs, self.cells.as_ref());
        self.reuse.items_lowered = prog.lowered_count().0;
        // Keep only what this version has.
        let present: FxHashSet<ItemId> = prog.items.iter().map(|i| i.id).collect();
        let mut bodies = prog.into_bodies();
        bodies.retain(|id, _| present.contains(id));
        self.bodies = bodies;
        let planned: FxHashSet<DefLoc> = plan.functions.iter().copied().collect();
        self.functions.retain(|d, _| planned.contains(d));
        Some(analysis)
    }

    /// Check a fix against this state (see [`crate::verify_fix`]): only the items the fix
    /// changes are parsed again, and only the units that read them run again, on a copy.
    pub fn verify_fix(
        &self,
        text: &str,
        finding: &crate::Finding,
    ) -> Result<String, crate::FixProblem> {
        let fixed = crate::fixed_text(text, finding)?;
        if crate::syntax::errors_added(text, &fixed) {
            return Err(crate::FixProblem::AddsSyntaxErrors);
        }
        let after = self.clone().analyze(&fixed);
        if crate::finding_remains(finding, &after.findings) {
            return Err(crate::FixProblem::FindingRemains);
        }
        Ok(fixed)
    }

    fn run_units(
        &mut self,
        prog: &Program<'_>,
        plan: &Plan,
        cancelled: &dyn Fn() -> bool,
    ) -> Option<Vec<Arc<UnitOutput>>> {
        if !plan.module {
            self.module = None;
            self.instances = None;
            self.functions.clear();
            return Some(Vec::new());
        }
        let mut outputs = Vec::new();
        let shape = module_shape(prog);
        let budget = budget_for(prog.text.lines().count());
        let module_holds = self.module.as_ref().is_some_and(|m| {
            m.shape == shape
                && DepsCheck::default().hold(&m.output.deps, prog)
                && budget_holds(&m.output, budget)
        });
        if !module_holds {
            let mut it = Interp::new(prog, &mut self.names, &Frozen::default());
            it.run_module();
            let (frozen, output) = it.finish_module();
            self.module = Some(ModuleEntry {
                shape,
                output: Arc::new(output),
                frozen,
            });
            self.reuse.units_run += 1;
        } else {
            self.reuse.units_reused += 1;
        }
        let module = self.module.as_ref().expect("just set");
        outputs.push(module.output.clone());
        let module_frozen = module.frozen.clone();
        // The instances' state is built on the module's: reused over a module unit that ran
        // again, it would hand the functions the last version's globals, and keep events of
        // the last version's instance runs (a class the module no longer instantiates, whose
        // reused instance still reported what its methods did then: tests/incremental.rs's
        // random edits found it). So it is reused only over a module unit reused too.
        let mut deps = DepsCheck::default();
        let base_holds = module_holds;
        let frozen = self.run_instances(prog, plan, &module_frozen, base_holds, &mut outputs);
        let mut globals = Globals::new(&frozen);
        let mut instances = FxHashMap::default();
        for def in &plan.functions {
            if cancelled() {
                return None;
            }
            let holds = self.functions.get(def).is_some_and(|f| {
                deps.hold(&f.output.deps, prog)
                    && globals.hold(&f.globals)
                    && f.instance.is_none_or(|(k, fp)| {
                        instance_fingerprint(&mut instances, &frozen, k) == fp
                    })
            });
            if holds {
                self.reuse.units_reused += 1;
            } else {
                let output = units::run_function(prog, &mut self.names, &frozen, *def);
                let g = globals.all(&output.deps);
                let instance = output
                    .deps
                    .instance
                    .map(|k| (k, instance_fingerprint(&mut instances, &frozen, k)));
                self.functions.insert(
                    *def,
                    FunctionEntry {
                        globals: g,
                        instance,
                        output: Arc::new(output),
                    },
                );
                self.reuse.units_run += 1;
            }
            outputs.push(self.functions[def].output.clone());
        }
        Some(outputs)
    }

    /// The instances unit (when methods run): reused while `base_holds` (the module unit was
    /// reused, or the globals every function read are bound alike) and its classes, what it
    /// read and the globals it read hold. Returns the state function units start from. (Its
    /// state is built on the module's: reused over a module that ran again with other values
    /// for what a function reads, it would hand the functions the last version's globals, e.g.
    /// an `import torch` just commented out.)
    fn run_instances(
        &mut self,
        prog: &Program<'_>,
        plan: &Plan,
        module: &Frozen,
        base_holds: bool,
        outputs: &mut Vec<Arc<UnitOutput>>,
    ) -> Frozen {
        if plan.classes.is_empty() {
            self.instances = None;
            return module.clone();
        }
        let mut globals = Globals::new(module);
        let holds = self.instances.as_ref().is_some_and(|i| {
            base_holds
                && i.classes == plan.classes
                && DepsCheck::default().hold(&i.output.deps, prog)
                && globals.hold(&i.globals)
        });
        if holds {
            self.reuse.units_reused += 1;
        } else {
            let it = Interp::new(prog, &mut self.names, module);
            let (frozen, output) = it.build_instances(&plan.classes, module);
            let g = globals.all(&output.deps);
            self.instances = Some(InstancesEntry {
                classes: plan.classes.clone(),
                globals: g,
                output: Arc::new(output),
                frozen,
            });
            self.reuse.units_run += 1;
        }
        let entry = self.instances.as_ref().expect("just set");
        outputs.push(entry.output.clone());
        entry.frozen.clone()
    }
}
