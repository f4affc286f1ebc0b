//! torchvision's transforms applied to tensors (`torchvision.transforms` and `.v2`): a
//! `Compose` runs its transforms in order, `Lambda(f)` is `f` (the user's function runs on the
//! tensor: `T.Lambda(lambda x: x.mul_(1 / 255))` writes it in place), and `Normalize(...,
//! inplace=True)` / `functional.normalize(..., inplace=True)` write their input in place
//! (`tensor.sub_(mean).div_(std)`). The other transforms make new tensors from their inputs.

use super::write::WriteSpec;
use super::*;
use crate::events::WriteKind;

/// Where `inplace` sits among the positional arguments of
/// `functional.normalize(tensor, mean, std, inplace)`.
const FUNCTIONAL_NORMALIZE_INPLACE_AT: usize = 3;

impl Interp<'_, '_> {
    /// A call of `torchvision.transforms.<name>` (`name` without that prefix); `None` for the
    /// transforms that are plain opaque calls.
    pub(super) fn call_transform(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        name: &str,
        args: &Args,
    ) -> Option<Vals> {
        let name = name.strip_prefix("v2.").unwrap_or(name);
        let call = c.span(e);
        match name {
            "Compose" => {
                let list = args.first()?.clone();
                let steps = self.elements_in_order(&list)?;
                let compose = self.intern("Compose");
                Some(smallvec![self.alloc(Obj::Module(Box::new(ModuleObj {
                    class: compose,
                    local: None,
                    inplace: None,
                    attrs: FxHashMap::default(),
                    children: steps,
                    origin: call,
                    hooks: Vec::new(),
                    maybe_hooks: Vec::new(),
                    pre_hooks: Vec::new(),
                    backward_hook: None,
                })))])
            }
            "Lambda" => args.first().cloned(),
            "Normalize" => {
                // `Normalize(mean, std, inplace)` is called as `functional.normalize(tensor,
                // mean, std, inplace)`: the constructor's arguments become keywords, so the
                // tensor comes first.
                let mut keywords: Vec<(Name, Vals, Span)> = Vec::new();
                let names = [self.intern("mean"), self.intern("std"), known::INPLACE];
                for (k, kw) in names.into_iter().enumerate() {
                    let given = match args.keyword(kw) {
                        Some((v, _, span)) => Some((v.clone(), span)),
                        None => (args.positional.get(k))
                            .map(|(v, n)| (v.clone(), n.map_or(call, |n| c.span(n)))),
                    };
                    if let Some((v, span)) = given {
                        keywords.push((kw, v, span));
                    }
                }
                let normalize = self.intern("torchvision.transforms.functional.normalize");
                let func = smallvec![self.alloc(Obj::Path(normalize))];
                Some(smallvec![self.alloc(Obj::Partial {
                    func,
                    positional: Vec::new(),
                    keywords,
                })])
            }
            "functional.normalize" => Some(self.normalize(c, e, args)),
            _ => None,
        }
    }

    /// `functional.normalize(tensor, mean, std, inplace=False)`.
    fn normalize(&mut self, c: Code<'_>, e: ExprId, args: &Args) -> Vals {
        let call = c.span(e);
        let first = args.first().cloned().unwrap_or_default();
        let Some(arg) = self.inplace_arg(c, e, args, Some(FUNCTIONAL_NORMALIZE_INPLACE_AT)) else {
            return self.opaque_call(args, call);
        };
        let (through, keep) = self.first_arg_names(c, args, call);
        let tensors = self.as_tensors(&first);
        let spec = WriteSpec::new(WriteKind::InplaceOption, arg, call)
            .through(through, keep)
            .call(e);
        self.write(&tensors, spec);
        first
    }

    /// The elements of the one list or tuple in `vals`, in order.
    fn elements_in_order(&self, vals: &Vals) -> Option<Vec<ObjId>> {
        let [one] = vals.as_slice() else { return None };
        let Obj::Seq(items) = self.obj(*one) else {
            return None;
        };
        // A slot that may hold one of several transforms (a branch chose) is an opaque step.
        let one = |slot: &Vals| match slot.as_slice() {
            [v] => *v,
            _ => UNKNOWN,
        };
        Some(items.iter().map(one).collect())
    }
}
