//! Samples a dataset keeps: `ds[i]` of a `Dataset` subclass, and the samples a
//! `DataLoader` without batching (`batch_size=None`) yields, which are `__getitem__`'s results
//! themselves (batching stacks them into new tensors). A tensor `__getitem__` read out of
//! `self` is remembered as stored, so an in-place write into the sample, in `__getitem__` or
//! in the loop over the loader, changes the stored data for the next epoch (IP402).

use super::*;

/// The class of [`Interp::tensor_dataset`]'s object, and the attribute that holds its tensors.
const TENSOR_DATASET: &str = "TensorDataset";
const TENSORS: &str = "tensors";
/// How messages name what a `TensorDataset` keeps.
const TENSOR_DATASET_TENSORS: &str = "TensorDataset.tensors";

impl Interp<'_, '_> {
    /// A subclass of `torch.utils.data.Dataset` (or of another `...Dataset` base: project
    /// datasets derive from their own base classes).
    pub(super) fn is_dataset(&self, class: &ClassObj) -> bool {
        self.derives_from(class, &|p| p.ends_with("Dataset"), 0)
    }

    /// `torch.utils.data.TensorDataset(X, Y)`: a dataset that stores its tensors
    /// (`ds.tensors`) and whose sample `i` is `(X[i], Y[i])`, rows that are views of them.
    pub(super) fn tensor_dataset(&mut self, args: &Args, call: Span) -> ObjId {
        let tensors: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
        let tensors = self.alloc(Obj::Seq(tensors));
        let attrs = [(self.intern(TENSORS), smallvec![tensors])];
        self.torch_object(TENSOR_DATASET, attrs.into_iter().collect(), call)
    }

    /// Whether an object is a [`Self::tensor_dataset`].
    pub(super) fn is_tensor_dataset(&self, m: &ModuleObj) -> bool {
        m.local.is_none() && self.name(m.class) == TENSOR_DATASET
    }

    /// Sample `(X[i], Y[i])` of a [`Self::tensor_dataset`], its rows remembered as stored.
    fn tensor_dataset_sample(&mut self, m: &ModuleObj, call: Span) -> Option<Vals> {
        if !self.is_tensor_dataset(m) {
            return None;
        }
        let attr = self.intern(TENSORS);
        let [stored] = m.attrs.get(&attr)?.as_slice() else {
            return None;
        };
        let Obj::Seq(slots) = self.obj(*stored).clone() else {
            return None;
        };
        let rows = (slots.iter())
            .map(|slot| {
                (slot.iter())
                    .map(|t| self.view_of(*t, call, Part::Piece))
                    .collect()
            })
            .collect();
        let sample = smallvec![self.alloc(Obj::Seq(rows))];
        let shown = self.intern(TENSOR_DATASET_TENSORS);
        self.remember_stored(&sample, shown, call);
        Some(sample)
    }

    /// `obj[index]` of an instance whose class defines `__getitem__`: that method's result (of
    /// a `TensorDataset`, the rows of its tensors).
    pub(super) fn get_item(&mut self, obj: ObjId, index: Vals, call: Span) -> Option<Vals> {
        let Obj::Module(m) = self.obj(obj).clone() else {
            return None;
        };
        if let Some(sample) = self.tensor_dataset_sample(&m, call) {
            return Some(sample);
        }
        let class = m.local.clone()?;
        let def = self.find_method(&class, known::GETITEM)?;
        let args = Args {
            positional: vec![(index, None)],
            keywords: Vec::new(),
            spread: false,
        };
        let outer = self.getitem_self.replace(obj);
        let out = self.inline(def, Some(obj), &args, call);
        self.getitem_self = outer;
        Some(out)
    }

    /// `for x in obj:` of an instance whose class defines `__iter__` (an `IterableDataset`, a
    /// stream): what `__iter__` gives, a generator's yields. A dataset's tensors read out of
    /// `self` are remembered as stored, as in `__getitem__`.
    pub(super) fn iterate_instance(&mut self, obj: ObjId, call: Span) -> Option<Vals> {
        let Obj::Module(m) = self.obj(obj) else {
            return None;
        };
        // (Only a dataset's: a container, list or dict base has its own `__iter__`.)
        let by_index = match &m.local {
            Some(class) => {
                self.is_dataset(class)
                    && self.find_method(class, known::ITER).is_none()
                    && self.torch_container_base(class).is_none()
                    && !self.list_base(class)
                    && !self.dict_base(class)
            }
            None => self.is_tensor_dataset(m),
        };
        if by_index {
            // Without `__iter__`, Python iterates by `__getitem__` at 0, 1, ... (a map-style
            // dataset looped over directly: `for x, y in ds`).
            let index = self.alloc(Obj::Other);
            let sample = self.get_item(obj, smallvec![index], call)?;
            return Some(smallvec![self.alloc(Obj::Seq(vec![sample]))]);
        }
        let class = m.local.clone()?;
        let def = self.find_method(&class, known::ITER)?;
        let outer = self.getitem_self;
        if self.is_dataset(&class) {
            self.getitem_self = Some(obj);
        }
        let out = self.inline(def, Some(obj), &Args::default(), call);
        self.getitem_self = outer;
        Some(out)
    }

    /// `DataLoader(dataset, batch_size=None, ...)`: a list of the one sample `__getitem__`
    /// gives (at an unknown index), which a loop over the loader binds. `None` when the loader
    /// batches (the default; `__getitem__` is run for what it does), or the dataset is not one
    /// the analysis sees.
    pub(super) fn unbatched_loader(&mut self, args: &Args, call: Span) -> Option<ObjId> {
        let batch_size = self.intern("batch_size");
        let unbatched = args
            .keyword(batch_size)
            .is_some_and(|(v, ..)| v.as_slice() == [NONE]);
        let dataset = self.intern("dataset");
        let ds = args
            .positional
            .first()
            .map(|(v, _)| v.clone())
            .or_else(|| args.keyword(dataset).map(|(v, ..)| v.clone()))?;
        let [ds] = ds.as_slice() else {
            return None;
        };
        let index = self.alloc(Obj::Other);
        if !unbatched {
            // A batching loader still calls `__getitem__` for each sample it stacks: what it
            // writes into the dataset's stored tensors (a transform normalising the stored
            // sample in place, given to the dataset's constructor) happens on every epoch.
            let _ = self.get_item(*ds, smallvec![index], call);
            return None;
        }
        match self.get_item(*ds, smallvec![index], call) {
            Some(sample) => Some(self.alloc(Obj::Seq(vec![sample]))),
            // An `IterableDataset`: the loader yields what its `__iter__` does.
            None => self
                .iterate_instance(*ds, call)
                .map(|v| match v.as_slice() {
                    [one] => *one,
                    _ => self.alloc(Obj::Seq(vec![v])),
                }),
        }
    }
}
