//! One version of a file as the analysis sees it: its text, its items (from the outline), and
//! the bodies of the items lowered so far. Bodies are lowered on first use, so an item no
//! analysed code reaches is never parsed.
//!
//! An item has an *identity* ([`ItemId`]: the caller's; stable across the versions of an open
//! document while the item keeps its place, see [`crate::incremental`]) and a *version* (a
//! fingerprint of the text it is parsed from). A body is reused while its version holds.

use crate::ir::{Body, ClassLoc, DefLoc, FuncId, Interner, ItemId, Name, Span};
use crate::project::is_module_item;
use crate::shared::SharedModules;
use crate::syntax::outline::{ItemKind, Outline, OutlineItem};
use crate::syntax::{lower_item, python_parser};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::Arc;
use tree_sitter::Parser;

/// Below this many bytes to lower, [`Program::prelower`] stays on the calling thread (sharing
/// the work costs more than it saves).
const PARALLEL_LOWERING_BYTES: usize = 64 * 1024;

/// A fingerprint of text.
pub type Version = u128;

/// An item of this version.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: ItemId,
    pub outline: OutlineItem,
    /// The name of a function or class item.
    pub name: Option<Name>,
    /// Items of a class's body, in order (positions).
    pub children: Vec<u32>,
    /// The fingerprint of the text it is parsed from (a class: its header).
    pub version: Version,
}

impl Item {
    pub fn kind(&self) -> ItemKind {
        self.outline.kind
    }
    pub fn parent(&self) -> Option<u32> {
        self.outline.parent
    }
}

/// Bodies lowered so far, by item, with the version they were lowered from.
pub type BodyCache = FxHashMap<ItemId, (Version, Arc<Body>)>;

/// The bytes of an item that its parse reads: a class's header, else the whole item.
pub fn parsed_range(o: &OutlineItem) -> (u32, u32) {
    if o.kind == ItemKind::Class && o.header_end < o.end {
        (o.start, o.header_end)
    } else {
        (o.start, o.end)
    }
}

/// The version of an item: what decides its parse (its kind, whether it sits in a class body,
/// its text).
pub fn version_of(text: &str, o: &OutlineItem) -> Version {
    let (s, e) = parsed_range(o);
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&[
        o.kind as u8,
        u8::from(o.parent.is_some() || o.start != o.line_start),
    ]);
    h.update(&text.as_bytes()[s as usize..e as usize]);
    h.digest128()
}

/// A module of the project the analysed file imports: its text follows the file's in the
/// program's text, and its items follow the file's items (see [`crate::project`]).
#[derive(Debug, Clone)]
pub struct Segment {
    /// Its absolute dotted name.
    pub name: Name,
    /// An `__init__.py` (relative imports in it start from itself).
    pub is_package: bool,
    /// Where its text starts and ends in the program's text.
    pub start: u32,
    pub end: u32,
    /// Its items' positions.
    pub items: std::ops::Range<u32>,
    /// Its first line in the program's text (0-based).
    pub first_line: usize,
    /// How messages name it (`models.py`) and how the caller does (a path, a URI).
    pub label: Arc<str>,
    pub origin: Arc<str>,
}

pub struct Program<'t> {
    /// The analysed file's text, then the text of each module it imports.
    pub text: &'t str,
    pub items: Vec<Item>,
    pub noqa_comments: Vec<(u32, u32)>,
    /// The analysed file (the first; its name, when known) and the modules it imports.
    pub segments: Vec<Segment>,
    index: FxHashMap<ItemId, u32>,
    bodies: RefCell<BodyCache>,
    parser: RefCell<Option<Parser>>,
    /// Items lowered by this version (not found in the cache handed in), and their bytes.
    lowered: RefCell<(u32, usize)>,
    /// Bodies of imported modules' items lowered by other files' analyses.
    pub(crate) shared: Option<Arc<SharedModules>>,
    /// Whether nothing here mentions an accelerator: decided on the first `.cpu()` the
    /// analysis meets (see [`Program::cpu_only`]), not on every analysis of every file.
    cpu_only: std::cell::OnceCell<bool>,
    /// Whether nothing here mentions another floating dtype than float32 (see
    /// [`Program::single_precision`]), decided on first use.
    single_precision: std::cell::OnceCell<bool>,
}

impl<'t> Program<'t> {
    /// The program of `text`, its items identified by `ids` (one per outline item; `None`: by
    /// position), with bodies already lowered (used where their version holds).
    pub fn new(
        text: &'t str,
        outline: Outline,
        ids: Option<Vec<ItemId>>,
        bodies: BodyCache,
        names: &mut Interner,
    ) -> Program<'t> {
        let n = outline.items.len();
        let ids = ids.unwrap_or_else(|| (0..n as u32).map(ItemId).collect());
        let mut items: Vec<Item> = outline
            .items
            .into_iter()
            .zip(ids)
            .map(|(o, id)| Item {
                id,
                name: o
                    .name
                    .map(|(s, e)| names.intern(&text[s as usize..e as usize])),
                version: version_of(text, &o),
                outline: o,
                children: Vec::new(),
            })
            .collect();
        for i in 0..items.len() {
            if let Some(p) = items[i].outline.parent {
                items[p as usize].children.push(i as u32);
            }
        }
        let index = items
            .iter()
            .enumerate()
            .map(|(i, it)| (it.id, i as u32))
            .collect();
        let entry = Segment {
            name: names.intern("__main__"),
            is_package: false,
            start: 0,
            end: text.len() as u32,
            items: 0..items.len() as u32,
            first_line: 0,
            label: Arc::from(""),
            origin: Arc::from(""),
        };
        Program {
            text,
            items,
            noqa_comments: outline.noqa_comments,
            segments: vec![entry],
            index,
            bodies: RefCell::new(bodies),
            parser: RefCell::new(None),
            lowered: RefCell::new((0, 0)),
            shared: None,
            cpu_only: std::cell::OnceCell::new(),
            single_precision: std::cell::OnceCell::new(),
        }
    }

    /// Nothing in the program mentions an accelerator (see [`mentions_accelerator`]): tensors
    /// stay on the CPU, where `.cpu()` returns the tensor itself.
    pub fn cpu_only(&self) -> bool {
        *self
            .cpu_only
            .get_or_init(|| !mentions_accelerator(self.text))
    }

    /// Whether nothing in the text mentions another floating dtype than float32 (half, bfloat16,
    /// double, autocast): its floating tensors are then float32, and `.float()` of one is itself.
    pub fn single_precision(&self) -> bool {
        *self
            .single_precision
            .get_or_init(|| !mentions_other_precision(self.text))
    }

    /// A program of `text` on its own (no cache).
    pub fn of(text: &'t str, names: &mut Interner) -> Program<'t> {
        let outline = crate::syntax::outline::outline(text);
        Program::new(text, outline, None, BodyCache::default(), names)
    }

    /// Where the analysed file's own text ends (the imported modules' follows).
    pub fn entry_end(&self) -> usize {
        self.segments[0].end as usize
    }

    /// Positions of the analysed file's own items.
    pub fn entry_items(&self) -> std::ops::Range<usize> {
        let r = &self.segments[0].items;
        r.start as usize..r.end as usize
    }

    /// The segment an item (by position) belongs to.
    pub fn segment_of_position(&self, pos: usize) -> usize {
        self.segments
            .partition_point(|s| s.items.end as usize <= pos)
            .min(self.segments.len() - 1)
    }

    /// The segment of an item.
    pub fn segment_of(&self, id: ItemId) -> usize {
        match self.position(id) {
            Some(p) if self.segments.len() > 1 => self.segment_of_position(p),
            _ => 0,
        }
    }

    /// The segment holding a byte offset of the program's text.
    pub fn segment_at(&self, offset: usize) -> usize {
        self.segments
            .partition_point(|s| (s.end as usize) < offset)
            .min(self.segments.len() - 1)
    }

    /// The imported module named `name` (an absolute dotted name), if the program holds it.
    pub fn module_segment(&self, name: Name) -> Option<usize> {
        if self.segments.len() < 2 {
            return None;
        }
        self.segments[1..]
            .iter()
            .position(|s| s.name == name)
            .map(|i| i + 1)
    }

    pub fn position(&self, id: ItemId) -> Option<usize> {
        self.index.get(&id).map(|&i| i as usize)
    }

    pub fn item(&self, id: ItemId) -> Option<&Item> {
        self.position(id).map(|i| &self.items[i])
    }

    /// The item's version.
    pub fn version(&self, id: ItemId) -> Option<Version> {
        self.item(id).map(|i| i.version)
    }

    /// The item's start in the file.
    pub fn item_start(&self, id: ItemId) -> Option<usize> {
        self.item(id).map(|i| i.outline.start as usize)
    }

    /// A span as a byte range of the file (None when its item is gone).
    pub fn range(&self, s: Span) -> Option<crate::TextRange> {
        let base = self.item_start(s.item)?;
        Some(crate::TextRange::new(
            base + s.rel.start as usize,
            base + s.rel.end as usize,
        ))
    }

    /// The source text of a span.
    pub fn text_of(&self, s: Span) -> &'t str {
        self.range(s)
            .and_then(|r| self.text.get(r.start..r.end))
            .unwrap_or("")
    }

    /// The item's body, lowered now if it was not yet (or its version changed).
    pub fn body(&self, id: ItemId, names: &mut Interner) -> Option<Arc<Body>> {
        let item = self.item(id)?;
        if let Some((v, b)) = self.bodies.borrow().get(&id) {
            if *v == item.version {
                return Some(b.clone());
            }
        }
        if let Some(body) = self.shared_body(item, names) {
            return Some(body);
        }
        let mut parser = self.parser.borrow_mut();
        let parser = parser.get_or_insert_with(python_parser);
        let body = lower_item(self.text, &item.outline, parser, names);
        self.share(item, &body, names);
        Some(self.store(item, body))
    }

    /// The body of a module's item that another file's analysis lowered, kept here.
    fn shared_body(&self, item: &Item, names: &mut Interner) -> Option<Arc<Body>> {
        let shared = self.shared.as_ref().filter(|_| is_module_item(item.id))?;
        let body = Arc::new(shared.get(item.version, names)?);
        self.bodies
            .borrow_mut()
            .insert(item.id, (item.version, body.clone()));
        Some(body)
    }

    /// Offer a module item's body just lowered to other files' analyses.
    fn share(&self, item: &Item, body: &Body, names: &Interner) {
        if let Some(shared) = self.shared.as_ref().filter(|_| is_module_item(item.id)) {
            shared.put(item.version, body, names);
        }
    }

    /// Keep a body this version lowered (and count it).
    fn store(&self, item: &Item, body: Body) -> Arc<Body> {
        let body = Arc::new(body);
        let (s, e) = parsed_range(&item.outline);
        let mut lowered = self.lowered.borrow_mut();
        lowered.0 += 1;
        lowered.1 += (e - s) as usize;
        self.bodies
            .borrow_mut()
            .insert(item.id, (item.version, body.clone()));
        body
    }

    /// Lower the items `ids` not lowered yet, on every thread of rayon's pool when there is
    /// enough text to share: each thread parses and lowers a run of items with its own parser
    /// and interner; the names are then moved to `names`. Used where a whole file's worth of
    /// items is lowered at once (a document just opened), so it is ready in a fraction of the
    /// time; the bodies are the ones [`Program::body`] would make.
    pub fn prelower(&self, ids: &[ItemId], names: &mut Interner) {
        use rayon::prelude::*;
        let mut todo: Vec<(ItemId, &Item, usize)> = ids
            .iter()
            .filter_map(|&id| self.item(id).map(|it| (id, it)))
            .filter(|(id, it)| {
                self.lowered_body(*id).is_none() && self.shared_body(it, names).is_none()
            })
            .map(|(id, it)| {
                let (s, e) = parsed_range(&it.outline);
                (id, it, (e - s) as usize)
            })
            .collect();
        todo.dedup_by_key(|t| t.0);
        let bytes: usize = todo.iter().map(|t| t.2).sum();
        let threads = rayon::current_num_threads();
        if threads < 2 || bytes < PARALLEL_LOWERING_BYTES {
            for (id, ..) in todo {
                self.body(id, names);
            }
            return;
        }
        // Runs of items of about equal bytes, a few per thread so that none waits long.
        let share = bytes.div_ceil(threads * 4);
        let mut runs: Vec<&[(ItemId, &Item, usize)]> = Vec::new();
        let (mut from, mut acc) = (0, 0);
        for (i, t) in todo.iter().enumerate() {
            acc += t.2;
            if acc >= share || i + 1 == todo.len() {
                runs.push(&todo[from..=i]);
                (from, acc) = (i + 1, 0);
            }
        }
        let text = self.text;
        let lowered: Vec<(Interner, Vec<(ItemId, Body)>)> = runs
            .par_iter()
            .map(|run| {
                let mut parser = python_parser();
                let mut local = Interner::new();
                let bodies = run
                    .iter()
                    .map(|(id, it, _)| {
                        (*id, lower_item(text, &it.outline, &mut parser, &mut local))
                    })
                    .collect();
                (local, bodies)
            })
            .collect();
        for (local, bodies) in lowered {
            let map = names.absorb(&local);
            for (id, mut body) in bodies {
                body.rename(&map);
                let item = self.item(id).expect("filtered above");
                self.share(item, &body, names);
                self.store(item, body);
            }
        }
    }

    /// A body already lowered (no parse).
    pub fn lowered_body(&self, id: ItemId) -> Option<Arc<Body>> {
        let v = self.version(id)?;
        self.bodies
            .borrow()
            .get(&id)
            .filter(|(bv, _)| *bv == v)
            .map(|(_, b)| b.clone())
    }

    /// How many items this version lowered, and their bytes.
    pub fn lowered_count(&self) -> (u32, usize) {
        *self.lowered.borrow()
    }

    /// The bodies lowered so far (for the next version).
    pub fn into_bodies(self) -> BodyCache {
        self.bodies.into_inner()
    }

    /// The function of a function item.
    pub fn item_def(&self, id: ItemId) -> DefLoc {
        DefLoc {
            item: id,
            func: FuncId::NONE,
        }
    }

    /// The class a class item defines.
    pub fn item_class(&self, id: ItemId, names: &mut Interner) -> Option<ClassLoc> {
        let body = self.body(id, names)?;
        Some(ClassLoc {
            item: id,
            class: body.root_class()?,
        })
    }

    /// The class item whose body holds item `id`.
    pub fn parent_class(&self, id: ItemId) -> Option<ItemId> {
        let it = self.item(id)?;
        it.parent().map(|p| self.items[p as usize].id)
    }

    /// The items of a class item's body of one kind, in order.
    fn class_children(&self, id: ItemId, kind: ItemKind) -> impl Iterator<Item = &Item> {
        let children = self.item(id).map_or(&[][..], |it| &it.children[..]);
        children
            .iter()
            .map(|c| &self.items[*c as usize])
            .filter(move |c| c.kind() == kind)
    }

    /// The methods of a class item: its function items, by name.
    pub fn class_methods(&self, id: ItemId) -> Vec<(Name, ItemId, MethodRole)> {
        self.class_children(id, ItemKind::Function)
            .filter_map(|c| {
                let text = &self.text[c.outline.start as usize..c.outline.end as usize];
                Some((c.name?, c.id, MethodRole::of(text)?))
            })
            .collect()
    }

    /// The statement items of a class item's body, in order (a record class's fields).
    pub fn class_statements(&self, id: ItemId) -> Vec<ItemId> {
        self.class_children(id, ItemKind::Statement)
            .map(|c| c.id)
            .collect()
    }

    /// The classes defined in a class item's body (`class T: class Lambda: ...`), by name.
    pub fn nested_classes(&self, id: ItemId) -> Vec<(Name, ItemId)> {
        self.class_children(id, ItemKind::Class)
            .filter_map(|c| Some((c.name?, c.id)))
            .collect()
    }

    /// A fingerprint of what a class item's body holds: its methods (names, items, roles),
    /// its statement items and the classes nested in it.
    pub fn class_fingerprint(&self, id: ItemId) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        self.class_methods(id).hash(&mut h);
        self.class_statements(id).hash(&mut h);
        self.nested_classes(id).hash(&mut h);
        h.finish()
    }

    /// Lines of an item (its share of a step budget).
    pub fn item_lines(&self, id: ItemId) -> usize {
        self.item(id).map_or(1, |it| {
            let o = &it.outline;
            1 + self.text[o.start as usize..o.end as usize]
                .bytes()
                .filter(|b| *b == b'\n')
                .count()
        })
    }
}

/// What a method of a class is for, read off its decorators in the outline (the methods of a
/// class item are looked up without lowering them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodRole {
    /// Called by name, or read as a `@property`.
    Method,
    /// `@x.setter`: assigning the attribute runs it.
    Setter,
}

impl MethodRole {
    /// The role of a method from its text (decorators first); `None` for a `@x.deleter`.
    fn of(text: &str) -> Option<MethodRole> {
        let mut role = MethodRole::Method;
        for line in text.lines().map(str::trim_start) {
            if !line.starts_with('@') {
                break;
            }
            if line.contains(".deleter") {
                return None;
            }
            if line.contains(".setter") {
                role = MethodRole::Setter;
            }
        }
        Some(role)
    }
}

/// Whether `text` mentions another floating dtype than float32, in any case, comments
/// included: half precision, bfloat16, double, autocast or AMP, or NumPy arrays made tensors
/// (`from_numpy` of float64 data): a word that is one of those names.
fn mentions_other_precision(text: &str) -> bool {
    const OTHERS: &[&str] = &[
        "half",
        "float16",
        "fp16",
        "bfloat16",
        "bf16",
        "double",
        "float64",
        "fp64",
        "autocast",
        "amp",
        "halftensor",
        "doubletensor",
    ];
    text.contains("from_numpy")
        || (text.split(|c: char| !c.is_ascii_alphanumeric()))
            .any(|w| OTHERS.iter().any(|o| w.eq_ignore_ascii_case(o)))
}

/// Whether `text` mentions an accelerator, in any case, comments included: a word containing
/// `cuda` (`torch.cuda`, `"cuda:0"`, `CUDA_VISIBLE_DEVICES`) or the word `mps`, `xpu`, `xla`,
/// `npu`, `hpu` or `tpu`.
fn mentions_accelerator(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        w.as_bytes()
            .windows(4)
            .any(|x| x.eq_ignore_ascii_case(b"cuda"))
            || ["mps", "xpu", "xla", "npu", "hpu", "tpu"]
                .iter()
                .any(|a| w.eq_ignore_ascii_case(a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body's `Debug` text with every `Name(n)` written out as its string.
    fn spelled(body: &Body, names: &Interner) -> String {
        let dbg = format!("{body:?}");
        let mut out = String::new();
        let mut rest = dbg.as_str();
        while let Some(at) = rest.find("Name(") {
            let (head, tail) = rest.split_at(at + "Name(".len());
            out.push_str(head);
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            match tail[..digits].parse::<usize>() {
                Ok(n) => out.push_str(&format!("{:?}", names.resolve(Name::from_idx(n)))),
                Err(_) => out.push_str(&tail[..digits]),
            }
            rest = &tail[digits..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn bodies_lowered_elsewhere_and_renamed_equal_bodies_lowered_here() {
        let text = "import torch.nn as nn\nfrom m import f as g\n\n@dec\nclass A(nn.Module):\n    \
                    def forward(self, x, *a, k=2, **kw):\n        y = (z := x.relu())\n        \
                    return g(y, key='s', **kw)[0]\n\nlambda q: q\n";
        let outline = crate::syntax::outline::outline(text);
        let mut parser = python_parser();
        for item in &outline.items {
            let mut here = Interner::new();
            here.intern("taken first");
            let direct = lower_item(text, item, &mut parser, &mut here);
            // Another interner whose ids differ: a name the renaming misses reads wrong.
            let mut there = Interner::new();
            for k in 0..50 {
                there.intern(&format!("unrelated{k}"));
            }
            let mut moved = lower_item(text, item, &mut parser, &mut there);
            let mut target = Interner::new();
            target.intern("taken first");
            moved.rename(&target.absorb(&there));
            assert_eq!(spelled(&direct, &here), spelled(&moved, &target));
        }
    }

    #[test]
    fn accelerators_are_mentioned_in_any_spelling() {
        for t in [
            "x.cuda()",
            "device = 'cuda:0'",
            "# CUDA_VISIBLE_DEVICES",
            "d = 'mps'",
            "xm = torch_xla",
        ] {
            assert!(mentions_accelerator(t), "{t}");
        }
        for t in [
            "json.dumps(x)",
            "timestamps = x.cpu()",
            "device = torch.device('cpu')",
        ] {
            assert!(!mentions_accelerator(t), "{t}");
        }
    }

    #[test]
    fn other_floating_dtypes_are_mentioned_as_words() {
        for t in [
            "x.half()",
            "dtype=torch.bfloat16",
            "with torch.autocast('cpu'):",
            "from torch.cuda import amp",
            "model.double()",
            "USE_AMP = True",
            "x = torch.from_numpy(arr)",
        ] {
            assert!(mentions_other_precision(t), "{t}");
        }
        for t in [
            "x.float()",
            "x.to(torch.float32)",
            "example = 1",
            "halfway = 2",
        ] {
            assert!(!mentions_other_precision(t), "{t}");
        }
    }
}
