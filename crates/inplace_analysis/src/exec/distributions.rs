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
                // (The logits come on first use: see `first_of`.)
                (Some(p), _) => (Vals::new(), p),
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
        let lazy_first = first.is_empty() && kind == DistKind::Bernoulli && !second.is_empty();
        self.alloc(Obj::Dist(Box::new(DistObj {
            kind,
            first,
            second,
            origin: call,
            lazy_first,
        })))
    }

    /// What distribution `d` keeps, its lazily computed first tensor made now when it was not.
    fn kept(&mut self, d: ObjId) -> Option<(DistKind, Vals, Vals)> {
        let Obj::Dist(dist) = self.obj(d) else {
            return None;
        };
        let (kind, first, second, origin) = (
            dist.kind,
            dist.first.clone(),
            dist.second.clone(),
            dist.origin,
        );
        if !dist.lazy_first {
            return Some((kind, first, second));
        }
        let label = "Bernoulli(probs=...).logits";
        let logits: Vals =
            smallvec![self.derive_dist(std::slice::from_ref(&second), origin, SAVES_INPUT, label)];
        if let Obj::Dist(dist) = self.obj_mut(d) {
            dist.first = logits.clone();
            dist.lazy_first = false;
        }
        Some((kind, logits, second))
    }

    /// Saves the first input when it may require grad (a unary op's own need).
    fn saves_if_grad(&self, vals: &Vals) -> OpSaves {
        if self.may_require_grad(vals) {
            SAVES_INPUT
        } else {
            OpSaves::default()
        }
    }

    fn may_require_grad(&self, vals: &Vals) -> bool {
        vals.iter()
            .any(|t| self.tensor(*t).is_some_and(|t| t.grad.is_possible()))
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
        // (Reading what is kept as it is computes nothing.)
        if let Obj::Dist(dist) = self.obj(d) {
            match (dist.kind, self.name(attr)) {
                (DistKind::Normal, "loc" | "mean" | "mode") => return dist.first.clone(),
                (DistKind::Normal, "scale" | "stddev") => return dist.second.clone(),
                (DistKind::Bernoulli | DistKind::Categorical, "probs")
                | (DistKind::Bernoulli, "mean") => return dist.second.clone(),
                _ => {}
            }
        }
        let Some((kind, first, second)) = self.kept(d) else {
            return smallvec![UNKNOWN];
        };
        match (kind, self.name(attr)) {
            (DistKind::Bernoulli | DistKind::Categorical, "logits") => first,
            // (`scale ** 2`; `probs * (1 - probs)`.)
            (DistKind::Normal | DistKind::Bernoulli, "variance") => {
                let label = OpLabel::Method(attr);
                let saves = self.saves_if_grad(&second);
                smallvec![self.derive(&[second], at, saves, Some(label), true)]
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
            // (`scale.log()` and `scale ** 2` save `scale` when it requires grad.)
            (DistKind::Normal, "log_prob") => {
                let rest: Vals = first.into_iter().chain(given).collect();
                let saves = self.saves_if_grad(&second);
                self.derive(&[second, rest], call, saves, label, true)
            }
            (DistKind::Normal, "entropy") => {
                let saves = self.saves_if_grad(&second);
                self.derive(&[second], call, saves, label, true)
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

    /// `kl_divergence(p, q)`: for two `Normal`s, `q.scale` is kept when anything requires
    /// grad and `p.scale` when `q.scale` does (a fixed prior's constant scale makes it keep no
    /// tensor of the caller that requires grad); for `Categorical`s and
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
            // (`((p.loc - q.loc) / q.scale) ** 2` and `(p.scale / q.scale) ** 2`: the divisions
            // keep `q.scale` when anything divided requires grad, and `p.scale` when
            // `q.scale` does.)
            let mut saved = Vals::new();
            let anything = self.may_require_grad(&rest) || self.may_require_grad(&p_second);
            if anything || self.may_require_grad(&q_second) {
                saved.extend(q_second.iter().copied());
            }
            if self.may_require_grad(&q_second) {
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
