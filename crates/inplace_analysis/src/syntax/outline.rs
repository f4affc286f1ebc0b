//! The outline of a file, from its tokens alone (no parse): its *items*, the top-level
//! statements and, inside class bodies, the statements of the body (methods, nested classes),
//! each with its byte range, and what its tokens say about it: the *seeds* (tokens that can
//! start an in-place hazard) and the names it refers to. The analysis parses and lowers only
//! the items that can matter, and the server reuses everything of an item whose text did not
//! change.

use super::lexer::{tokenize, Sink, Tk, Tok};
use crate::ops;
use rustc_hash::FxHashMap;
use std::sync::LazyLock;

/// What an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemKind {
    /// Any statement that is not a definition (imports, assignments, `if`, loops, ...).
    Statement,
    /// `def` / `async def`, with its decorators.
    Function,
    /// `class`, with its decorators; its body's statements are items of their own.
    Class,
}

/// Tokens that can start an in-place hazard (a bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Seeds(pub u16);

impl Seeds {
    /// `+=`, `-=`, ...
    pub const AUG_ASSIGN: u16 = 1;
    /// `x.add_(...)`, `torch.relu_(...)`, `nn.init.normal_(...)`.
    pub const INPLACE_CALL: u16 = 1 << 1;
    /// `x[i] = v` (not with a string key: that is a dict).
    pub const SUBSCRIPT_STORE: u16 = 1 << 2;
    /// `inplace=...`, or `True` with an activation that takes `inplace` by position.
    pub const INPLACE_ARG: u16 = 1 << 3;
    /// `out=` keyword.
    pub const OUT_ARG: u16 = 1 << 4;
    /// `.step(`
    pub const STEP: u16 = 1 << 5;
    /// `.data`
    pub const DATA: u16 = 1 << 6;
    /// `.grad` (an update of a leaf from its gradient).
    pub const GRAD: u16 = 1 << 7;
    /// `set_detect_anomaly`, `detect_anomaly`.
    pub const ANOMALY: u16 = 1 << 8;
    /// `optim` (optimizers are built or imported).
    pub const OPTIM: u16 = 1 << 9;
    /// `setattr` (an attribute replaced by name).
    pub const SETATTR: u16 = 1 << 10;
    /// `.load_state_dict(` (every parameter copied into in place).
    pub const LOAD: u16 = 1 << 11;

    pub fn any(self) -> bool {
        self.0 != 0
    }

    pub fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }
}

/// What an item's tokens say about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Summary {
    pub seeds: Seeds,
    /// Hashes of the names it uses (not after a `.`), sorted, without repeats.
    pub names: Vec<u64>,
    /// Hashes of the attribute names it uses after a `.` (but `self.x` and `super().x`),
    /// sorted, without repeats.
    pub attrs: Vec<u64>,
    /// `self.x`: attributes of the instance (methods of its class, in a method).
    pub self_attrs: Vec<u64>,
    /// `super().x`: attributes found on the base classes.
    pub super_attrs: Vec<u64>,
    /// `self(...)`: calls the instance (its `forward`).
    pub calls_self: bool,
    /// It has a `True` token (an `inplace` given by position to a renamed activation seeds it:
    /// see [`Summary::activation_aliases`]).
    pub has_true: bool,
    /// Hashes of names it binds to an activation that takes `inplace` by position
    /// (`from torch.nn import ReLU as Act`): `Act(True)` elsewhere is an in-place activation.
    pub activation_aliases: Vec<u64>,
    /// It holds code of its own that can run later: a `lambda`, or a `def` or `class` inside it
    /// (a constructor storing `lambda t: t.mul_(2)` on `self`).
    pub nested_code: bool,
    /// It imports (an `import` anywhere in it): the names it uses may come from another module.
    pub imports: bool,
    /// It imports every public name of a module (`from m import *`).
    pub star_import: bool,
}

impl Summary {
    pub fn uses_name(&self, h: u64) -> bool {
        self.names.binary_search(&h).is_ok()
    }
    /// Whether it uses attribute `h` after any receiver.
    pub fn uses_attr(&self, h: u64) -> bool {
        self.attrs.binary_search(&h).is_ok()
            || self.self_attrs.binary_search(&h).is_ok()
            || self.super_attrs.binary_search(&h).is_ok()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlineItem {
    pub kind: ItemKind,
    /// The start of the item's first line (before its indentation).
    pub line_start: u32,
    /// Its first token (a decorator's `@`, `def`, `class`, or the statement).
    pub start: u32,
    /// The end of its last token.
    pub end: u32,
    /// Where a class's header (up to its `:`) ends.
    pub header_end: u32,
    /// The name of a function or class.
    pub name: Option<(u32, u32)>,
    /// The class whose body holds it.
    pub parent: Option<u32>,
    pub summary: Summary,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outline {
    pub items: Vec<OutlineItem>,
    /// Comments that mention `noqa`.
    pub noqa_comments: Vec<(u32, u32)>,
}

/// The hash of a name, as the summaries store it.
pub fn name_hash(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    name.hash(&mut h);
    h.finish()
}

/// The statements at one indentation: the module, or a class body.
struct Level {
    /// The column of the body's statements, once its first line is seen.
    indent: Option<u32>,
    /// The class header's column (for a class body).
    header_col: u32,
    /// The class whose body this is.
    class: Option<u32>,
    /// The last item started at this level.
    current: Option<u32>,
}

/// Per-item state while its tokens stream by.
#[derive(Default)]
struct ItemScan {
    has_true: bool,
    has_positional_activation: bool,
    /// Only decorator lines so far: the definition that follows joins the item.
    decorators_only: bool,
    /// Its first logical line started with `async`: `def` makes it a function.
    async_start: bool,
}

/// What came before the `.` of an attribute.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Receiver {
    Other,
    /// `self`
    SelfName,
    /// `super(`
    SuperOpen,
    /// `super()`
    SuperCall,
}

/// A token that needs the next one to decide (`x.add_` + `(`, `out` + `=`, ...).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    InplaceName,
    OutKeyword,
    Step,
    Load,
    SelfCall,
}

struct Builder<'a> {
    text: &'a str,
    out: Outline,
    scans: Vec<ItemScan>,
    levels: Vec<Level>,
    /// The item receiving tokens.
    cur: Option<u32>,
    /// Tokens seen on the current logical line.
    line_tokens: u32,
    /// A class whose header line is being read.
    header_of: Option<u32>,
    prev: Option<Tok>,
    /// The receiver before the `.` of an attribute: `self`, `super()`, or anything else.
    receiver: Receiver,
    pending: Pending,
    /// Open brackets: (tokens seen at the open, a `[`).
    brackets: Vec<(u32, bool)>,
    tokens: u32,
    /// The `]` just closed held exactly one string (a dict key, not a tensor index).
    string_key: bool,
    /// The logical line starts with a compound statement's keyword (`if`, `for`, ...): a `:` at
    /// depth 0 ends its header.
    compound_line: bool,
    /// The logical line has an annotation (`x: Dict[str, int] = {}`): its `=` stores no subscript.
    annotated: bool,
    /// The logical line is an import: `.data` in `from timm.data import X` is a module's name.
    import_line: bool,
    last_was_string: bool,
    /// The token before was `as` after an activation's name: the next name is an alias of it.
    alias_next: bool,
    /// The text contains `anomaly` at all (else no name needs the substring test).
    text_has_anomaly: bool,
    noqa: Vec<(u32, u32)>,
}

/// Names the summary looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    Inplace,
    Out,
    Step,
    Load,
    SelfName,
    Data,
    Grad,
    Optim,
    Setattr,
    True,
    Activation,
}

static SPECIAL: LazyLock<FxHashMap<u64, (&'static str, Special)>> = LazyLock::new(|| {
    let mut m = FxHashMap::default();
    let words = [
        ("inplace", Special::Inplace),
        // `nn.Embedding(..., max_norm=1.0)` writes its weight in place when called.
        ("max_norm", Special::Inplace),
        ("out", Special::Out),
        ("step", Special::Step),
        ("load_state_dict", Special::Load),
        ("self", Special::SelfName),
        ("data", Special::Data),
        ("grad", Special::Grad),
        ("optim", Special::Optim),
        ("setattr", Special::Setattr),
        ("True", Special::True),
    ];
    for (w, k) in words {
        m.insert(name_hash(w), (w, k));
    }
    // (And torchvision's `normalize(t, mean, std, True)` / `Normalize(mean, std, True)`, which
    // take `inplace` by position too.)
    for w in ops::INPLACE_ACTIVATIONS
        .iter()
        .chain(&["normalize", "Normalize"])
    {
        m.insert(name_hash(w), (*w, Special::Activation));
    }
    m
});

/// The outline of `text`.
pub fn outline(text: &str) -> Outline {
    let mut b = Builder {
        text,
        out: Outline::default(),
        scans: Vec::new(),
        levels: vec![Level {
            indent: Some(0),
            header_col: 0,
            class: None,
            current: None,
        }],
        cur: None,
        line_tokens: 0,
        header_of: None,
        prev: None,
        receiver: Receiver::Other,
        pending: Pending::None,
        brackets: Vec::new(),
        tokens: 0,
        string_key: false,
        compound_line: false,
        import_line: false,
        annotated: false,
        last_was_string: false,
        alias_next: false,
        text_has_anomaly: text.contains("anomaly"),
        noqa: Vec::new(),
    };
    tokenize(text, &mut b);
    b.finish();
    b.out.noqa_comments = std::mem::take(&mut b.noqa);
    b.out
}

/// The outline of `text`, given `old`, the outline of an earlier version `old_text`: the same
/// as [`outline`], but only the top-level items around the edit are tokenized again (an edit
/// is the bytes between the texts' common prefix and common suffix). The tokenizer's state at
/// the start of a top-level item is always the same (a new line at column 0, no open bracket or
/// string), so a region of whole top-level items can be outlined on its own; the region ends
/// with the first item after the edit that the new text still starts at the same place, which
/// shows that its tokens, and all after it, read as before.
pub fn reoutline(old_text: &str, old: &Outline, text: &str) -> Outline {
    splice(old_text, old, text).unwrap_or_else(|| outline(text))
}

/// How many bytes `a` and `b` have in common at their start (compared a block at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 256;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// How many bytes `a` and `b` have in common at their end, at most `max`.
fn common_suffix(a: &[u8], b: &[u8], max: usize) -> usize {
    const BLOCK: usize = 256;
    let at = |s: &[u8], k: usize, len: usize| s.len() - k - len;
    let mut k = 0;
    while k + BLOCK <= max && a[at(a, k, BLOCK)..a.len() - k] == b[at(b, k, BLOCK)..b.len() - k] {
        k += BLOCK;
    }
    k + a[..a.len() - k]
        .iter()
        .rev()
        .zip(b[..b.len() - k].iter().rev())
        .take(max - k)
        .take_while(|(x, y)| x == y)
        .count()
}

/// `i` with its offsets mapped by `offset` and its parent's position by `parent`.
fn moved(i: &OutlineItem, offset: impl Fn(u32) -> u32, parent: impl Fn(u32) -> u32) -> OutlineItem {
    let mut i = i.clone();
    i.line_start = offset(i.line_start);
    i.start = offset(i.start);
    i.end = offset(i.end);
    i.header_end = offset(i.header_end);
    i.name = i.name.map(|(s, e)| (offset(s), offset(e)));
    i.parent = i.parent.map(parent);
    i
}

fn splice(old_text: &str, old: &Outline, text: &str) -> Option<Outline> {
    let (a, b) = (old_text.as_bytes(), text.as_bytes());
    let mut prefix = common_prefix(a, b);
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = common_suffix(a, b, max_suffix);
    while !text.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let old_edit_end = a.len() - suffix;
    let delta = b.len() as i64 - a.len() as i64;
    let top = |i: &OutlineItem| i.parent.is_none() && i.start == i.line_start;
    // The region starts at the last top-level item at or before the edit, if no item before
    // it could take it in (a dangling decorator, or an `else` that would join the `if`).
    let first = old
        .items
        .iter()
        .rposition(|i| top(i) && i.line_start as usize <= prefix);
    let (first, region_start) = match first {
        Some(f) => (f, old.items[f].line_start as usize),
        None => (0, 0),
    };
    if first > 0 {
        let prev = old.items[..first].iter().rfind(|i| i.parent.is_none())?;
        let prev_text = &old_text[prev.start as usize..prev.end as usize];
        if prev.kind == ItemKind::Statement && prev_text.starts_with('@') {
            return None;
        }
    }
    // The region ends with the first top-level item wholly after the edit (its line break
    // too), included to check that it still starts there.
    let last = old.items[first..]
        .iter()
        .position(|i| top(i) && i.line_start as usize > old_edit_end)
        .map(|k| first + k);
    let shift = |x: u32| (x as i64 + delta) as u32;
    let region_end = last.map_or(text.len(), |l| shift(old.items[l].end) as usize);
    if region_end < region_start || !text.is_char_boundary(region_end) {
        return None;
    }
    let part = outline(&text[region_start..region_end]);
    // Its first line must start a top-level item: not indented into the one before, nor an
    // `else` or `except` that would join it.
    if let Some(i) = part.items.first() {
        let word = text[region_start + i.start as usize..]
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .next()
            .unwrap_or("");
        if i.start != i.line_start || (first > 0 && is_continuation_keyword(word)) {
            return None;
        }
    }
    let base = region_start as u32;
    // How many of the region's items are new (before the check item).
    let keep = match last {
        None => part.items.len(),
        Some(l) => {
            let o = &old.items[l];
            let k = part
                .items
                .iter()
                .position(|i| i.parent.is_none() && i.start + base == shift(o.start))?;
            let p = &part.items[k];
            if p.kind != o.kind || p.end + base != shift(o.end) {
                return None;
            }
            k
        }
    };
    let mut items = Vec::with_capacity(old.items.len() + keep);
    items.extend_from_slice(&old.items[..first]);
    let at = |x: u32| x + base;
    items.extend(
        part.items[..keep]
            .iter()
            .map(|i| moved(i, at, |p| p + first as u32)),
    );
    let mut noqa: Vec<(u32, u32)> = old
        .noqa_comments
        .iter()
        .filter(|c| (c.0 as usize) < region_start)
        .copied()
        .collect();
    noqa.extend(part.noqa_comments.iter().map(|(s, e)| (at(*s), at(*e))));
    if let Some(l) = last {
        let renumber = (first + keep) as i64 - l as i64;
        items.extend(
            old.items[l..]
                .iter()
                .map(|i| moved(i, shift, |p| (p as i64 + renumber) as u32)),
        );
        let end = old.items[l].end;
        noqa.extend(
            old.noqa_comments
                .iter()
                .filter(|c| c.0 >= end)
                .map(|(s, e)| (shift(*s), shift(*e))),
        );
    }
    Some(Outline {
        items,
        noqa_comments: noqa,
    })
}

impl Sink for Builder<'_> {
    fn token(&mut self, t: &Tok) {
        self.on_token(t);
    }

    fn comment(&mut self, start: u32, end: u32) {
        let c = &self.text[start as usize..end as usize];
        if c.len() >= 5 && c.to_ascii_lowercase().contains("noqa") {
            self.noqa.push((start, end));
        }
    }
}

fn is_continuation_keyword(s: &str) -> bool {
    matches!(s, "else" | "elif" | "except" | "finally")
}

impl Builder<'_> {
    fn s(&self, t: &Tok) -> &str {
        &self.text[t.start as usize..t.end as usize]
    }

    fn on_token(&mut self, t: &Tok) {
        if t.kind == Tk::Newline {
            if let Some(c) = self.header_of.take() {
                self.out.items[c as usize].header_end =
                    self.prev.map_or(self.out.items[c as usize].end, |p| p.end);
            }
            self.settle_pending(None);
            return;
        }
        if t.in_fstring {
            // A name inside an f-string's field: code for the summary, not for the structure.
            if let Some(cur) = self.cur {
                let h = name_hash(self.s(t));
                self.out.items[cur as usize].summary.names.push(h);
            }
            return;
        }
        if let Some(col) = t.first {
            self.start_line(t, col);
        } else {
            self.line_tokens += 1;
            if self.line_tokens == 2 {
                self.second_token(t);
            }
        }
        if self.cur.is_none() {
            let level = self.levels.len() - 1;
            self.new_item(level, t, ItemKind::Statement);
        }
        let cur = self.cur.unwrap_or(0);
        self.extend(cur, t.end);
        self.summarize(cur, t);
        self.prev = Some(*t);
        self.tokens += 1;
    }

    /// A logical line starts at column `col`: find the item it belongs to.
    fn start_line(&mut self, t: &Tok, col: u32) {
        self.line_tokens = 1;
        self.prev = None;
        // (`import ReLU as` at the end of a line binds no alias on the next.)
        self.alias_next = false;
        self.annotated = false;
        self.import_line = matches!(
            &self.text[t.start as usize..t.end as usize],
            "from" | "import"
        );
        self.compound_line = matches!(
            &self.text[t.start as usize..t.end as usize],
            "if" | "elif"
                | "else"
                | "for"
                | "while"
                | "with"
                | "try"
                | "except"
                | "finally"
                | "def"
                | "class"
                | "async"
                | "match"
                | "case"
                | "@"
        );
        // Leave the class bodies the line is not indented into.
        loop {
            let n = self.levels.len();
            let top = &mut self.levels[n - 1];
            match top.indent {
                None if col > top.header_col => {
                    top.indent = Some(col);
                    break;
                }
                None => {
                    self.levels.pop();
                }
                Some(i) if col < i && n > 1 => {
                    self.levels.pop();
                }
                _ => break,
            }
        }
        let level = self.levels.len() - 1;
        let indent = self.levels[level].indent.unwrap_or(0);
        let current = self.levels[level].current;
        let text = self.text;
        let first = &text[t.start as usize..t.end as usize];
        if col > indent {
            // A line of the current item's body.
            self.cur = current;
            return;
        }
        if let Some(c) = current {
            let scan = &self.scans[c as usize];
            let item = &self.out.items[c as usize];
            let joins = (scan.decorators_only && matches!(first, "@" | "def" | "class" | "async"))
                || (item.kind == ItemKind::Statement
                    && !scan.decorators_only
                    && is_continuation_keyword(first));
            if joins {
                self.cur = Some(c);
                if self.scans[c as usize].decorators_only {
                    self.definition_keyword(c, first, col);
                }
                return;
            }
        }
        self.new_item(level, t, ItemKind::Statement);
        let c = self.cur.unwrap_or(0);
        match first {
            "@" => self.scans[c as usize].decorators_only = true,
            _ => self.definition_keyword(c, first, col),
        }
    }

    /// The keyword that starts a line of item `c` (after its decorators, if any).
    fn definition_keyword(&mut self, c: u32, kw: &str, col: u32) {
        match kw {
            "def" => self.set_function(c),
            "class" => self.open_class(c, col),
            "async" => self.scans[c as usize].async_start = true,
            "@" => {}
            _ => self.scans[c as usize].decorators_only = false,
        }
    }

    /// The second token of a logical line: `async def`.
    fn second_token(&mut self, t: &Tok) {
        let Some(c) = self.cur else { return };
        if self.scans[c as usize].async_start {
            self.scans[c as usize].async_start = false;
            if self.s(t) == "def" {
                self.set_function(c);
            } else {
                self.scans[c as usize].decorators_only = false;
            }
        }
    }

    fn set_function(&mut self, c: u32) {
        self.out.items[c as usize].kind = ItemKind::Function;
        self.scans[c as usize].decorators_only = false;
    }

    fn open_class(&mut self, c: u32, col: u32) {
        self.out.items[c as usize].kind = ItemKind::Class;
        self.scans[c as usize].decorators_only = false;
        self.header_of = Some(c);
        self.levels.push(Level {
            indent: None,
            header_col: col,
            class: Some(c),
            current: None,
        });
    }

    fn new_item(&mut self, level: usize, t: &Tok, kind: ItemKind) {
        let line_start = self.text[..t.start as usize]
            .rfind(['\n', '\r'])
            .map_or(0, |i| i as u32 + 1);
        let id = self.out.items.len() as u32;
        self.out.items.push(OutlineItem {
            kind,
            line_start,
            start: t.start,
            end: t.end,
            header_end: t.end,
            name: None,
            parent: self.levels[level].class,
            summary: Summary::default(),
        });
        self.scans.push(ItemScan::default());
        self.levels[level].current = Some(id);
        self.cur = Some(id);
    }

    /// The item and the classes around it now reach `end`.
    fn extend(&mut self, item: u32, end: u32) {
        let mut i = Some(item);
        while let Some(c) = i {
            let it = &mut self.out.items[c as usize];
            if it.end < end {
                it.end = end;
            } else if c != item {
                break;
            }
            i = it.parent;
        }
    }

    /// Seeds and names from one token of item `cur`.
    fn summarize(&mut self, cur: u32, t: &Tok) {
        let s = &self.text[t.start as usize..t.end as usize];
        let prev_byte = |p: &Tok| self.text.as_bytes()[p.start as usize];
        let after_dot = self
            .prev
            .is_some_and(|p| p.kind == Tk::Op && p.end == p.start + 1 && prev_byte(&p) == b'.');
        if self.pending != Pending::None {
            self.settle_pending(Some((t.kind, s)));
        }
        let special_of = |s: &str| {
            SPECIAL
                .get(&name_hash(s))
                .filter(|(w, _)| *w == s)
                .map(|(_, k)| *k)
        };
        // `ReLU as Act` (in an import): `Act` names an activation.
        let alias = std::mem::take(&mut self.alias_next) && t.kind == Tk::Name;
        if t.kind == Tk::Name && s == "as" {
            let prev = self
                .prev
                .map(|p| &self.text[p.start as usize..p.end as usize]);
            self.alias_next = prev.and_then(special_of) == Some(Special::Activation);
        }
        let item = &mut self.out.items[cur as usize];
        let seeds = &mut item.summary.seeds.0;
        match t.kind {
            Tk::Name => {
                let h = name_hash(s);
                if alias {
                    item.summary.activation_aliases.push(h);
                }
                if after_dot {
                    match self.receiver {
                        Receiver::SelfName => item.summary.self_attrs.push(h),
                        Receiver::SuperCall => item.summary.super_attrs.push(h),
                        _ => item.summary.attrs.push(h),
                    }
                } else {
                    item.summary.names.push(h);
                }
                // The definition's name.
                if item.name.is_none() && matches!(item.kind, ItemKind::Function | ItemKind::Class)
                {
                    let prev_s = self
                        .prev
                        .map(|p| &self.text[p.start as usize..p.end as usize]);
                    if matches!(prev_s, Some("def" | "class")) {
                        item.name = Some((t.start, t.end));
                    }
                } else if !after_dot && matches!(s, "def" | "class") {
                    item.summary.nested_code = true;
                }
                if !after_dot && s == "lambda" {
                    item.summary.nested_code = true;
                }
                if !after_dot && s == "import" {
                    item.summary.imports = true;
                }
                let b = s.as_bytes();
                let inplace_name = b.len() >= 2 && b[b.len() - 1] == b'_' && b[b.len() - 2] != b'_';
                // (`y.__iadd__(1)`, `operator.iadd(y, 1)` too.)
                let inplace_other =
                    || ops::inplace_dunder(s).is_some() || ops::inplace_operator(s).is_some();
                if after_dot && (inplace_name || inplace_other()) {
                    *seeds |= Seeds::INPLACE_CALL;
                } else if inplace_name {
                    self.pending = Pending::InplaceName;
                }
                let special = SPECIAL.get(&h).filter(|(w, _)| *w == s).map(|(_, k)| *k);
                match special {
                    Some(Special::Inplace) => *seeds |= Seeds::INPLACE_ARG,
                    Some(Special::Out) if t.depth > 0 && !after_dot => {
                        self.pending = Pending::OutKeyword
                    }
                    Some(Special::Step) if after_dot => self.pending = Pending::Step,
                    Some(Special::Load) if after_dot => self.pending = Pending::Load,
                    Some(Special::SelfName) if !after_dot => self.pending = Pending::SelfCall,
                    Some(Special::Data) if after_dot && !self.import_line => *seeds |= Seeds::DATA,
                    Some(Special::Grad) if after_dot => *seeds |= Seeds::GRAD,
                    Some(Special::Optim) => *seeds |= Seeds::OPTIM,
                    Some(Special::Setattr) => *seeds |= Seeds::SETATTR,
                    Some(Special::True) => self.scans[cur as usize].has_true = true,
                    Some(Special::Activation) => {
                        self.scans[cur as usize].has_positional_activation = true
                    }
                    _ => {}
                }
                if self.text_has_anomaly && s.contains("anomaly") {
                    *seeds |= Seeds::ANOMALY;
                }
            }
            Tk::Op => {
                if s.len() >= 2
                    && s.ends_with('=')
                    && !matches!(s, "==" | "!=" | "<=" | ">=" | ":=")
                {
                    *seeds |= Seeds::AUG_ASSIGN;
                }
                // A subscript store is at depth 0 (in parentheses `] =` is a parameter's
                // annotated default) and not after an annotation.
                if s == "="
                    && t.depth == 0
                    && !self.annotated
                    && self
                        .prev
                        .is_some_and(|p| p.kind == Tk::Close && prev_byte(&p) == b']')
                    && !self.string_key
                {
                    *seeds |= Seeds::SUBSCRIPT_STORE;
                }
                if s == ":" && t.depth == 0 {
                    if self.compound_line {
                        // The header ends; an inline body follows (`if c: x[0] = 1`).
                        self.compound_line = false;
                    } else {
                        self.annotated = true;
                    }
                }
                if s == "*"
                    && self
                        .prev
                        .is_some_and(|p| &self.text[p.start as usize..p.end as usize] == "import")
                {
                    item.summary.star_import = true;
                }
                if s == ";" {
                    self.annotated = false;
                    self.import_line = false;
                }
            }
            Tk::Open => self.brackets.push((self.tokens, s == "[")),
            Tk::Close => {
                let open = self.brackets.pop();
                self.string_key = match open {
                    Some((at, true)) => self.tokens == at + 2 && self.last_was_string,
                    _ => false,
                };
            }
            _ => {}
        }
        self.last_was_string = t.kind == Tk::Str;
        // What a following `.` would be an attribute of.
        let is = |b: u8| t.end == t.start + 1 && self.text.as_bytes()[t.start as usize] == b;
        self.receiver = match (self.receiver, t.kind) {
            (_, Tk::Name) if !after_dot && s == "self" => Receiver::SelfName,
            (_, Tk::Name) if !after_dot && s == "super" => Receiver::SuperOpen,
            (Receiver::SuperOpen, Tk::Open) if is(b'(') => Receiver::SuperOpen,
            (Receiver::SuperOpen, Tk::Close) if is(b')') => Receiver::SuperCall,
            (r @ (Receiver::SelfName | Receiver::SuperCall), Tk::Op) if is(b'.') => r,
            _ => Receiver::Other,
        };
    }

    /// Decide a pending token by the one after it (`None` at the end of a line).
    fn settle_pending(&mut self, next: Option<(Tk, &str)>) {
        let pending = std::mem::replace(&mut self.pending, Pending::None);
        let Some(cur) = self.cur else { return };
        let s = next.map(|(_, s)| s);
        let summary = &mut self.out.items[cur as usize].summary;
        match (pending, s) {
            (Pending::InplaceName, Some("(")) => summary.seeds.0 |= Seeds::INPLACE_CALL,
            (Pending::OutKeyword, Some("=")) => summary.seeds.0 |= Seeds::OUT_ARG,
            (Pending::Step, Some("(")) => summary.seeds.0 |= Seeds::STEP,
            (Pending::Load, Some("(")) => summary.seeds.0 |= Seeds::LOAD,
            (Pending::SelfCall, Some("(")) => summary.calls_self = true,
            _ => {}
        }
    }

    fn finish(&mut self) {
        self.settle_pending(None);
        if let Some(c) = self.header_of.take() {
            self.out.items[c as usize].header_end = self.out.items[c as usize].end;
        }
        for (item, scan) in self.out.items.iter_mut().zip(&self.scans) {
            if scan.has_true && scan.has_positional_activation {
                item.summary.seeds.0 |= Seeds::INPLACE_ARG;
            }
            item.summary.has_true = scan.has_true;
            let sm = &mut item.summary;
            for v in [
                &mut sm.names,
                &mut sm.attrs,
                &mut sm.self_attrs,
                &mut sm.super_attrs,
            ] {
                v.sort_unstable();
                v.dedup();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Vec<String> {
        let o = outline(text);
        o.items
            .iter()
            .map(|i| {
                let name = i
                    .name
                    .map(|(s, e)| text[s as usize..e as usize].to_string())
                    .unwrap_or_default();
                let parent = i.parent.map(|p| format!(" in {p}")).unwrap_or_default();
                format!(
                    "{:?} {name}{parent}: {:?}",
                    i.kind,
                    &text[i.start as usize..i.end as usize]
                )
            })
            .collect()
    }

    /// Random edits of a text full of the shapes that decide where items start and end:
    /// `reoutline` gives what `outline` gives.
    #[test]
    fn reoutline_is_outline() {
        let base = "import torch\n\n@dec\ndef f(x):\n    if x:\n        return 1\n# noqa: IP101\n    else:\n        y = x.add_(1)  # noqa\n        return 2\n\nclass A(B):\n    '''doc'''\n    k = [1,\n  2]\n\n    @property\n    def p(self):\n        return \"\"\"a\n\nb\"\"\"\n\n    async def q(self): pass\n    class N:\n        def r(self): pass\nif a:\n    pass\nelse:\n    x[0] = 1\nclass C: pass\nx = 1; y = 2 \\\n  + 3\nz = f'{a}'\n";
        let pieces = [
            "\n",
            " ",
            "    ",
            "else:",
            "elif x:",
            "@d\n",
            "def g():",
            "class K:",
            "(",
            ")",
            "[",
            "]",
            "\"",
            "'''",
            "\"\"\"",
            "#",
            "# noqa",
            "\\",
            "x",
            "+= 1",
            ".add_(",
            "é",
            "torch",
            "try:",
            "except:",
            "\r\n",
            "import ReLU as",
            "ReLU as A\n",
        ];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n as u64) as usize
        };
        let mut text = base.to_string();
        let mut o = outline(&text);
        let mut spliced = 0;
        for round in 0..4000 {
            if round % 200 == 0 {
                text = base.to_string();
                o = outline(&text);
            }
            let mut edited = text.clone();
            // Half the edits at the start of a line (where items start and join).
            let mut at = next(edited.len() + 1);
            while !edited.is_char_boundary(at) {
                at -= 1;
            }
            if next(2) == 0 {
                at = edited[..at].rfind('\n').map_or(0, |i| i + 1);
            }
            if next(3) == 0 && at < edited.len() {
                let mut end = (at + 1 + next(8)).min(edited.len());
                while !edited.is_char_boundary(end) {
                    end += 1;
                }
                edited.replace_range(at..end, "");
            } else {
                edited.insert_str(at, pieces[next(pieces.len())]);
            }
            let fresh = outline(&edited);
            let re = reoutline(&text, &o, &edited);
            spliced += usize::from(splice(&text, &o, &edited).is_some());
            assert_eq!(re, fresh, "round {round}: {text:?} -> {edited:?}");
            text = edited;
            o = re;
        }
        // Most edits are spliced (the test would prove nothing if all fell back).
        assert!(spliced > 2000, "{spliced}");
    }

    #[test]
    fn items_of_a_module_and_its_classes() {
        let text = "import torch\n\n@dec\n@dec2(1)\ndef f(x):\n    if x:\n        return 1\n# col 0\n    else:\n        return 2\n\nclass A(B):\n    '''doc'''\n    k = 1\n\n    @property\n    def p(self):\n        return 1\n\n    async def q(self): pass\n    class N:\n        def r(self): pass\n    def s(self):\n        pass\nif a:\n    pass\nelse:\n    pass\nclass C: pass\nx = 1; y = 2\n";
        assert_eq!(
            shape(text),
            [
                "Statement : \"import torch\"",
                "Function f: \"@dec\\n@dec2(1)\\ndef f(x):\\n    if x:\\n        return 1\\n# col 0\\n    else:\\n        return 2\"",
                "Class A: \"class A(B):\\n    '''doc'''\\n    k = 1\\n\\n    @property\\n    def p(self):\\n        return 1\\n\\n    async def q(self): pass\\n    class N:\\n        def r(self): pass\\n    def s(self):\\n        pass\"",
                "Statement  in 2: \"'''doc'''\"",
                "Statement  in 2: \"k = 1\"",
                "Function p in 2: \"@property\\n    def p(self):\\n        return 1\"",
                "Function q in 2: \"async def q(self): pass\"",
                "Class N in 2: \"class N:\\n        def r(self): pass\"",
                "Function r in 7: \"def r(self): pass\"",
                "Function s in 2: \"def s(self):\\n        pass\"",
                "Statement : \"if a:\\n    pass\\nelse:\\n    pass\"",
                "Class C: \"class C: pass\"",
                "Statement : \"x = 1; y = 2\"",
            ]
        );
    }

    #[test]
    fn activation_aliases() {
        let o = outline(
            "from torch.nn import ReLU as Act, Linear as L\nimport torch as T\nx = Act(True)\n",
        );
        let s = |i: usize| &o.items[i].summary;
        assert_eq!(s(0).activation_aliases, vec![name_hash("Act")]);
        assert!(s(1).activation_aliases.is_empty());
        assert!(s(2).has_true && s(2).uses_name(name_hash("Act")));
        assert!(!s(2).seeds.any());
    }

    #[test]
    fn seeds_and_names() {
        let o = outline(
            "def f(x):\n    d['k'] = 1\n    y = torch.relu_(x)\n    return y\ndef g(m):\n    m[0] = 1\n    opt.step()\n    self(x)\ndef h(x):\n    n += 1\n    z = nn.ReLU(True)\n    w = F.relu(x, inplace=False)\n    torch.add(a, b, out=c)\n",
        );
        let s: Vec<_> = o.items.iter().map(|i| i.summary.seeds.0).collect();
        assert_eq!(s[0], Seeds::INPLACE_CALL);
        assert_eq!(s[1], Seeds::SUBSCRIPT_STORE | Seeds::STEP);
        assert!(o.items[1].summary.calls_self);
        assert_eq!(
            s[2],
            Seeds::AUG_ASSIGN | Seeds::INPLACE_ARG | Seeds::OUT_ARG
        );
        assert!(o.items[0].summary.uses_name(name_hash("torch")));
        assert!(o.items[0].summary.uses_attr(name_hash("relu_")));
        let m = outline("class A(B):\n    def f(self):\n        self.g(); super().__init__(); x.h(); self.a.k()\n");
        let s = &m.items[1].summary;
        assert_eq!(
            s.self_attrs,
            [name_hash("a"), name_hash("g")]
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        assert_eq!(s.super_attrs, [name_hash("__init__")]);
        assert!(s.attrs.contains(&name_hash("h")) && s.attrs.contains(&name_hash("k")));
        assert!(!o.items[0].summary.uses_name(name_hash("relu_")));
    }

    #[test]
    fn a_module_named_data_is_not_a_data_access() {
        let data = |t: &str| outline(t).items[0].summary.seeds.has(Seeds::DATA);
        assert!(!data("from timm.data import IMAGENET_DEFAULT_MEAN\n"));
        assert!(!data("import torch.utils.data as tud\n"));
        assert!(!data("from .data import load\n"));
        assert!(data("w = layer.weight.data\n"));
        assert!(data("import copy; w = layer.weight.data\n"));
        assert!(data("def f(p):\n    p.data.zero_()\n"));
    }

    #[test]
    fn subscript_stores_are_statements_not_annotations() {
        let seeds = |t: &str| {
            outline(t).items[0]
                .summary
                .seeds
                .has(Seeds::SUBSCRIPT_STORE)
        };
        assert!(!seeds("def f(x: Optional[Tensor] = None):\n    return x\n"));
        assert!(!seeds("def f():\n    d: Dict[str, int] = {}\n"));
        assert!(!seeds("def f():\n    d['k'] = 1\n"));
        assert!(seeds("def f(x):\n    x[0] = 1\n"));
        assert!(seeds("def f(x):\n    if x: x[0] = 1\n"));
        assert!(seeds("def f(x):\n    y: int = 1; x[1:2] = 0\n"));
    }

    #[test]
    fn unterminated_and_odd_input_still_outline() {
        for text in [
            "def f(:\n  x = '''\n",
            "\0\0 $$ = = 1\nclass 1:\n",
            "    indented = 1\nx = (1,\n",
            "@dec\nx = 1\n",
            "class A:\nclass B:\n  pass\n",
        ] {
            let o = outline(text);
            for i in &o.items {
                assert!(
                    i.start <= i.end && (i.end as usize) <= text.len(),
                    "{text:?}"
                );
            }
        }
    }
}
