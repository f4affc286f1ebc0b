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
) -> (Vec<Finding>, Vec<crate::InplaceSite>) {
    let mut it = interp::Interp::new(ctx);
    it.run_module(root);
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
    let mut sites: Vec<crate::InplaceSite> = it
        .sites
        .into_iter()
        .map(|(range, names)| crate::InplaceSite {
            range,
            names: names.into_iter().collect(),
        })
        .collect();
    sites.sort_by_key(|s| s.range);
    (out, sites)
}
