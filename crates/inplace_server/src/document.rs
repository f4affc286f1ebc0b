//! An open document: its text, version, syntax tree (kept up to date incrementally) and the
//! position encoding its ranges use.

use inplace_analysis::{Encoding, LineIndex};
use tower_lsp::lsp_types::{Position, Range, TextDocumentContentChangeEvent};
use tree_sitter::{InputEdit, Parser, Point, Tree};

pub struct Document {
    pub text: String,
    pub version: i32,
    pub tree: Option<Tree>,
    pub lines: LineIndex,
}

/// A tree-sitter point (row, byte column) of a byte offset.
fn point(lines: &LineIndex, offset: usize) -> Point {
    let row = lines.line_of(offset);
    Point {
        row,
        column: offset - lines.line_start(row),
    }
}

impl Document {
    pub fn new(text: String, version: i32, parser: &mut Parser) -> Self {
        let tree = parser.parse(&text, None);
        let lines = LineIndex::new(&text);
        Document {
            text,
            version,
            tree,
            lines,
        }
    }

    /// Byte offset of an LSP position (clamped into the text).
    pub fn offset(&self, pos: Position, enc: Encoding) -> usize {
        self.lines
            .offset(&self.text, pos.line as usize, pos.character as usize, enc)
    }

    pub fn position(&self, offset: usize, enc: Encoding) -> Position {
        let (line, col) = self.lines.position(&self.text, offset, enc);
        Position {
            line: line as u32,
            character: col as u32,
        }
    }

    pub fn range(&self, r: inplace_analysis::TextRange, enc: Encoding) -> Range {
        Range {
            start: self.position(r.start, enc),
            end: self.position(r.end, enc),
        }
    }

    /// Apply `didChange` edits in order, editing the tree for each, then reparse once with the
    /// edited tree so tree-sitter reuses what did not change.
    pub fn apply(
        &mut self,
        changes: Vec<TextDocumentContentChangeEvent>,
        version: i32,
        enc: Encoding,
        parser: &mut Parser,
    ) {
        let mut incremental = true;
        for change in changes {
            match change.range {
                None => {
                    self.text = change.text;
                    self.lines = LineIndex::new(&self.text);
                    incremental = false;
                }
                Some(range) => {
                    let start = self.offset(range.start, enc);
                    let end = self.offset(range.end, enc).max(start);
                    let start_position = point(&self.lines, start);
                    let old_end_position = point(&self.lines, end);
                    self.text.replace_range(start..end, &change.text);
                    self.lines = LineIndex::new(&self.text);
                    let new_end = start + change.text.len();
                    let new_end_position = point(&self.lines, new_end);
                    if let Some(tree) = &mut self.tree {
                        tree.edit(&InputEdit {
                            start_byte: start,
                            old_end_byte: end,
                            new_end_byte: new_end,
                            start_position,
                            old_end_position,
                            new_end_position,
                        });
                    }
                }
            }
        }
        let old = if incremental {
            self.tree.as_ref()
        } else {
            None
        };
        self.tree = parser.parse(&self.text, old);
        self.version = version;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lsp::lsp_types::Position;

    fn change(l0: u32, c0: u32, l1: u32, c1: u32, text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: Some(Range {
                start: Position::new(l0, c0),
                end: Position::new(l1, c1),
            }),
            range_length: None,
            text: text.into(),
        }
    }

    #[test]
    fn incremental_edits_match_a_fresh_parse() {
        let mut parser = inplace_analysis::python_parser();
        let mut doc = Document::new("# 注释 😀\nx = 1\n".into(), 1, &mut parser);
        // Insert after the emoji (UTF-16: "# 注释 " is 5 units, the emoji 2).
        doc.apply(
            vec![
                change(0, 7, 0, 7, "!"),
                change(1, 4, 1, 5, "torch.zeros(3)"),
            ],
            2,
            Encoding::Utf16,
            &mut parser,
        );
        assert_eq!(doc.text, "# 注释 😀!\nx = torch.zeros(3)\n");
        let fresh = parser.parse(&doc.text, None).unwrap();
        assert_eq!(
            doc.tree.as_ref().unwrap().root_node().to_sexp(),
            fresh.root_node().to_sexp()
        );
        assert_eq!(doc.version, 2);
    }
}
