//! An open document: its text, version and line index, kept up to date by incremental edits
//! in the position encoding the client negotiated. The analysis state (which reuses the items
//! and units an edit did not change) lives beside it in the session.

use inplace_analysis::{Encoding, LineIndex};
use std::sync::Arc;
use tower_lsp_server::ls_types::{Position, Range, TextDocumentContentChangeEvent};

pub struct Document {
    /// Shared with the analysis state, which compares the next version with it.
    pub text: Arc<str>,
    pub version: i32,
    pub lines: LineIndex,
}

impl Document {
    pub fn new(text: String, version: i32) -> Self {
        let lines = LineIndex::new(&text);
        Document {
            text: text.into(),
            version,
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

    /// Apply `didChange` edits in order.
    pub fn apply(
        &mut self,
        changes: Vec<TextDocumentContentChangeEvent>,
        version: i32,
        enc: Encoding,
    ) {
        for change in changes {
            match change.range {
                None => self.text = change.text.into(),
                Some(range) => {
                    let start = self.offset(range.start, enc);
                    let end = self.offset(range.end, enc).max(start);
                    let old = &self.text;
                    let mut text =
                        String::with_capacity(old.len() - (end - start) + change.text.len());
                    text.push_str(&old[..start]);
                    text.push_str(&change.text);
                    text.push_str(&old[end..]);
                    self.text = text.into();
                }
            }
            self.lines = LineIndex::new(&self.text);
        }
        self.version = version;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lsp_server::ls_types::Position;

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
    fn incremental_edits_in_utf16() {
        let mut doc = Document::new("# 注释 😀\nx = 1\n".into(), 1);
        // Insert after the emoji (UTF-16: "# 注释 " is 5 units, the emoji 2).
        doc.apply(
            vec![
                change(0, 7, 0, 7, "!"),
                change(1, 4, 1, 5, "torch.zeros(3)"),
            ],
            2,
            Encoding::Utf16,
        );
        assert_eq!(&*doc.text, "# 注释 😀!\nx = torch.zeros(3)\n");
        assert_eq!(doc.version, 2);
        assert_eq!(doc.lines.line_count(), 3);
    }
}
