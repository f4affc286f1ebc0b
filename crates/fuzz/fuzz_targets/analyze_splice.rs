//! The analyzer on real Python mutated structurally: nodes of the fixture corpus spliced into
//! each other by kind (tree-sitter-aware), so the fuzzer explores programs that parse and reach
//! deep into the interpreter (modules, loops, optimizers, hooks) rather than syntax errors.
//! Seeds: `tests/fixtures/**/*.py`.
#![no_main]

use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let analysis = inplace_analysis::analyze_source(text);
    inplace_fuzz::check_findings(text, &analysis);
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    inplace_fuzz::mutate(data, size, max_size, seed, fuzzer_mutate)
});
