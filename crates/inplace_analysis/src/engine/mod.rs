//! The flow-sensitive abstract interpreter behind every rule. See the crate docs for the model.

mod interp;
pub(crate) mod model;
mod torch_api;

use crate::finding::Finding;
use crate::rules::{self, Ctx};

/// Analyse a parsed module: the module body in order, then every function and method on its
/// own with unknown arguments.
pub(crate) fn run(
    ctx: Ctx<'_>,
    root: tree_sitter::Node<'_>,
) -> (Vec<Finding>, Vec<crate::InplaceSite>, u64) {
    let mut it = interp::Interp::new(ctx);
    it.run_module(root);
    let steps = it.total_steps + it.steps + model::take_join_work();
    let mut reads: Vec<_> = it
        .data_reads
        .iter()
        .filter(|(_, written)| !**written)
        .map(|(r, _)| *r)
        .collect();
    reads.sort();
    for r in reads {
        let f = rules::ip401_data_bypass::read_finding(&it.ctx, r);
        it.report(f);
    }
    let mut out: Vec<Finding> = it.findings.into_values().collect();
    out.sort_by_key(|f| (f.range, f.rule));
    // One form ③ finding per write: the most specific rule (IP303/IP304 name the kind of
    // write; IP301 over IP302 when it clobbered both an output and an input).
    let form3 = |r: crate::Rule| matches!(r.code(), "IP301" | "IP302" | "IP303" | "IP304");
    let rank = |r: crate::Rule| match r.code() {
        "IP303" | "IP304" => 0,
        "IP301" => 1,
        _ => 2,
    };
    let mut best: rustc_hash::FxHashMap<crate::TextRange, crate::Rule> = Default::default();
    for f in out.iter().filter(|f| form3(f.rule)) {
        let e = best.entry(f.range).or_insert(f.rule);
        if rank(f.rule) < rank(*e) {
            *e = f.rule;
        }
    }
    out.retain(|f| !form3(f.rule) || best.get(&f.range) == Some(&f.rule));
    let mut sites: Vec<crate::InplaceSite> = it
        .sites
        .into_iter()
        .map(|(range, names)| crate::InplaceSite {
            range,
            names: names.into_iter().collect(),
        })
        .collect();
    sites.sort_by_key(|s| s.range);
    (out, sites, steps)
}
