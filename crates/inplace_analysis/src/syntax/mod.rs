//! Syntax: the only part of the analysis that knows tree-sitter.
//!
//! * [`outline`]: a file's items (top-level statements, class-body statements) with what their
//!   tokens say, found by a tokenizer ([`lexer`]) without a parse;
//! * [`parse_item`]: tree-sitter's parse of one item's text (a class-body statement is parsed
//!   inside a stand-in class, so its indentation is valid);
//! * [`lower`]: that tree -> the item's [`crate::ir::Body`];
//! * [`error_count`]: how many syntax errors a text has (to verify fixes).

mod kinds;
pub(crate) mod lexer;
mod lower;
pub mod outline;

pub(crate) use kinds::NodeExt;

/// Whether `c` may be part of a Python identifier (for scans of the text, outside the lexer).
pub(crate) fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

use crate::ir::{Body, Interner};
use outline::{ItemKind, OutlineItem};
use std::borrow::Cow;
use tree_sitter::{Node, Parser, Tree};

/// A parser for Python.
pub fn python_parser() -> Parser {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("tree-sitter-python matches the tree-sitter version");
    parser
}

/// The stand-in class a class-body statement is parsed in.
const MEMBER_PREFIX: &str = "class _:\n";

/// One item's text as parsed, and its tree.
pub(crate) struct Parsed<'a> {
    pub text: Cow<'a, str>,
    pub tree: Tree,
    /// Subtract from an offset in `text` to get one relative to the item's start.
    pub shift: usize,
    /// A class-body statement (parsed inside [`MEMBER_PREFIX`]).
    pub member: bool,
    /// A class whose body was replaced by `pass`: its statements are items of their own.
    pub class_header: bool,
}

impl Parsed<'_> {
    /// The item's statements.
    pub fn statements(&self) -> Vec<Node<'_>> {
        let root = self.tree.root_node();
        let container = if self.member {
            let class = root.named_child(0).filter(|c| c.k() == "class_definition");
            match class.and_then(|c| c.field("body")) {
                Some(b) => b,
                None => return Vec::new(),
            }
        } else {
            root
        };
        let mut c = container.walk();
        container
            .named_children(&mut c)
            .filter(|n| n.k() != "comment")
            .collect()
    }
}

/// Parse one item of `text`. A class is parsed as its header alone when its body is on lines of
/// its own (those statements are items); a class-body statement inside a stand-in class.
pub(crate) fn parse_item<'a>(
    text: &'a str,
    item: &OutlineItem,
    parser: &mut Parser,
) -> Option<Parsed<'a>> {
    let member = item.start != item.line_start || item.parent.is_some();
    let class_header = item.kind == ItemKind::Class && item.header_end < item.end;
    let end = if class_header {
        item.header_end
    } else {
        item.end
    } as usize;
    let (start, line_start) = (item.start as usize, item.line_start as usize);
    let (src, shift): (Cow<'a, str>, usize) = match (member, class_header) {
        (false, false) => (Cow::Borrowed(&text[start..end]), 0),
        (false, true) => (Cow::Owned(format!("{} pass", &text[start..end])), 0),
        (true, header) => {
            let mut s = String::with_capacity(MEMBER_PREFIX.len() + end - line_start + 5);
            s.push_str(MEMBER_PREFIX);
            s.push_str(&text[line_start..end]);
            if header {
                s.push_str(" pass");
            }
            (Cow::Owned(s), MEMBER_PREFIX.len() + (start - line_start))
        }
    };
    let tree = parser.parse(src.as_bytes(), None)?;
    Some(Parsed {
        text: src,
        tree,
        shift,
        member,
        class_header,
    })
}

/// Parse and lower one item.
pub(crate) fn lower_item(
    text: &str,
    item: &OutlineItem,
    parser: &mut Parser,
    names: &mut Interner,
) -> Body {
    match parse_item(text, item, parser) {
        Some(p) => lower::lower(&p, names),
        None => Body::default(),
    }
}

/// Number of syntax errors (ERROR and MISSING nodes) in a tree.
pub fn count_errors(root: Node<'_>) -> usize {
    if !root.has_error() {
        return 0;
    }
    let mut n = 0;
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            n += 1;
        }
        if node.has_error() {
            let mut c = node.walk();
            stack.extend(node.children(&mut c));
        }
    }
    n
}

/// Whether `after` has more syntax errors than `before`: first the items of each that the other
/// does not have (an edit changes a few items), then, unless `after` parses clean, the whole
/// texts (error recovery crosses items). Used where a fix is offered or applied, not on every
/// analysis.
pub fn errors_added(before: &str, after: &str) -> bool {
    use std::collections::HashMap;
    let (a, b) = (outline::outline(before), outline::outline(after));
    // Items by version: those of `after` not in `before` and the other way round.
    let versions = |text: &str, o: &outline::Outline| -> HashMap<u128, Vec<usize>> {
        let mut m: HashMap<u128, Vec<usize>> = HashMap::new();
        for (i, it) in o.items.iter().enumerate() {
            m.entry(crate::program::version_of(text, it))
                .or_default()
                .push(i);
        }
        m
    };
    let (va, vb) = (versions(before, &a), versions(after, &b));
    let only = |m: &HashMap<u128, Vec<usize>>, other: &HashMap<u128, Vec<usize>>| -> Vec<usize> {
        let mut out = Vec::new();
        for (v, items) in m {
            let n = other.get(v).map_or(0, |o| o.len());
            out.extend(items.iter().skip(n));
        }
        out
    };
    let (gone, new) = (only(&va, &vb), only(&vb, &va));
    if gone.len() + new.len() > 8 {
        return error_count(after) > error_count(before);
    }
    let mut parser = python_parser();
    let mut count = |text: &str, o: &outline::Outline, items: &[usize]| -> usize {
        items
            .iter()
            .filter_map(|i| parse_item(text, &o.items[*i], &mut parser))
            .map(|p| count_errors(p.tree.root_node()))
            .sum()
    };
    if count(after, &b, &new) > count(before, &a, &gone) {
        return true;
    }
    // The edited items parse no worse on their own; in a whole-file parse, though, error
    // recovery can carry an error of another item into them. A file that parses clean after
    // the edit cannot have gained one; else compare the whole files.
    let whole = error_count(after);
    whole > 0 && whole > error_count(before)
}

/// Number of syntax errors in a text (a parse of its own).
pub fn error_count(text: &str) -> usize {
    python_parser()
        .parse(text, None)
        .map_or(usize::MAX, |t| count_errors(t.root_node()))
}
