//! The analyzer on arbitrary bytes, as `check` and the server see them: text that is not UTF-8
//! is analysed after lossy decoding (the server only ever holds valid UTF-8). No panic, no hang,
//! and every finding keeps the invariants of `inplace_fuzz::check_findings`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let analysis = inplace_analysis::analyze_source(&text);
    inplace_fuzz::check_findings(&text, &analysis);
});
