//! `torch.distributions`: `Normal`, `Bernoulli`, `Categorical` (and `OneHotCategorical`,
//! `Independent` around them) as objects keeping the tensors they were given, whose methods
//! save what torch's formulas save (measured with torch 2.15, `torch.distributions` of 2.15):
//!
//! | distribution | saved for backward |
//! |---|---|
//! | `Normal(loc, scale)` | `scale` by `log_prob`, `entropy`, `variance`; nothing by `rsample`; `mean`/`stddev` are `loc`/`scale` themselves |
//! | `Bernoulli(logits=l)` | `l` by `log_prob`, `entropy`; `probs` (= `mean`) is a sigmoid output, saved by the sigmoid |
//! | `Bernoulli(probs=p)` | `p` by `logits`, `log_prob`, `entropy`, `variance`; `mean`/`probs` are `p` itself |
//! | `Categorical(logits=l)` | `l`, at construction (its `logsumexp` normalisation); `probs` is a softmax output |
//! | `Categorical(probs=p)` | `p`, at construction (its division by the sum) |
//!
//! So writing in place into a distribution's parameter, or into the `.probs` or `.mean` read
//! out of it, is found like any other write into a saved tensor (the discount of Dreamer's
//! `Bernoulli` head, dreamer-pytorch#62). Other distributions stay opaque: a call on them
//! gives a value carrying their arguments' history.

use super::tensor::CallForm;
use super::*;
use crate::ops::Saves as OpSaves;

/// The last part of a `torch.distributions` path, when it is one modelled here.
fn kind_of(path: &str) -> Option<DistKind> {
    let rest = path.strip_prefix("torch.distributions.")?;
    match rest.rsplit('.').next()? {
        "Normal" => Some(DistKind::Normal),
        "Bernoulli" => Some(DistKind::Bernoulli),
        "Categorical" | "OneHotCategorical" => Some(DistKind::Categorical),
        _ => None,
    }
}

const SAVES_INPUT: OpSaves = OpSaves {
    result: false,
    input: true,
    other: false,
};
const SAVES_BOTH: OpSaves = OpSaves {
    result: false,
    input: true,
    other: true,
};
const SAVES_RESULT: OpSaves = OpSaves {
    result: true,
    input: false,
    other: false,
};

impl Interp<'_, '_> {
    /// A call of `torch.distributions.<path>`, when it is modelled: the distribution, the
    /// base distribution of `Independent(base, n)`, or `kl_divergence(p, q)`.
    pub(super) fn distribution_call(
        &mut self,
        path: &str,
        args: &Args,
        call: Span,
    ) -> Option<Vals> {
        let rest = path.strip_prefix("torch.distributions.")?;
        match rest.rsplit('.').next()? {
            "Independent" => {
                let base = args.first()?;
                base.iter()
                    .all(|v| matches!(self.obj(*v), Obj::Dist(_)))
                    .then(|| base.clone())
            }
            "kl_divergence" => self.kl_divergence(args, call),
            _ => {
                let kind = kind_of(path)?;
                Some(smallvec![self.new_distribution(kind, args, call)])
            }
        }
    }

    fn new_distribution(&mut self, kind: DistKind, args: &Args, call: Span) -> ObjId {
        let form = CallForm::Functional;
        let given = |me: &Self, pos: usize, kw: &str| {
            me.operand(args, form, pos, &[kw])
                .filter(|v| !v.iter().all(|x| *x == NONE))
        };
        let (first, second) = match kind {
            DistKind::Normal => (
                given(self, 0, "loc").unwrap_or_default(),
                given(self, 1, "scale").unwrap_or_default(),
            ),
            DistKind::Bernoulli => match (given(self, 0, "probs"), given(self, 1, "logits")) {
                (Some(p), _) => {
                    let l = "Bernoulli(probs=...).logits";
                    let logits = self.derive_dist(std::slice::from_ref(&p), call, SAVES_INPUT, l);
                    (smallvec![logits], p)
                }
                (None, Some(l)) => {
                    let label = "Bernoulli(logits=...).probs";
                    let probs =
                        self.derive_dist(std::slice::from_ref(&l), call, SAVES_RESULT, label);
                    (l, smallvec![probs])
                }
                (None, None) => (Vals::new(), Vals::new()),
            },
            DistKind::Categorical => match (given(self, 0, "probs"), given(self, 1, "logits")) {
                (Some(p), _) => {
                    let probs = self.derive_dist(&[p], call, SAVES_INPUT, "Categorical(probs=...)");
                    let probs: Vals = smallvec![probs];
                    let l = "Categorical(probs=...).logits";
                    let logits =
                        self.derive_dist(std::slice::from_ref(&probs), call, SAVES_INPUT, l);
                    (smallvec![logits], probs)
                }
                (None, Some(l)) => {
                    let label = "Categorical(logits=...)";
                    let logits: Vals = smallvec![self.derive_dist(&[l], call, SAVES_INPUT, label)];
                    let p = "Categorical(logits=...).probs";
                    let probs =
                        self.derive_dist(std::slice::from_ref(&logits), call, SAVES_RESULT, p);
                    (logits, smallvec![probs])
                }
                (None, None) => (Vals::new(), Vals::new()),
            },
        };
        self.alloc(Obj::Dist(Box::new(DistObj {
            kind,
            first,
            second,
            origin: call,
        })))
    }

    fn derive_dist(
        &mut self,
        inputs: &[Vals],
        at: Span,
        saves: OpSaves,
        label: &'static str,
    ) -> ObjId {
        self.derive(inputs, at, saves, Some(OpLabel::Static(label)), true)
    }

    /// `d.<attr>` of a distribution: the tensors it keeps, or what a property computes.
    pub(super) fn distribution_attribute(&mut self, d: ObjId, attr: Name, at: Span) -> Vals {
        let Obj::Dist(dist) = self.obj(d) else {
            return smallvec![UNKNOWN];
        };
        let (kind, first, second) = (dist.kind, dist.first.clone(), dist.second.clone());
        match (kind, self.name(attr)) {
            (DistKind::Normal, "loc" | "mean" | "mode") => first,
            (DistKind::Normal, "scale" | "stddev") => second,
            (DistKind::Bernoulli | DistKind::Categorical, "logits") => first,
            (DistKind::Bernoulli | DistKind::Categorical, "probs") => second,
            (DistKind::Bernoulli, "mean") => second,
            (DistKind::Normal | DistKind::Bernoulli, "variance") => {
                let label = OpLabel::Method(attr);
                smallvec![self.derive(&[second, first], at, SAVES_INPUT, Some(label), true)]
            }
            _ => {
                let label = OpLabel::Method(attr);
                smallvec![self.derive(&[first, second], at, OpSaves::default(), Some(label), false)]
            }
        }
    }

    /// `d.<attr>(args)` of a distribution.
    pub(super) fn distribution_method(
        &mut self,
        d: ObjId,
        attr: Name,
        args: &Args,
        call: Span,
    ) -> Vals {
        let Obj::Dist(dist) = self.obj(d) else {
            return smallvec![UNKNOWN];
        };
        let (kind, first, second) = (dist.kind, dist.first.clone(), dist.second.clone());
        let mut given = Vals::new();
        for v in args.all_values() {
            given.extend(self.flat_tensors(v));
        }
        let label = Some(OpLabel::Method(attr));
        let out = match (kind, self.name(attr)) {
            // Draws carry no graph.
            (_, "sample" | "sample_n" | "enumerate_support") => self.new_leaf(false, call),
            (DistKind::Normal, "log_prob" | "entropy") => {
                let rest: Vals = first.into_iter().chain(given).collect();
                self.derive(&[second, rest], call, SAVES_INPUT, label, true)
            }
            (DistKind::Normal, "rsample") => {
                self.derive(&[first, second], call, OpSaves::default(), label, true)
            }
            // (`binary_cross_entropy_with_logits` saves the logits and the target.)
            (DistKind::Bernoulli, "log_prob") => {
                self.derive(&[first, given], call, SAVES_BOTH, label, true)
            }
            (DistKind::Bernoulli, "entropy") => {
                self.derive(&[first, second], call, SAVES_BOTH, label, true)
            }
            // (A gather from the logits by the sample, which carries no grad.)
            (DistKind::Categorical, "log_prob") => {
                self.derive(&[first], call, OpSaves::default(), label, true)
            }
            (DistKind::Categorical, "entropy") => {
                self.derive(&[first, second], call, SAVES_BOTH, label, true)
            }
            _ => {
                let rest: Vals = second.into_iter().chain(given).collect();
                self.derive(&[first, rest], call, OpSaves::default(), label, false)
            }
        };
        smallvec![out]
    }

    /// `kl_divergence(p, q)`: for two `Normal`s, `(p.scale / q.scale) ** 2`: the division
    /// saves `q.scale` when `p.scale` requires grad and `p.scale` when `q.scale` does (a fixed
    /// prior's constant scale makes it save no tensor of the caller); for `Categorical`s and
    /// `Bernoulli`s, `p.probs * (p.logits - q.logits)` saves the probs of `p`; otherwise the
    /// result only carries the history of what they keep.
    fn kl_divergence(&mut self, args: &Args, call: Span) -> Option<Vals> {
        let (p, q) = (args.positional.first()?, args.positional.get(1)?);
        let dists = |me: &Self, vals: &Vals| -> Option<Vec<DistObj>> {
            vals.iter()
                .map(|v| match me.obj(*v) {
                    Obj::Dist(d) => Some((**d).clone()),
                    _ => None,
                })
                .collect()
        };
        let (ps, qs) = (dists(self, &p.0)?, dists(self, &q.0)?);
        let scales =
            |ds: &[DistObj]| -> Vals { ds.iter().flat_map(|d| d.second.clone()).collect() };
        let (p_second, q_second) = (scales(&ps), scales(&qs));
        let mut rest: Vals = ps.iter().chain(&qs).flat_map(|d| d.first.clone()).collect();
        let normals = ps.iter().chain(&qs).all(|d| d.kind == DistKind::Normal);
        let saved = if normals {
            let grad = |me: &Self, v: &Vals| {
                v.iter()
                    .any(|t| me.tensor(*t).is_some_and(|t| t.grad.is_possible()))
            };
            let mut saved = Vals::new();
            if grad(self, &p_second) {
                saved.extend(q_second.iter().copied());
            }
            if grad(self, &q_second) {
                saved.extend(p_second.iter().copied());
            }
            rest.extend(p_second.iter().chain(&q_second).copied());
            saved
        } else {
            rest.extend(q_second);
            p_second
        };
        let label = Some(OpLabel::Static("kl_divergence"));
        Some(smallvec![self.derive(
            &[saved, rest],
            call,
            SAVES_INPUT,
            label,
            true
        )])
    }
}
