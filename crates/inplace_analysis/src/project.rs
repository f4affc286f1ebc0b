//! The project around a file: the modules of its own project that it imports.
//!
//! A file's analysis follows the project's own imports (`from models import Net`,
//! `from .blocks import Block`, `import pkg.utils as U`, packages and their `__init__.py`
//! re-exports), transitively, as the interpreter would: an imported module's body runs when
//! the import statement does, in a namespace of its own, and its classes and functions are
//! instantiated and inlined exactly like the file's own. Third-party and standard-library
//! imports stay what they were (the known torch API; the rest opaque).
//!
//! No I/O here: the caller says where a dotted name's text is ([`ModuleLookup`]), by reading
//! files (`check`) or from its index of open documents and workspace files (the server).
//!
//! The program of a file that imports project modules is the file's text followed by each
//! module's text (see [`crate::program::Segment`]): the file's offsets are unchanged, and
//! what lies beyond them belongs to a module. Findings stay in the file: a write inside an
//! imported function is reported at the file's call that led to it, with the write itself as
//! related information naming the module's file.

use crate::ir::{Interner, ItemId};
use crate::program::{Program, Segment};
use crate::shared::SharedModules;
use crate::syntax::outline::{outline, Outline};
use rustc_hash::FxHashSet;
use std::sync::Arc;

/// Most modules one file's analysis reads.
pub const MAX_MODULES: usize = 24;
/// Most bytes of module text one file's analysis reads.
pub const MAX_MODULE_BYTES: usize = 512 << 10;
/// How far imports are followed: the file's own (1), the imports of those (2: a model
/// importing its blocks), theirs (3: the blocks' layers, a package's `ops.py`) and theirs (4:
/// the ops' helpers, torch-points3d's KPConv five modules deep); a package's `__init__.py`
/// re-exporting its submodules adds no depth. (Each level cost no measurable time on the bench
/// corpus: three against two 20.3 s and 20.6 s on one thread; four against three 26.2/25.4 s
/// and 27.2/24.8 s in alternating runs, the findings unchanged.)
pub const MAX_IMPORT_DEPTH: usize = 4;

/// Item ids of imported modules' items: this bit set, the module's number above
/// [`POSITION_BITS`], the item's position below (the file's own ids are small).
const MODULE_ID_BIT: u32 = 1 << 31;

/// Whether an item belongs to an imported module (not to the analysed file).
pub(crate) fn is_module_item(id: ItemId) -> bool {
    id.0 & MODULE_ID_BIT != 0
}
const POSITION_BITS: u32 = 23;

/// A module's absolute dotted name (`pkg.models`), and whether it is a package's
/// `__init__.py` (relative imports in a package start from the package itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ModuleName {
    pub name: String,
    pub is_package: bool,
}

impl ModuleName {
    pub fn new(name: impl Into<String>, is_package: bool) -> ModuleName {
        ModuleName {
            name: name.into(),
            is_package,
        }
    }

    /// The absolute name of a path imported from this module (`.blocks.Block` from
    /// `pkg.model` is `pkg.blocks.Block`); `None` when the dots climb above the top package.
    pub fn absolute(&self, path: &str) -> Option<String> {
        let level = path.bytes().take_while(|b| *b == b'.').count();
        if level == 0 {
            return Some(path.to_string());
        }
        let mut package: Vec<&str> = self.name.split('.').filter(|s| !s.is_empty()).collect();
        if !self.is_package {
            package.pop()?;
        }
        for _ in 1..level {
            package.pop()?;
        }
        // Beyond the top-level package (or from a module outside any package).
        if package.is_empty() {
            return None;
        }
        let rest = &path[level..];
        if !rest.is_empty() {
            package.push(rest);
        }
        (!package.is_empty()).then(|| package.join("."))
    }
}

/// A module of the project, as the caller found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSource {
    pub name: ModuleName,
    /// How the caller names it (a path as `check` prints it, a URI): related information in
    /// findings carries it.
    pub origin: Arc<str>,
    /// How messages name it (its file name, `models.py`).
    pub label: Arc<str>,
    pub text: Arc<str>,
}

/// Where the project's modules are: the text of a module by its absolute dotted name, or
/// `None` when it is not the project's own (third party, standard library) or cannot be read.
pub trait ModuleLookup {
    fn find(&self, name: &str) -> Option<ModuleSource>;

    /// The paths a module imports ([`imported_paths`]); a lookup shared by many files may
    /// keep them.
    fn imports_of(&self, module: &ModuleSource) -> Arc<Vec<String>> {
        Arc::new(imported_paths(&module.text))
    }
}

/// The project modules one file imports, directly or through others, in the order they were
/// found; what the analysis of the file reads besides its text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imports {
    /// The file's own module name (`None`: a script, `__main__`, relative imports unresolved).
    pub entry: Option<ModuleName>,
    pub modules: Vec<ModuleSource>,
    /// Modules left out because of [`MAX_MODULES`] or [`MAX_MODULE_BYTES`].
    pub left_out: usize,
}

impl Imports {
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// Whether a module of this origin is among them.
    pub fn reads(&self, origin: &str) -> bool {
        self.modules.iter().any(|m| &*m.origin == origin)
    }
}

/// Whether a file's analysis reads its project imports: it trains (`.backward(`, `autograd.`,
/// an optimizer built with `optim.` or zeroed with `zero_grad(`), makes a leaf that requires
/// grad (`requires_grad=True`), or is a script with a `__main__` guard (which runs what it
/// imports: `fit(model)` of the project's training loop; 109 more corpus files, 3% more time).
/// So is a script that defines nothing and calls what it imports (see
/// [`is_script_of_imports`]; following the imports of every file that calls an imported name
/// at its top level cost 8% more on the corpus). Library code that does none of this is
/// analysed alone: following the imports of every library file costs far more than what it
/// could find (on the bench corpus: 14x the time of the whole check; with `inplace`, `.data`
/// and anomaly mode as triggers too, still 6x). A bare `.step(` is no sign of training: on the corpus it is a
/// diffusion scheduler's or an environment's step in 286 of the 695 files it would add, and
/// following their imports cost 40% of the import-following time.
pub fn reads_imports(text: &str) -> bool {
    [
        ".backward(",
        "autograd.",
        "optim.",
        "zero_grad(",
        "requires_grad=True",
        "__main__",
    ]
    .iter()
    .any(|w| text.contains(w))
        || is_script_of_imports(text)
}

/// A script that defines nothing (no function or class at its top level) and calls at its
/// top level a name it imports absolutely with `from` (`model = Classifier()` after `from
/// models import Classifier`, `Trainer(model).fit()`): what it runs lies in the modules it
/// imports. (Package `__init__` files mostly import relatively: on the bench corpus 11 library
/// files pass this test, adding 0.1 s to the check.)
fn is_script_of_imports(text: &str) -> bool {
    let top = || {
        (text.lines())
            .filter(|l| l.starts_with(|c: char| c.is_alphabetic() || c == '_' || c == '@'))
    };
    if top().any(|l| {
        l.starts_with('@')
            || ["def ", "async def ", "class "]
                .iter()
                .any(|k| l.starts_with(k))
    }) {
        return false;
    }
    // The names bound by absolute `from` imports (a parenthesised list may span lines).
    let mut imported: Vec<&str> = Vec::new();
    fn add<'t>(part: &'t str, imported: &mut Vec<&'t str>) {
        let part = part.split('#').next().unwrap_or("");
        for n in part.split(',') {
            let n = n
                .trim()
                .trim_matches(|c| c == '(' || c == ')' || c == '\\')
                .trim();
            let bound = n.rsplit(" as ").next().unwrap_or("").trim();
            if !bound.is_empty() && bound != "*" {
                imported.push(bound);
            }
        }
    }
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(names) = (line.strip_prefix("from "))
            .filter(|l| !l.starts_with('.'))
            .and_then(|l| l.split_once(" import ").map(|(_, names)| names))
        else {
            continue;
        };
        add(names, &mut imported);
        if names.contains('(') && !names.contains(')') {
            for more in lines.by_ref() {
                add(more, &mut imported);
                if more.contains(')') {
                    break;
                }
            }
        }
    }
    if imported.is_empty() {
        return false;
    }
    // A call of an imported name at the top level, alone or as an assignment's value
    // (`fit(net, steps=3)`: an `=` after the call's `(` is a keyword's).
    top()
        .filter(|l| !l.starts_with("from ") && !l.starts_with("import "))
        .any(|l| {
            let paren = l.find('(').unwrap_or(l.len());
            let start = l[..paren].find('=').map_or(0, |eq| eq + 1);
            let value = l[start..].trim_start();
            let path = value
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                .map_or(value, |end| &value[..end]);
            let root = path.split('.').next().unwrap_or("");
            value[path.len()..].starts_with('(') && imported.contains(&root)
        })
}

/// The dotted paths a module's text imports, relative ones with their dots: at its top level
/// (in `if`/`try` blocks too), what importing it runs, and inside its functions and methods
/// (a factory's lazy `from .pix2pix_model import Pix2PixModel`), which run when they are
/// called. (Measured on the bench corpus against top-level imports only: the same findings,
/// no time beyond the machine's noise.)
pub fn imported_paths(text: &str) -> Vec<String> {
    let mut names = Interner::new();
    let prog = Program::of(text, &mut names);
    let mut out = Vec::new();
    for item in &prog.items {
        if item.kind() == crate::syntax::outline::ItemKind::Class
            || !has_import_line(&text[item.outline.start as usize..item.outline.end as usize])
        {
            continue;
        }
        let Some(body) = prog.body(item.id, &mut names) else {
            continue;
        };
        out.extend(
            body.imports_within(true)
                .iter()
                .map(|i| names.resolve(i.full).to_string()),
        );
    }
    out
}

/// The dotted paths the analysed file imports anywhere (as [`imported_paths`]:
/// `def main(): from models import Net`).
pub fn entry_imported_paths(text: &str) -> Vec<String> {
    imported_paths(text)
}

/// Whether a statement's text may hold an import statement: a line, or a part of one after
/// `:` or `;`, that starts with `import` or `from` (a dict of module names,
/// `_import_structure[...]`, is not parsed for nothing).
fn has_import_line(statement: &str) -> bool {
    statement
        .lines()
        .flat_map(|l| l.split([':', ';']))
        .any(|part| {
            let part = part.trim_start();
            ["import", "from"].iter().any(|k| {
                part.strip_prefix(k)
                    .is_some_and(|rest| rest.starts_with([' ', '\t', '.', '(', '\\']))
            })
        })
}

/// The project modules a file imports, transitively (each module once; cycles end), as far as
/// `lookup` finds them. Every package on a dotted path is a module too (`import a.b.c` runs
/// `a`, `a.b` and `a.b.c`).
pub fn collect(text: &str, entry: Option<ModuleName>, lookup: &dyn ModuleLookup) -> Imports {
    collect_from(Arc::new(entry_imported_paths(text)), entry, lookup)
}

/// A key of what [`entry_imported_paths`] reads in a text: its lines that mention `import`
/// (with the lines a parenthesis or a backslash continues them onto) and its top-level
/// `def`/`class` lines (which decide the items an import belongs to). The same key means the
/// same imported paths; an editor can keep them while the user types elsewhere.
pub fn imports_key(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    let mut open = 0i32;
    let mut continued = false;
    for line in text.lines() {
        let top =
            line.starts_with("def ") || line.starts_with("class ") || line.starts_with("async ");
        if open > 0 || continued || line.contains("import") || line.contains("sys.path") || top {
            line.hash(&mut h);
            if !top {
                open += line.matches('(').count() as i32 - line.matches(')').count() as i32;
                open = open.max(0);
                continued = line.trim_end().ends_with('\\');
            }
        }
    }
    h.finish()
}

/// The folders a script adds to `sys.path` (`sys.path.append('model')`, `sys.path.insert(0,
/// os.path.join(os.path.dirname(__file__), '..'))`, `sys.path.append(str(Path(__file__).parent
/// / 'lib'))`), relative to the script's own folder (a literal path is relative to the
/// working folder, which for a script run as written is its own), in the order they are added.
/// Only constant paths: one built from a variable or an environment variable is not followed.
pub fn sys_path_additions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let Some(at) = ["sys.path.append(", "sys.path.insert("]
            .iter()
            .find_map(|k| line.find(k).map(|i| i + k.len()))
        else {
            continue;
        };
        let mut arg = line[at..].trim();
        if line[..at].ends_with("insert(") {
            // (The position first: `sys.path.insert(0, ...)`.)
            let Some(comma) = arg.find(',') else { continue };
            arg = arg[comma + 1..].trim_start();
        }
        if let Some(path) = path_expression(arg) {
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The path (relative to the script's folder) that the start of `arg` builds, when constant.
fn path_expression(arg: &str) -> Option<String> {
    // (A string literal at the start of `s`, and how many bytes of `s.trim_start()` it spans.)
    let literal = |s: &str| -> Option<(String, usize)> {
        let s = s.trim_start();
        let (s, prefix) = s.strip_prefix('r').map_or((s, 0), |r| (r, 1));
        let q = s.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let end = s[1..].find(q)?;
        Some((s[1..1 + end].to_string(), prefix + end + 2))
    };
    // `'model'`, `"../lib"`.
    if let Some((p, _)) = literal(arg) {
        return (!p.starts_with('/')).then_some(p);
    }
    // The script's folder and the levels above it: `os.path.dirname(__file__)` (one dirname:
    // the folder; each more: one level up), `Path(__file__).parent` (`.parent` each level).
    let inner = arg.find("__file__")?;
    let dirnames = arg[..inner].matches("dirname(").count();
    let after = &arg[inner..];
    let head = after.split([',', '/']).next().unwrap_or("");
    if head.contains(".parents[") || arg.contains("pardir") {
        // (`Path(__file__).parents[1]`, `os.pardir`: not followed.)
        return None;
    }
    let parents = head.matches(".parent").count();
    let levels = (dirnames + parents).checked_sub(1)?;
    let mut path: Vec<String> = vec!["..".to_string(); levels];
    // Then what is joined on: `os.path.join(<folder>, 'a', 'b')`, `<Path> / 'lib'`.
    let mut rest = after;
    while let Some(k) = rest.find([',', '/']) {
        rest = &rest[k + 1..];
        match literal(rest) {
            Some((p, used)) => {
                path.push(p);
                rest = &rest.trim_start()[used..];
            }
            None => break,
        }
    }
    Some(if path.is_empty() {
        ".".to_string()
    } else {
        path.join("/")
    })
}

/// [`collect`] from the paths the file imports (see [`imported_paths`]).
pub fn collect_from(
    paths: Arc<Vec<String>>,
    entry: Option<ModuleName>,
    lookup: &dyn ModuleLookup,
) -> Imports {
    let mut out = Imports {
        entry: entry.clone(),
        ..Imports::default()
    };
    let mut seen: FxHashSet<String> = FxHashSet::default();
    if let Some(e) = &entry {
        seen.insert(e.name.clone());
    }
    let mut bytes = 0usize;
    // (index of the module in `out.modules`, or none for the file; its depth).
    let mut queue: Vec<(Option<usize>, usize)> = vec![(None, 0)];
    let mut next = 0;
    while next < queue.len() {
        let (index, depth) = queue[next];
        next += 1;
        if depth >= MAX_IMPORT_DEPTH {
            continue;
        }
        let (paths, from) = match index {
            None => (paths.clone(), entry.clone()),
            Some(i) => {
                let m = &out.modules[i];
                (lookup.imports_of(m), Some(m.name.clone()))
            }
        };
        let from = from.unwrap_or_default();
        for path in paths.iter() {
            let Some(abs) = from.absolute(path) else {
                continue;
            };
            let parts: Vec<&str> = abs.split('.').collect();
            for k in 1..=parts.len() {
                let name = parts[..k].join(".");
                if !seen.insert(name.clone()) {
                    continue;
                }
                let Some(m) = lookup.find(&name) else {
                    continue;
                };
                if out.modules.len() >= MAX_MODULES || bytes + m.text.len() > MAX_MODULE_BYTES {
                    out.left_out += 1;
                    continue;
                }
                bytes += m.text.len();
                // A package's `__init__.py` re-exporting its submodules adds no depth.
                let through_package = index.is_some() && from.is_package;
                queue.push((
                    Some(out.modules.len()),
                    depth + usize::from(!through_package),
                ));
                out.modules.push(m);
            }
        }
    }
    out
}

/// Where each imported module lies in a program's text and items.
pub(crate) struct Layout {
    segments: Vec<(ModuleSource, u32, u32, std::ops::Range<u32>)>,
}

/// Outlines of imported modules, kept while their text is the same.
#[derive(Debug, Clone, Default)]
pub(crate) struct OutlineCache {
    by_origin: rustc_hash::FxHashMap<Arc<str>, (Arc<str>, Arc<Outline>)>,
}

impl OutlineCache {
    /// The outline of a module: kept here while its text is the same, else from `shared`
    /// (another file's analysis tokenized it), else made now.
    fn get(&mut self, m: &ModuleSource, shared: Option<&SharedModules>) -> Arc<Outline> {
        let fresh = self
            .by_origin
            .get(&m.origin)
            .is_none_or(|(t, _)| !Arc::ptr_eq(t, &m.text) && **t != *m.text);
        if fresh {
            let o = match shared {
                Some(s) => s.outline(m),
                None => Arc::new(outline(&m.text)),
            };
            self.by_origin.insert(m.origin.clone(), (m.text.clone(), o));
        }
        self.by_origin[&m.origin].1.clone()
    }

    /// Forget the modules no longer imported.
    pub fn retain(&mut self, imports: &Imports) {
        self.by_origin.retain(|o, _| imports.reads(o));
    }
}

/// The program text of `text` followed by the modules of `imports`; the modules' items are
/// added to `outline` and `ids` (the file's own).
pub(crate) fn combine(
    text: &str,
    outline: &mut Outline,
    ids: &mut Vec<ItemId>,
    imports: &Imports,
    cache: &mut OutlineCache,
    shared: Option<&SharedModules>,
) -> (String, Layout) {
    let mut all = String::with_capacity(
        text.len()
            + imports
                .modules
                .iter()
                .map(|m| m.text.len() + 1)
                .sum::<usize>(),
    );
    all.push_str(text);
    let mut segments = Vec::new();
    for (k, m) in imports.modules.iter().enumerate() {
        all.push('\n');
        let base = all.len() as u32;
        all.push_str(&m.text);
        let first = outline.items.len() as u32;
        let module = cache.get(m, shared);
        for (pos, item) in module.items.iter().enumerate() {
            let mut item = item.clone();
            item.line_start += base;
            item.start += base;
            item.end += base;
            item.header_end += base;
            item.name = item.name.map(|(s, e)| (s + base, e + base));
            item.parent = item.parent.map(|p| p + first);
            outline.items.push(item);
            let number = (k as u32 + 1) << POSITION_BITS;
            ids.push(ItemId(MODULE_ID_BIT | number | pos as u32));
        }
        outline.noqa_comments.extend(
            module
                .noqa_comments
                .iter()
                .map(|(s, e)| (s + base, e + base)),
        );
        let end = all.len() as u32;
        segments.push((m.clone(), base, end, first..outline.items.len() as u32));
    }
    (all, Layout { segments })
}

impl Layout {
    /// Name the program's segments: the file (`entry`) and each module.
    pub fn mark(&self, prog: &mut Program<'_>, entry: Option<&ModuleName>, names: &mut Interner) {
        let entry_items = self
            .segments
            .first()
            .map_or(prog.items.len() as u32, |s| s.3.start);
        let file = &mut prog.segments[0];
        if let Some(e) = entry {
            file.name = names.intern(&e.name);
            file.is_package = e.is_package;
        }
        file.items = 0..entry_items;
        file.end = self
            .segments
            .first()
            .map_or(prog.text.len() as u32, |s| s.1 - 1);
        let mut line = prog.text[..file.end as usize]
            .bytes()
            .filter(|b| *b == b'\n')
            .count();
        let mut at = file.end as usize;
        for (m, start, end, items) in &self.segments {
            line += prog.text[at..*start as usize]
                .bytes()
                .filter(|b| *b == b'\n')
                .count();
            prog.segments.push(Segment {
                name: names.intern(&m.name.name),
                is_package: m.name.is_package,
                start: *start,
                end: *end,
                items: items.clone(),
                first_line: line,
                label: m.label.clone(),
                origin: m.origin.clone(),
            });
            line += prog.text[*start as usize..*end as usize]
                .bytes()
                .filter(|b| *b == b'\n')
                .count();
            at = *end as usize;
        }
    }
}

#[cfg(test)]
mod sys_path_tests {
    use super::sys_path_additions;

    #[test]
    fn constant_sys_path_additions_are_read() {
        let text = "import sys, os\nsys.path.append('model')\nsys.path.insert(0, \"../lib\")\n\
            sys.path.append(os.path.join(os.path.dirname(__file__), 'ext', 'ops'))\n\
            sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n\
            sys.path.append(str(Path(__file__).resolve().parent / 'third'))\n\
            sys.path.append(os.environ['X'])\nsys.path.append(root)\n\
            # sys.path.append('old')\nsys.path.append(r'raw/dir')\n\
            sys.path.append(str(Path(__file__).parents[1]))\n";
        assert_eq!(
            sys_path_additions(text),
            ["model", "../lib", "ext/ops", "..", "third", "raw/dir"]
        );
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_imports_key_moves_with_import_lines_only() {
        let base = "import torch\nfrom .m import (a,\n    b)\n\nx = 1\n\ndef f():\n    return x\n";
        let key = imports_key(base);
        assert_eq!(key, imports_key(&base.replace("x = 1", "x = 12")));
        assert_eq!(key, imports_key(&base.replace("return x", "return x + 1")));
        assert_ne!(key, imports_key(&base.replace("    b)", "    c)")));
        assert_ne!(key, imports_key(&base.replace(".m", "..m")));
        assert_ne!(key, imports_key(&format!("def g():\n{base}")));
    }

    #[test]
    fn only_statements_with_import_lines_are_parsed_for_imports() {
        assert!(has_import_line("import torch"));
        assert!(has_import_line("from .blocks import Block"));
        assert!(has_import_line("if TYPE_CHECKING:\n    from x import y"));
        assert!(has_import_line(
            "try: import apex\nexcept ImportError: pass"
        ));
        assert!(!has_import_line(
            "_import_structure[\"models\"].extend([\"a\"])"
        ));
        assert!(!has_import_line("importance = from_pretrained(1)"));
    }
    use super::*;

    #[test]
    fn scripts_that_run_what_they_import_follow_their_imports() {
        // Keyword arguments, an assignment with keywords, a parenthesised import list.
        assert!(reads_imports(
            "from loop import fit\nimport torch.nn as nn\nfit(nn.Linear(2, 2), steps=3)\n"
        ));
        assert!(reads_imports(
            "from trainer import Trainer\nt = Trainer(model, lr=0.1)\n"
        ));
        assert!(reads_imports(
            "from training import (\n    fit,\n    evaluate,\n)\nevaluate(fit(m))\n"
        ));
        // Training markers, a `__main__` guard, a script that defines nothing and calls what
        // it imports.
        assert!(reads_imports("loss.backward()\n"));
        assert!(reads_imports(
            "from loop import fit\n\nif __name__ == \"__main__\":\n    fit()\n"
        ));
        assert!(reads_imports(
            "from models import Net\nfrom loop import fit\nmodel = Net()\nfit(model)\n"
        ));
        assert!(reads_imports(
            "from trainer import Trainer as T\nT(model).fit()\n"
        ));
        // A library module: it defines things, or imports relatively, or calls nothing imported.
        assert!(!reads_imports(
            "from models import Net\n\ndef build():\n    return Net()\n"
        ));
        assert!(!reads_imports(
            "from .registry import register\nregister(\"x\")\n"
        ));
        assert!(!reads_imports(
            "import logging\nlogger = logging.getLogger(__name__)\n"
        ));
        assert!(!reads_imports("from models import Net\nNET = Net\n"));
    }

    #[test]
    fn relative_paths_climb_from_the_package() {
        let m = ModuleName::new("pkg.sub.model", false);
        assert_eq!(m.absolute(".blocks.B").as_deref(), Some("pkg.sub.blocks.B"));
        assert_eq!(m.absolute("..utils").as_deref(), Some("pkg.utils"));
        assert_eq!(m.absolute("...x").as_deref(), None);
        assert_eq!(m.absolute("torch.nn").as_deref(), Some("torch.nn"));
        let p = ModuleName::new("pkg", true);
        assert_eq!(p.absolute(".blocks").as_deref(), Some("pkg.blocks"));
        assert_eq!(p.absolute("..x"), None);
        let script = ModuleName::default();
        assert_eq!(script.absolute(".x"), None);
    }

    #[test]
    fn imported_paths_are_found_in_blocks_and_keep_their_dots() {
        let text = "import torch\nimport a.b as c\nfrom . import u\nfrom .m import (x,\n y)\n\
                    try:\n    from pkg.fast import f\nexcept ImportError:\n    f = None\n\
                    def g():\n    import lazy\n";
        let mut paths = imported_paths(text);
        paths.sort();
        assert_eq!(
            paths,
            [".m.x", ".m.y", ".u", "a.b", "lazy", "pkg.fast.f", "torch"].map(String::from)
        );
        // Functions and methods import too.
        let text = format!("{text}class K:\n    def run(self):\n        from .models import Net\n");
        let mut paths = entry_imported_paths(&text);
        paths.sort();
        assert_eq!(
            paths,
            [
                ".m.x",
                ".m.y",
                ".models.Net",
                ".u",
                "a.b",
                "lazy",
                "pkg.fast.f",
                "torch"
            ]
            .map(String::from)
        );
    }

    struct Files(Vec<(&'static str, bool, &'static str)>);
    impl ModuleLookup for Files {
        fn find(&self, name: &str) -> Option<ModuleSource> {
            let (n, p, t) = self.0.iter().find(|(n, ..)| *n == name)?;
            Some(ModuleSource {
                name: ModuleName::new(*n, *p),
                origin: Arc::from(format!("{n}.py")),
                label: Arc::from(format!("{n}.py")),
                text: Arc::from(*t),
            })
        }
    }

    /// An analysis state for `text` with the modules of `files`.
    fn state_with(files: &Files, text: &str) -> crate::FileState {
        let mut state = crate::FileState::new();
        state.imports = Arc::new(collect(text, None, files));
        state
    }

    /// The codes found in `text` with the modules of `files`.
    fn codes_with(files: &Files, text: &str) -> Vec<&'static str> {
        let found = state_with(files, text).analyze(text).findings;
        found.iter().map(|f| f.rule.code()).collect()
    }

    #[test]
    fn a_function_reached_as_a_module_attribute_is_followed_where_it_is_called() {
        let files = Files(vec![
            ("training", true, ""),
            (
                "training.scaling",
                false,
                "import torch\n\ndef unit_scale(x):\n    x.div_(x.norm())\n    return x\n",
            ),
        ]);
        // The caller holds no in-place write and nothing calls it: it is analysed on its
        // own because the module's function it reaches as an attribute writes.
        let caller = "def step():\n    w = torch.randn(3, requires_grad=True)\n    y = torch.exp(w)\n    z = {m}.unit_scale(y)\n    z.sum().backward()\n";
        for (import, m) in [
            ("from training import scaling", "scaling"),
            ("import training.scaling as sc", "sc"),
        ] {
            let text = format!("import torch\n{import}\n\n{}", caller.replace("{m}", m));
            assert_eq!(codes_with(&files, &text), ["IP301"], "{import}");
        }
    }

    #[test]
    fn a_name_bound_in_another_module_does_not_bring_the_file_s_uses_of_it() {
        // `helpers` binds `torch` in a statement that writes (relevant there); the file's own
        // `import torch` imports nothing the program holds, so its `f` stays out (and `h`,
        // whose `CACHE` is not the module's).
        let files = Files(vec![(
            "helpers",
            false,
            "try:\n    import torch\n    CACHE = {}\n    CACHE[0] = torch.zeros(1)\nexcept ImportError:\n    pass\n\ndef g(x):\n    return x\n",
        )]);
        let text = "import torch\nfrom helpers import g\n\ndef f(x):\n    return torch.exp(x)\n\ndef h():\n    CACHE = 1\n    return CACHE\n";
        let units = |text: &str| state_with(&files, text).analyze(text).units;
        // The module body alone.
        assert_eq!(units(text), 1);
        // Imported, the module's `CACHE` brings the function that uses the name (its own,
        // here: a function's locals are not told from globals without parsing it).
        let text = text.replace("import g", "import g, CACHE");
        assert_eq!(units(&text), 2);
    }

    #[test]
    fn a_copy_that_leaves_the_call_raising_is_not_inserted() {
        // The called code writes a tensor its own `norm()` saved: the copy before the call
        // clears the first hazard, not that one (hidden behind it on the same statement, and
        // whose fix would be the same copy): the call still raises, so no copy is inserted.
        let files = Files(vec![(
            "scaling",
            false,
            "import torch\n\ndef unit_scale(x):\n    x.div_(x.norm())\n    return x\n",
        )]);
        let text = "import torch\nfrom scaling import unit_scale\n\nw = torch.randn(3, requires_grad=True)\ny = torch.exp(w)\nz = unit_scale(y)\nz.sum().backward()\n";
        let mut state = state_with(&files, text);
        let fixed = crate::fix_all_with(text, crate::Applicability::Unsafe, &|_| true, &mut state);
        assert_eq!(
            fixed.text.matches("y = y.clone()").count(),
            0,
            "{}",
            fixed.text
        );
        assert_eq!(fixed.remaining.len(), 1);
    }

    #[test]
    fn a_base_class_named_as_a_module_attribute_brings_the_constructor_s_effects() {
        let files = Files(vec![(
            "layers",
            false,
            "import torch\nfrom torch import nn\n\nclass Base(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.ReLU(inplace=True)\n",
        )]);
        let text = "import torch\nimport layers\n\nclass Child(layers.Base):\n    def forward(self, x):\n        return self.act(torch.sigmoid(x))\n";
        let mut state = state_with(&files, text);
        // The module body, the instances and `Child.forward` (whose `self.act` the base's
        // constructor built).
        assert_eq!(state.analyze(text).units, 3);
    }

    #[test]
    fn collect_follows_packages_and_cycles_end() {
        let files = Files(vec![
            ("pkg", true, "from .blocks import Block\n"),
            (
                "pkg.blocks",
                false,
                "import torch\nfrom pkg import helpers\n",
            ),
            ("pkg.helpers", false, "from .blocks import Block\n"),
        ]);
        let imports = collect("import torch\nfrom pkg import Block\n", None, &files);
        let names: Vec<&str> = imports
            .modules
            .iter()
            .map(|m| m.name.name.as_str())
            .collect();
        assert_eq!(names, ["pkg", "pkg.blocks", "pkg.helpers"]);
    }
}
