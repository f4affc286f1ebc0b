//! Position conversions and incremental edits, as the server does them for `didChange`: an
//! arbitrary start text and a sequence of edits with arbitrary (often out-of-range) LSP ranges in
//! each position encoding. Conversions must stay inside the text on character boundaries and
//! round-trip; the incrementally edited document must equal the same edits applied to a plain
//! string, and the incremental analysis (which reuses the items and units an edit did not touch)
//! must equal a fresh analysis of the final text.
#![no_main]

use arbitrary::Arbitrary;
use inplace_analysis::{analyze_text, Encoding, FileState, LineIndex};
use inplace_server::document::Document;
use libfuzzer_sys::fuzz_target;
use tower_lsp_server::ls_types::{Position, Range, TextDocumentContentChangeEvent};

#[derive(Arbitrary, Debug)]
struct Input {
    text: String,
    encoding: u8,
    edits: Vec<(u16, u16, u16, u16, String)>,
    probes: Vec<(u16, u16)>,
}

fn encoding(n: u8) -> Encoding {
    match n % 3 {
        0 => Encoding::Utf8,
        1 => Encoding::Utf16,
        _ => Encoding::Utf32,
    }
}

fuzz_target!(|input: Input| {
    let enc = encoding(input.encoding);
    let lines = LineIndex::new(&input.text);
    for &(line, col) in &input.probes {
        let off = lines.offset(&input.text, line as usize, col as usize, enc);
        assert!(off <= input.text.len() && input.text.is_char_boundary(off));
        let (l, c) = lines.position(&input.text, off, enc);
        assert_eq!(
            lines.offset(&input.text, l, c, enc),
            off,
            "position round trip"
        );
    }

    let mut doc = Document::new(input.text.clone(), 0);
    let mut state = FileState::new();
    state.analyze(&doc.text);
    let mut plain = input.text.clone();
    for (version, (l0, c0, l1, c1, text)) in input.edits.into_iter().take(16).enumerate() {
        let range = Range {
            start: Position::new(l0 as u32, c0 as u32),
            end: Position::new(l1 as u32, c1 as u32),
        };
        // The same clamping the server documents: positions clamp into the text, an end before
        // the start is the start.
        let index = LineIndex::new(&plain);
        let start = index.offset(&plain, l0 as usize, c0 as usize, enc);
        let end = index
            .offset(&plain, l1 as usize, c1 as usize, enc)
            .max(start);
        plain.replace_range(start..end, &text);
        doc.apply(
            vec![TextDocumentContentChangeEvent {
                range: Some(range),
                range_length: None,
                text,
            }],
            version as i32 + 1,
            enc,
        );
        assert_eq!(&*doc.text, plain.as_str(), "incremental text differs");
        state.analyze(&doc.text);
    }
    let incremental = state.analyze(&doc.text).findings;
    let fresh = analyze_text(&doc.text).findings;
    assert_eq!(
        incremental, fresh,
        "incremental analysis differs from a fresh one"
    );
});
