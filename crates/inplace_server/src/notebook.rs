//! An open notebook (LSP 3.17 notebook synchronisation): its cells in order, each code cell's
//! text as a [`Document`] of its own (positions arrive and leave in cell coordinates), and the
//! code cells joined into the one program the analysis reads.

use crate::document::Document;
use inplace_analysis::notebook::NotebookSource;
use inplace_analysis::{Encoding, TextRange};
use std::sync::Arc;
use tower_lsp_server::ls_types::{
    DidChangeNotebookDocumentParams, Location, NotebookCell, NotebookCellKind, Position,
    TextDocumentItem, Uri,
};

/// The cells a change added to a notebook and the ones it took away (a moved cell is in
/// `added` only).
#[derive(Default)]
pub struct CellList {
    pub added: Vec<Uri>,
    pub gone: Vec<Uri>,
}

/// One cell of an open notebook.
pub struct Cell {
    pub uri: Uri,
    /// A code cell (not markup).
    pub code: bool,
    /// The language of its text document (`python`, `markdown`, `raw`, ...).
    pub language: String,
    /// The cell's own text (empty until the client sends it).
    pub doc: Document,
}

impl Cell {
    /// Analysed: a Python code cell.
    fn python(&self) -> bool {
        self.code && self.language.eq_ignore_ascii_case("python")
    }
}

pub struct NotebookDoc {
    /// Every cell, in notebook order (markup cells too: they count in cell numbers; the
    /// server asks for every cell for this reason).
    pub cells: Vec<Cell>,
    /// The code cells joined, as analysed; shared with the worker.
    pub source: Arc<NotebookSource>,
    /// Index in `cells` of each Python code cell of `source`.
    code: Vec<usize>,
}

impl NotebookDoc {
    pub fn new(cells: Vec<NotebookCell>, texts: Vec<TextDocumentItem>) -> Self {
        let mut nb = NotebookDoc {
            cells: cells.into_iter().map(cell).collect(),
            source: Arc::new(NotebookSource::new::<&str>(&[])),
            code: Vec::new(),
        };
        nb.open(texts);
        nb.join();
        nb
    }

    fn open(&mut self, texts: Vec<TextDocumentItem>) {
        for t in texts {
            if let Some(c) = self.cells.iter_mut().find(|c| c.uri == t.uri) {
                c.doc = Document::new(t.text, t.version);
                c.language = t.language_id;
            }
        }
    }

    /// Join the code cells again after a change.
    fn join(&mut self) {
        self.code = (0..self.cells.len())
            .filter(|&i| self.cells[i].python())
            .collect();
        let texts: Vec<&str> = self
            .code
            .iter()
            .map(|&i| &*self.cells[i].doc.text)
            .collect();
        let numbers = self.code.iter().map(|i| i + 1).collect();
        self.source = Arc::new(NotebookSource::new(&texts).with_numbers(numbers));
    }

    /// Apply a `notebookDocument/didChange`: cells added, removed or moved (the array change),
    /// cells whose kind changed, and text edits inside cells. Returns which cells came and
    /// which left (their diagnostics are to be cleared); a text edit changes neither.
    pub fn apply(&mut self, params: DidChangeNotebookDocumentParams, enc: Encoding) -> CellList {
        let mut list = CellList::default();
        let Some(change) = params.change.cells else {
            return list;
        };
        if let Some(s) = change.structure {
            let start = (s.array.start as usize).min(self.cells.len());
            let end = (start + s.array.delete_count as usize).min(self.cells.len());
            let added: Vec<Cell> = s
                .array
                .cells
                .unwrap_or_default()
                .into_iter()
                .map(cell)
                .collect();
            list.added.extend(added.iter().map(|c| c.uri.clone()));
            // A moved cell is deleted and inserted again: keep its text.
            let mut removed: Vec<Cell> = self.cells.splice(start..end, added).collect();
            for c in &mut self.cells[start..] {
                if let Some(old) = removed.iter().position(|r| r.uri == c.uri) {
                    let old = removed.swap_remove(old);
                    c.doc = old.doc;
                    c.language = old.language;
                }
            }
            list.gone.extend(removed.into_iter().map(|c| c.uri));
            self.open(s.did_open.unwrap_or_default());
        }
        for d in change.data.unwrap_or_default() {
            if let Some(c) = self.cells.iter_mut().find(|c| c.uri == d.document) {
                c.code = d.kind == NotebookCellKind::CODE;
            }
        }
        for t in change.text_content.unwrap_or_default() {
            if let Some(c) = self.cells.iter_mut().find(|c| c.uri == t.document.uri) {
                c.doc.apply(t.changes, t.document.version, enc);
            }
        }
        self.join();
        list
    }

    /// The analysed (Python code) cells' URIs, in order.
    pub fn code_uris(&self) -> impl Iterator<Item = &Uri> {
        self.code.iter().map(|&i| &self.cells[i].uri)
    }

    /// The code cell a range of the joined text lies in (the one its start is in), with the
    /// range in that cell's text.
    fn in_cell(&self, r: TextRange) -> Option<(&Cell, TextRange)> {
        let at = self.source.locate(r.start);
        let span = self.source.cells().get(at.cell)?;
        let cell = &self.cells[*self.code.get(at.cell)?];
        // `at.offset` is clamped into the cell; the end too (a range past the cell's end, as
        // far as the line break after it, stops at the end).
        let end = (r.end.min(span.range.end) - span.range.start).max(at.offset);
        Some((cell, TextRange::new(at.offset, end)))
    }

    /// Where a range of the joined text is for the client: its cell's URI and the range there.
    pub fn location(&self, r: TextRange, enc: Encoding) -> Option<Location> {
        let (cell, local) = self.in_cell(r)?;
        Some(Location {
            uri: cell.uri.clone(),
            range: cell.doc.range(local, enc),
        })
    }

    /// The byte offset in the joined text of a position in a code cell.
    pub fn offset(&self, uri: &Uri, pos: Position, enc: Encoding) -> Option<usize> {
        let k = self.code.iter().position(|&i| self.cells[i].uri == *uri)?;
        let cell = &self.cells[self.code[k]];
        Some(self.source.cells()[k].range.start + cell.doc.offset(pos, enc))
    }

    /// The cell with this URI.
    pub fn cell(&self, uri: &Uri) -> Option<&Cell> {
        self.cells.iter().find(|c| c.uri == *uri)
    }

    /// How a message names the line of an offset of the joined text.
    pub fn label(&self, offset: usize, lines: &inplace_analysis::LineIndex) -> String {
        self.source.cell_lines().label(lines.line_of(offset))
    }
}

fn cell(c: NotebookCell) -> Cell {
    Cell {
        code: c.kind == NotebookCellKind::CODE,
        uri: c.document,
        language: String::new(),
        doc: Document::new(String::new(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower_lsp_server::ls_types::{NotebookCell, TextDocumentItem};

    fn uri(i: usize) -> Uri {
        format!("vscode-notebook-cell:/nb.ipynb#c{i}")
            .parse()
            .unwrap()
    }

    #[test]
    fn every_offset_maps_into_a_cell() {
        let cells = ["x = 1", "", "y = 2\n"];
        let nb = NotebookDoc::new(
            (0..3)
                .map(|i| NotebookCell {
                    kind: NotebookCellKind::CODE,
                    document: uri(i),
                    metadata: None,
                    execution_summary: None,
                })
                .collect(),
            cells
                .iter()
                .enumerate()
                .map(|(i, t)| TextDocumentItem::new(uri(i), "python".into(), 1, t.to_string()))
                .collect(),
        );
        let len = nb.source.text.len();
        for start in 0..=len + 2 {
            for end in start..=len + 2 {
                let at = nb
                    .location(TextRange::new(start, end), Encoding::Utf16)
                    .unwrap();
                assert!(at.range.start <= at.range.end);
            }
        }
        // `y` of the third cell, from a position in that cell and back.
        let y = nb
            .offset(&uri(2), Position::new(0, 0), Encoding::Utf16)
            .unwrap();
        assert_eq!(&nb.source.text[y..y + 1], "y");
        let at = nb
            .location(TextRange::new(y, y + 1), Encoding::Utf16)
            .unwrap();
        assert_eq!(at.uri, uri(2));
        assert_eq!(at.range.start, Position::new(0, 0));
    }
}
