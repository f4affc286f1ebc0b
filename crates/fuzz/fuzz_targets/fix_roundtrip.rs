//! Fix application on structurally mutated Python: each fix that passes verification (what the
//! server offers and `--fix` applies), applied alone, must give text with no more syntax errors
//! than before, and the analysis of the result must not offer a fix for the same finding again
//! (same rule at the same, shifted, place). Seeds: `tests/fixtures/**/*.py`, mutated by the same
//! tree-sitter-aware splicing as `analyze_splice`.
#![no_main]

use inplace_analysis::{analyze_source, apply_fixes, verify_fix, Applicability};
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let findings = analyze_source(text);
    inplace_fuzz::check_findings(text, &findings);
    let before = inplace_fuzz::syntax_errors(text);
    for f in findings.iter().filter(|f| f.fix.is_some()) {
        let fix = f.fix.as_ref().unwrap();
        let (fixed, used) = apply_fixes(text, std::slice::from_ref(f), Applicability::Unsafe);
        if fix.applicability == Applicability::DisplayOnly {
            assert!(used.is_empty(), "a display-only fix was applied");
            continue;
        }
        assert_eq!(used.len(), 1, "{}: its fix was not applied", f.rule.code());
        if verify_fix(text, f).is_err() {
            // Not offered: verification (where fixes are used) turned it down.
            continue;
        }
        let after = inplace_fuzz::syntax_errors(&fixed);
        assert!(
            after <= before,
            "{} fix `{}` adds syntax errors ({before} -> {after}):\n--- before\n{text}\n--- after\n{fixed}",
            f.rule.code(),
            fix.title
        );
        // Where the finding's start lands after the edits.
        let mut at = f.range.start as isize;
        for e in &fix.edits {
            if e.range.end <= f.range.start {
                at += e.content.len() as isize - (e.range.end - e.range.start) as isize;
            } else if e.range.start <= f.range.start {
                at = e.range.start as isize;
            }
        }
        let again = analyze_source(&fixed);
        inplace_fuzz::check_findings(&fixed, &again);
        let repeat = again
            .iter()
            .find(|g| g.rule == f.rule && g.range.start as isize == at && g.fix.is_some());
        assert!(
            repeat.is_none(),
            "{} fix `{}` is offered again after it was applied:\n{fixed}",
            f.rule.code(),
            fix.title
        );
    }
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    inplace_fuzz::mutate(data, size, max_size, seed, fuzzer_mutate)
});
