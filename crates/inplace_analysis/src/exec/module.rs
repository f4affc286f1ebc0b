//! `nn` modules: construction (parameters, `inplace=True`, containers), calls (the file's own
//! `forward`, `Sequential` in order, layers from the op table, forward hooks), module methods,
//! and list/dict methods.

use super::write::WriteSpec;
use super::*;
use crate::events::{WriteId, WriteKind};
use crate::ops::{self, ArgKind, Saves as OpSaves};

/// The torch containers whose children a module holds in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    /// `nn.Sequential`: its `forward` runs the children in order.
    Sequential,
    /// `nn.ModuleList`: layers in order, run by the owner's code.
    ModuleList,
    /// `nn.ModuleDict`, `nn.ParameterList`, `nn.ParameterDict`.
    Holder,
}

/// The attribute of an adaptive average pool that says it pools to size 1 (a mean, which saves
/// nothing); no Python name can be spelled so.
const GLOBAL_POOL: &str = "<pools to size 1>";

/// What a layer's call gives its backward to read parameters for (see
/// [`Interp::params_saved`]).
#[derive(Clone, Copy)]
struct ParamsRead {
    /// Its input requires grad.
    input_grad: bool,
    /// It was given a recurrent state that requires grad.
    state_grad: bool,
    /// Parameters the op table does not name are read (the input requires grad, or the layer
    /// reads its weights on every call).
    fallback: bool,
}

/// How [`Interp::submodules`] walks a module tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TreeWalk {
    /// The direct children.
    Children,
    /// Each module before its submodules.
    PreOrder,
    /// Each module after its submodules.
    PostOrder,
}

impl Container {
    /// The container a torch class name (its last segment) is.
    pub fn of(class: &str) -> Option<Container> {
        match class {
            "Sequential" => Some(Container::Sequential),
            "ModuleList" => Some(Container::ModuleList),
            "ModuleDict" | "ParameterList" | "ParameterDict" => Some(Container::Holder),
            _ => None,
        }
    }
}

/// Bases of a plain Python class (not of an `nn.Module`, nor of any other library class).
const PLAIN_BASES: &[&str] = &["object", "abc.ABC", "ABC", "abc.ABCMeta", "typing.Generic"];

impl Interp<'_, '_> {
    pub(super) fn new_module(&mut self, c: Code<'_>, e: ExprId, class: &str, args: &Args) -> ObjId {
        let origin = c.span(e);
        // (`nn.ReLU(True)`, `nn.LeakyReLU(0.2, True)`: `inplace` given by position.)
        let inplace = self
            .inplace_arg(c, e, args, ops::module_inplace_position(class))
            .map(|arg| InplaceArg { arg, call: origin });
        let mut children = Vec::new();
        let mut attrs = FxHashMap::default();
        match class {
            "Sequential" | "ModuleList" | "ModuleDict" | "ParameterList" | "ParameterDict" => {
                let kind = Container::of(class).unwrap_or(Container::Holder);
                children = self.container_children(kind, args);
                // `nn.ModuleDict({"conv": ..., "act": ...})`: each layer under its key.
                if let Some(([d], _)) = args.positional.first().map(|(v, n)| (v.as_slice(), n)) {
                    attrs = self.keyed_slots(*d);
                }
            }
            _ => {
                attrs = self.layer_attrs(class, args, origin);
                // (`nn.Dropout(0.0)`, `nn.Dropout(p)` with `p` zero: the rate kept as `p`, the
                // one number a dropout's `p` is compared with.)
                if ops::MODULE_DROPOUTS.contains(&class) && self.zero_arg(args, known::P, 0) {
                    let zero = self.int(0);
                    attrs.insert(known::P, smallvec![zero]);
                }
                // Wrappers (`DataParallel(model)`) hold the wrapped module.
                if let Some((v, _)) = args.positional.first() {
                    for m in v.clone() {
                        if matches!(self.obj(m), Obj::Module(_)) {
                            children.push(m);
                            attrs.insert(known::MODULE, smallvec![m]);
                        }
                    }
                }
            }
        }
        let class = self.intern(class);
        self.alloc(Obj::Module(Box::new(ModuleObj {
            class,
            local: None,
            inplace,
            attrs,
            children,
            origin,
            hooks: Vec::new(),
            maybe_hooks: Vec::new(),
            pre_hooks: Vec::new(),
            backward_hook: None,
        })))
    }

    /// A recurrent layer's parameters for its `num_layers` and `bidirectional` (`weight_ih_l1`,
    /// `bias_hh_l0_reverse`, ...: the table measures one layer, `_l0`), in the order torch
    /// registers them; `_all_weights` (their names, by layer and direction) is kept too, as
    /// initialisers walk it (`for names in lstm._all_weights: ...`).
    fn recurrent_params(
        &mut self,
        class: &str,
        args: &Args,
        one_layer: &[String],
        attrs: &mut FxHashMap<Name, Vals>,
    ) -> Vec<String> {
        let shift = usize::from(class == "RNN");
        let layers_kw = self.intern("num_layers");
        let bidi_kw = self.intern("bidirectional");
        let layers = args
            .named_or_at(layers_kw, 2)
            .and_then(|v| self.one_int(v))
            .map_or(1, |n| n.clamp(1, 8) as usize);
        let bidi = args
            .named_or_at(bidi_kw, 6 + shift)
            .is_some_and(|v| v.as_slice() == [TRUE]);
        let directions: &[&str] = if bidi { &["", "_reverse"] } else { &[""] };
        let mut out = Vec::new();
        let mut groups = Vec::new();
        for k in 0..layers {
            for d in directions {
                let names: Vec<String> = (one_layer.iter())
                    .map(|p| format!("{}_l{k}{d}", p.strip_suffix("_l0").unwrap_or(p)))
                    .collect();
                let slots = (names.iter())
                    .map(|n| {
                        let n = self.intern(n);
                        smallvec![self.string(n)]
                    })
                    .collect();
                groups.push(smallvec![self.alloc(Obj::Seq(slots))]);
                out.extend(names);
            }
        }
        let all = self.alloc(Obj::Seq(groups));
        attrs.insert(self.intern("_all_weights"), smallvec![all]);
        out
    }

    /// An object of a torch class made with these attributes (no children, no hooks).
    pub(super) fn torch_object(
        &mut self,
        class: &str,
        attrs: FxHashMap<Name, Vals>,
        origin: Span,
    ) -> ObjId {
        let class = self.intern(class);
        self.alloc(Obj::Module(Box::new(ModuleObj {
            class,
            local: None,
            inplace: None,
            attrs,
            children: Vec::new(),
            origin,
            hooks: Vec::new(),
            maybe_hooks: Vec::new(),
            pre_hooks: Vec::new(),
            backward_hook: None,
        })))
    }

    /// The attributes a torch layer's constructor sets from its arguments: its parameters
    /// (`weight`, `bias`, an RNN's `weight_ih_l0`, ...; none that `bias=False`, `affine=False`
    /// or `elementwise_affine=False` turns off) and the options that decide what it saves.
    pub(super) fn layer_attrs(
        &mut self,
        class: &str,
        args: &Args,
        origin: Span,
    ) -> FxHashMap<Name, Vals> {
        let mut attrs = FxHashMap::default();
        let mut params: Vec<String> = match ops::table().module(class) {
            Some(spec) => spec.params.clone(),
            None if ops::module_has_params(class) => vec!["weight".into(), "bias".into()],
            None => Vec::new(),
        };
        if ops::SAVES_WEIGHTS_ALWAYS.contains(&class) {
            let bias = self.intern("bias");
            if self.keyword_false(args, bias) {
                params.retain(|p| !p.starts_with("bias"));
            }
            params = self.recurrent_params(class, args, &params, &mut attrs);
        }
        // A recurrent layer's options that decide what it saves, by keyword or position
        // (`nn.LSTM(input_size, hidden_size, num_layers, bias, batch_first, dropout,
        // bidirectional, proj_size)`; `nn.RNN` has `nonlinearity` before `bias` and no
        // `proj_size`), as `self.rnn.batch_first` reads them too.
        if ops::SAVES_WEIGHTS_ALWAYS.contains(&class) {
            let shift = usize::from(class == "RNN");
            let options = [
                (4 + shift, "batch_first"),
                (6 + shift, "bidirectional"),
                (7 + shift, "proj_size"),
            ];
            for (at, option) in options {
                let option = self.intern(option);
                if let Some(v) = args.named_or_at(option, at) {
                    attrs.insert(option, v.clone());
                }
            }
        }
        // The sizes it keeps (`for layer in range(rnn.num_layers)`), when known integers.
        let sizes = ops::LAYER_SIZES
            .iter()
            .find(|(classes, _)| classes.contains(&class));
        for (at, field, default) in sizes.map_or(&[][..], |(_, fields)| fields) {
            let field = self.intern(field);
            let given = args.named_or_at(field, *at).filter(|_| !args.spread);
            let value = match given.and_then(|v| self.one_int(v)) {
                Some(_) => given.cloned(),
                None if given.is_none() && !args.spread => default.map(|d| smallvec![self.int(d)]),
                None => None,
            };
            if let Some(v) = value {
                attrs.insert(field, v);
            }
        }
        // An adaptive average pool to size 1 is a mean and saves nothing; to another size it
        // saves its input (measured with torch 2.15).
        // (Decided here, where the size's integers are known, and kept as `True`/`False`
        // under a name no code can spell: a unit that reads the layer later has other ints.)
        if class.starts_with("AdaptiveAvgPool") {
            let option = self.intern("output_size");
            let given = args
                .keyword(option)
                .map(|(v, ..)| v.clone())
                .or_else(|| args.positional.first().map(|(v, _)| v.clone()));
            let global = given.is_some_and(|v| self.all_ones(&v));
            attrs.insert(
                self.intern(GLOBAL_POOL),
                smallvec![if global { TRUE } else { FALSE }],
            );
        }
        // A dropout layer's probability (`nn.Dropout(0.0)` returns its input itself), as
        // `self.drop.p` reads it too.
        if ops::MODULE_DROPOUTS.contains(&class) {
            if let Some(v) = args.named_or_at(known::P, 0) {
                attrs.insert(known::P, v.clone());
            }
        }
        // `bias=False`, `affine=False`, `elementwise_affine=False`: no such parameters.
        let mut off = |kw: &str| {
            let kw = self.intern(kw);
            self.keyword_false(args, kw)
        };
        // `nn.Embedding(n, d, max_norm=1.0)` (or its fourth positional argument; an
        // `nn.EmbeddingBag`'s third): each call renormalises the rows it looks up, in
        // place.
        let max_norm_at = match class {
            "Embedding" => Some(3),
            "EmbeddingBag" => Some(2),
            _ => None,
        };
        if let Some(at) = max_norm_at {
            let given = args.named_or_at(known::MAX_NORM, at);
            if given.is_some_and(|v| !v.is_empty() && !v.contains(&NONE)) {
                attrs.insert(known::MAX_NORM, smallvec![OTHER]);
            }
        }
        let no_bias = off("bias");
        let no_affine = off("affine") || off("elementwise_affine");
        // A dotted parameter belongs to a linear sublayer (`nn.MultiheadAttention`'s
        // `out_proj.weight`): the sublayer is the attribute, its parameters are its own.
        let mut sublayers: Vec<(String, FxHashMap<Name, Vals>)> = Vec::new();
        for p in params {
            let (owner, leaf) = match p.rsplit_once('.') {
                Some((owner, leaf)) => (Some(owner), leaf),
                None => (None, p.as_str()),
            };
            if (no_bias && (leaf.starts_with("bias") || leaf.ends_with("_bias")))
                || (no_affine && matches!(leaf, "weight" | "bias"))
            {
                continue;
            }
            let t = self.new_leaf(true, origin);
            self.parameters.insert(t);
            let name = self.intern(leaf);
            let Some(owner) = owner else {
                attrs.insert(name, smallvec![t]);
                continue;
            };
            match sublayers.iter_mut().find(|(o, _)| o == owner) {
                Some((_, a)) => {
                    a.insert(name, smallvec![t]);
                }
                None => {
                    let a = [(name, smallvec![t])].into_iter().collect();
                    sublayers.push((owner.to_string(), a));
                }
            }
        }
        for (owner, sub_attrs) in sublayers {
            let sub = self.torch_object("Linear", sub_attrs, origin);
            let owner = self.intern(&owner);
            attrs.insert(owner, smallvec![sub]);
        }
        attrs
    }

    /// The children a container's constructor gets, in order.
    fn container_children(&mut self, kind: Container, args: &Args) -> Vec<ObjId> {
        let mut flat = Vals::new();
        for (v, _) in &args.positional {
            self.flatten_in_order(v, &mut flat, &mut Vec::new());
        }
        if kind != Container::Holder {
            // A layer the analysis cannot see (an imported block) stays in its place as an
            // opaque child: it returns a new tensor, never its input.
            flat.into_iter().filter(|v| self.may_be_layer(*v)).collect()
        } else {
            flat.into_vec()
        }
    }

    /// `super().__init__(*layers)` of a container subclass: the layers become its children.
    pub(super) fn add_children(&mut self, m: ObjId, kind: Container, args: &Args) {
        let children = self.container_children(kind, args);
        if let Obj::Module(module) = self.obj_mut(m) {
            module.children.extend(children);
        }
    }

    /// `m.add_module(key, v)`, `m[key] = v` of an `nn.ModuleDict`: `v` is an attribute of
    /// `m`, and, when `m` is a container, also its next child (children keep insertion order,
    /// whatever their names: `f"layer{i}"`), or the child it replaces under a name it already
    /// has. With `stmt`, replacing a layer whose parameters an optimizer holds is checked
    /// (IP403), as an assignment is.
    pub(super) fn add_named_module(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        key: Option<Name>,
        v: Vals,
        stmt: Option<StmtId>,
    ) {
        // (`seq.add_module("0", layer)`: the child of that name of a `Sequential`, which is
        // its position unless it was added under a name of its own; a name no child has adds
        // one, as torch's ordered dict of children does: `add_module("1", relu)` after
        // `add_module("0", conv)` and `add_module("loss", l)` appends after the loss.)
        let numeric = key.filter(|k| self.name(*k).parse::<usize>().is_ok());
        if let (Some(Container::Sequential | Container::ModuleList), Some(k)) =
            (self.container_of(m), numeric)
        {
            if let Obj::Module(module) = self.obj(m) {
                let named = |child: ObjId| {
                    (module.attrs.iter())
                        .find(|(_, vs)| vs.as_slice() == [child])
                        .map(|(n, _)| *n)
                };
                let wanted = self.name(k);
                let at = (module.children.iter().enumerate()).position(|(i, child)| {
                    match named(*child) {
                        Some(n) => n == k,
                        None => wanted.parse::<usize>().ok() == Some(i),
                    }
                });
                if let Some(at) = at {
                    self.replace_child(c, e, m, at, &v, stmt);
                    return;
                }
            }
        }
        let replaces = match (self.obj(m), key) {
            (Obj::Module(module), Some(k)) => module.attrs.contains_key(&k),
            _ => false,
        };
        if self.container_of(m).is_some() && !replaces {
            if let Obj::Module(module) = self.obj_mut(m) {
                module.children.extend(v.iter().copied());
            }
        }
        if let Some(key) = key {
            self.set_attribute(c, e, m, key, v, stmt);
        }
    }

    /// The entries of a dict whose keys are all known strings, by key.
    fn keyed_slots(&self, d: ObjId) -> FxHashMap<Name, Vals> {
        let (Some(keys), Obj::Seq(slots)) = (self.dict_keys.get(&d), self.obj(d)) else {
            return FxHashMap::default();
        };
        keys.iter()
            .zip(slots)
            .filter_map(|(k, v)| Some((k.as_ref()?.0, v.clone())))
            .collect()
    }

    /// The keys of an `nn.ModuleDict` (or `nn.ParameterDict`) in insertion order, when each of
    /// its children was added under a known one: what iterating it or `.keys()` gives.
    pub(super) fn module_dict_keys(&self, m: ObjId) -> Option<Vec<Name>> {
        let Obj::Module(module) = self.obj(m) else {
            return None;
        };
        if self.container_of(m) != Some(Container::Holder) || module.children.is_empty() {
            return None;
        }
        module
            .children
            .iter()
            .map(|child| {
                module
                    .attrs
                    .iter()
                    .filter(|(_, v)| v.as_slice() == [*child])
                    .map(|(k, _)| *k)
                    .min()
            })
            .collect()
    }

    /// A keyed `nn.ModuleDict`'s keys as a list of strings, one slot each (a loop over it runs
    /// each key in turn).
    pub(super) fn module_dict_key_list(&mut self, m: ObjId) -> Option<ObjId> {
        let keys = self.module_dict_keys(m)?;
        let slots = keys
            .into_iter()
            .map(|k| smallvec![self.alloc(Obj::Str(k))])
            .collect();
        Some(self.alloc(Obj::Seq(slots)))
    }

    /// The keys of a dict whose entries are all known (`{"a": x, "b": y}`), as a list of
    /// strings whose slots are its elements: `for k in d` then runs key by key.
    pub(super) fn dict_key_list(&mut self, d: ObjId) -> Option<ObjId> {
        let entries = self.keyed_entries(&smallvec![d])?;
        if entries.len() > 32 {
            return None;
        }
        let slots = (entries.into_iter())
            .map(|(k, ..)| smallvec![self.alloc(Obj::Str(k))])
            .collect();
        let list = self.alloc(Obj::Seq(slots));
        self.exact_seqs.insert(list);
        Some(list)
    }

    /// Whether every key of dict `d` is a known string (as [`Interp::dict_key_list`] asks,
    /// without making the list).
    pub(super) fn all_keys_known(&self, d: ObjId) -> bool {
        let len = match self.obj(d) {
            Obj::Seq(slots) => slots.len(),
            _ => return false,
        };
        self.dict_keys
            .get(&d)
            .is_some_and(|k| k.len() == len && len <= 32 && k.iter().all(Option::is_some))
    }

    /// The modules and tensors a dict was given as keys, as a list (see
    /// [`Interp::object_keys`]).
    pub(super) fn object_key_list(&mut self, d: ObjId) -> Option<ObjId> {
        let keys = self.object_keys.get(&d)?.clone();
        if keys.contains(&UNKNOWN) {
            return None;
        }
        Some(self.alloc(Obj::Seq(keys.into_iter().map(|k| smallvec![k]).collect())))
    }

    /// The `(key, value)` pairs of a dict whose keys are all known, as a list whose slots are
    /// its elements (`for k, v in d.items()` then runs entry by entry).
    fn dict_item_list(&mut self, d: ObjId) -> Option<ObjId> {
        let keys = self.dict_key_list(d)?;
        let (Obj::Seq(ks), Obj::Seq(vs)) = (self.obj(keys).clone(), self.obj(d).clone()) else {
            return None;
        };
        let slots = ks
            .into_iter()
            .zip(vs)
            .map(|(k, v)| smallvec![self.alloc(Obj::Seq(vec![k, v]))])
            .collect();
        let list = self.alloc(Obj::Seq(slots));
        self.exact_seqs.insert(list);
        Some(list)
    }

    /// The container a module is: a torch one, or a class of the file deriving from one.
    pub(super) fn container_of(&self, m: ObjId) -> Option<Container> {
        let Obj::Module(module) = self.obj(m) else {
            return None;
        };
        match &module.local {
            Some(k) => self.torch_container_base(k),
            None => Container::of(self.name(module.class)),
        }
    }

    /// `nn.Sequential`'s `forward` (and a torchvision `Compose`'s call): each child on the
    /// previous one's output.
    pub(super) fn run_in_order(&mut self, c: Code<'_>, e: ExprId, m: ObjId, input: Vals) -> Vals {
        let children = match self.obj(m) {
            Obj::Module(module) => module.children.clone(),
            _ => return input,
        };
        self.run_children(c, e, &children, input)
    }

    /// Layers (or functions) called one after the other on `input`.
    pub(super) fn run_children(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        children: &[ObjId],
        input: Vals,
    ) -> Vals {
        let mut x = input;
        for &child in children {
            let a = Args::one(x);
            x = match self.obj(child) {
                // (A `Compose` holds functions too: `T.Lambda(f)` is `f`.)
                Obj::Func(_) | Obj::Partial { .. } | Obj::Bound(..) | Obj::Path(_) => {
                    self.call_value(c, e, child, &a)
                }
                _ => {
                    let origin = self.heap_origin(child);
                    self.call_module_at(c, e, child, &a, origin)
                }
            };
            if x.is_empty() {
                x.push(UNKNOWN);
            }
        }
        x
    }

    /// Whether a value can be a layer: a module, or what an opaque call made (an imported
    /// block whose constructor got an argument of unknown type looks like an unknown tensor).
    fn may_be_layer(&self, v: ObjId) -> bool {
        match self.obj(v) {
            Obj::Module(_) | Obj::Unknown => true,
            Obj::Tensor(t) => !t.known,
            _ => false,
        }
    }

    pub(super) fn call_module(&mut self, c: Code<'_>, e: ExprId, m: ObjId, args: &Args) -> Vals {
        self.call_module_at(c, e, m, args, None)
    }

    /// Call a module; `site` is where its saves are reported (its constructor inside a
    /// `Sequential`, else the call).
    fn call_module_at(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        args: &Args,
        site: Option<Span>,
    ) -> Vals {
        if !self.state_dicts_out.writes.is_empty() {
            self.read_after_state_dict_write(m, c.span(e));
        }
        let pre_hooks = match self.obj(m) {
            Obj::Module(module) => module.pre_hooks.clone(),
            _ => Vec::new(),
        };
        let replaced;
        let args = if pre_hooks.is_empty() {
            args
        } else {
            replaced = self.run_pre_hooks(c, e, m, &pre_hooks, args);
            &replaced
        };
        let backward_hook = match self.obj(m) {
            Obj::Module(module) => module.backward_hook.filter(|_| self.grad_enabled),
            _ => None,
        };
        let hooked;
        let args = match backward_hook {
            Some(at) => {
                hooked = Args {
                    positional: args
                        .positional
                        .iter()
                        .map(|(v, e)| (self.backward_hook_views(v, at), *e))
                        .collect(),
                    keywords: args.keywords.clone(),
                    spread: false,
                };
                &hooked
            }
            None => args,
        };
        let first_write = self.writes.len() as WriteId;
        let out = self.call_module_body(c, e, m, args, site);
        let (hooks, maybe_hooks, inplace_layer) = match self.obj(m) {
            Obj::Module(module) => (
                module.hooks.clone(),
                module.maybe_hooks.clone(),
                module.inplace.is_some() && module.local.is_none(),
            ),
            _ => Default::default(),
        };
        // Forward hooks run as `hook(module, inputs, output)`; a result that is not None
        // replaces the output.
        let mut result = out;
        let input_tuple = (!hooks.is_empty()).then(|| {
            let inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
            self.alloc(Obj::Seq(inputs))
        });
        // An in-place layer (`nn.ReLU(inplace=True)`) has overwritten its input by the time its
        // forward hooks run: `inputs[0]` shows the output's values, not what came in (an
        // observer recording the input's range sees no negatives, pytorch#95617).
        if let (Some(tuple), true) = (input_tuple, inplace_layer) {
            if (self.writes.len() as WriteId) > first_write {
                let slot = self.state.stale_slots.entry((tuple, Slot::At(0)));
                super::write::note_write(slot.or_default(), first_write);
            }
        }
        for hook in hooks {
            let input_tuple = input_tuple.unwrap_or(UNKNOWN);
            let hook_args = Args {
                positional: vec![
                    (smallvec![m], None),
                    (smallvec![input_tuple], None),
                    (result.clone(), None),
                ],
                keywords: Vec::new(),
                spread: false,
            };
            let outer = self.running_hook;
            self.running_hook = self.hook_output_param(hook);
            let maybe = self.storing_maybe || maybe_hooks.contains(&hook);
            let outer_maybe = std::mem::replace(&mut self.storing_maybe, maybe);
            let returned = self.call_value(c, e, hook, &hook_args);
            self.storing_maybe = outer_maybe;
            self.running_hook = outer;
            if returned.iter().any(|v| self.maybe_tensor(*v)) {
                result = returned;
            }
        }
        match backward_hook {
            Some(at) => self.backward_hook_views(&result, at),
            None => result,
        }
    }

    /// What a module with a full backward hook (registered at `at`) passes on: each tensor of
    /// `vals` that requires grad becomes a view its `BackwardHookFunction` made, which autograd
    /// refuses to see written in place (measured with torch 2.15: `out.relu_()` on the output,
    /// `x.mul_(2)` on the input inside `forward`, raise at once).
    fn backward_hook_views(&mut self, vals: &Vals, at: Span) -> Vals {
        vals.iter()
            .map(|v| match self.tensor(*v) {
                Some(t) if t.grad == Tri::Yes && t.counter => {
                    let view = self.view_of(*v, at, Part::Whole);
                    self.refuse_view(view, RefusedBy::BackwardHook, at);
                    view
                }
                _ => *v,
            })
            .collect()
    }

    /// Forward pre-hooks run as `hook(module, args)` with the positional arguments as a tuple;
    /// a result that is not None replaces them (a tuple, or one value).
    fn run_pre_hooks(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        pre_hooks: &[ObjId],
        args: &Args,
    ) -> Args {
        let mut args = args.clone();
        for hook in pre_hooks {
            let inputs: Vec<Vals> = args.positional.iter().map(|(v, _)| v.clone()).collect();
            let tuple = self.alloc(Obj::Seq(inputs));
            let hook_args = Args {
                positional: vec![(smallvec![m], None), (smallvec![tuple], None)],
                keywords: Vec::new(),
                spread: false,
            };
            let outer = self.running_pre_hook.replace(tuple);
            let returned = self.call_value(c, e, *hook, &hook_args);
            self.running_pre_hook = outer;
            // (A result that may be None on some path, or is no tensor the analysis can see,
            // leaves the arguments as they are: a hook without `return` gives nothing else.)
            if returned.contains(&NONE) {
                continue;
            }
            match returned.as_slice() {
                [one] => match self.obj(*one) {
                    Obj::Seq(items) => {
                        args.positional = items.iter().map(|v| (v.clone(), None)).collect();
                    }
                    _ if self.maybe_tensor(*one) => args.positional = vec![(returned, None)],
                    _ => {}
                },
                _ if returned.iter().any(|v| self.maybe_tensor(*v)) => {
                    args.positional = vec![(returned, None)];
                }
                _ => {}
            }
        }
        args
    }

    /// A hook's definition and the name of its `output` parameter (the third; after `self`
    /// for a bound method).
    fn hook_output_param(&mut self, hook: ObjId) -> Option<(DefLoc, Name)> {
        self.hook_param(hook, 2)
    }

    /// A hook's definition and the name of its parameter at `at` (one further for a bound
    /// method, after `self`).
    fn hook_param(&mut self, hook: ObjId, at: usize) -> Option<(DefLoc, Name)> {
        let (def, at) = match self.obj(hook) {
            Obj::Func(def) => (*def, at),
            Obj::Bound(_, def) => (*def, at + 1),
            // An object whose class defines `__call__`.
            Obj::Module(module) => {
                let class = module.local.clone()?;
                (self.find_method(&class, known::CALL)?, at + 1)
            }
            _ => return None,
        };
        let (body, f) = self.resolve_def(def)?;
        let p = *body.list(body.func(f).params).get(at)?;
        Some((def, body.params[p as usize].name))
    }

    fn call_module_body(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        args: &Args,
        site: Option<Span>,
    ) -> Vals {
        let call = c.span(e);
        let Obj::Module(module) = self.obj(m) else {
            // An opaque layer (in a `Sequential`): a new tensor made from its inputs.
            return self.opaque_call(args, call);
        };
        let mut class = self.name(module.class).to_string();
        if let Some(k) = &module.local {
            // (A plain class's own `__call__` is what calling it runs, even when it also has a
            // `forward` it calls as a hook: `AttentionControl.__call__` of prompt-to-prompt;
            // an `nn.Module`'s `__call__` runs its `forward`.)
            let plain = !self.derives_from(k, &|p| !PLAIN_BASES.contains(&p), 0);
            let own_call = plain.then(|| self.find_method(k, known::CALL)).flatten();
            match own_call
                .or_else(|| self.find_method(k, known::FORWARD))
                .or_else(|| self.find_method(k, known::CALL))
            {
                Some(def) => return self.inline(def, Some(m), args, call),
                // `class Stack(nn.Sequential)` filled by `add_module`: the base's `forward`.
                None if self.torch_container_base(k) == Some(Container::Sequential) => {
                    let input = args.first().cloned().unwrap_or_default();
                    return self.run_in_order(c, e, m, input);
                }
                // `class Boltz(Transform)` of `torch.distributions`: the base's `__call__` runs
                // the subclass's `_call`.
                None if self.torch_transform_base(k) => {
                    let k = k.clone();
                    let method = self.intern("_call");
                    return match self.find_method(&k, method) {
                        Some(def) => self.inline(def, Some(m), args, call),
                        None => self.opaque_call(args, call),
                    };
                }
                // `class WSConv2d(nn.Conv2d)` that keeps the base's `forward`.
                None => match self.torch_layer_base(k) {
                    Some(base) => class = base,
                    None => return self.opaque_call(args, call),
                },
            }
        }
        self.call_layer(c, e, m, &class, args, site)
    }

    /// The `forward` of torch layer `class` (the module's own class, or the torch base of a
    /// class of the file) on module `m`.
    pub(super) fn call_layer(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        class: &str,
        args: &Args,
        site: Option<Span>,
    ) -> Vals {
        let call = c.span(e);
        let save_at = site.unwrap_or(call);
        let Obj::Module(module) = self.obj(m) else {
            return self.opaque_call(args, call);
        };
        let module = module.clone();
        let layer = match *c.expr(e) {
            Expr::Call { func, .. } => c.span(func),
            _ => call,
        };
        self.read_layer_state(m, layer, call);
        let input = args.first().cloned().unwrap_or_default();
        let class = class.to_string();
        match class.as_str() {
            "Sequential" | "Compose" => return self.run_in_order(c, e, m, input),
            // `nn.Identity()(x) is x`; `nn.Flatten`/`nn.Unflatten` return a view of their input
            // (an in-place layer after them writes what the layer before saved).
            "Identity" => return input,
            "Flatten" | "Unflatten" => {
                return (input.iter())
                    .map(|v| self.view_of(*v, call, Part::Whole))
                    .collect();
            }
            "DataParallel" | "DistributedDataParallel" => {
                if let Some(inner) = module.children.first() {
                    return self.call_module(c, e, *inner, args);
                }
            }
            _ => {}
        }
        if self.dropout_passes(&module, &class) {
            return input;
        }
        // (The torch layer that runs: `nn.Linear` of `class MaxNormLinear(nn.Linear)` too.)
        let label = OpLabel::Module {
            origin: module.origin,
            class: self.intern(&class),
        };
        let spec = ops::table().module(&class);
        if let Some(arg) = module.inplace {
            let saves_result = spec.is_some_and(|s| s.inplace_result);
            self.run_inplace_layer(c, e, args, arg, (label, save_at), saves_result);
            return input;
        }
        // (Only an embedding renormalises: `self.max_norm` of a `nn.Linear` subclass is a
        // setting of its own.)
        let embedding = matches!(class.as_str(), "Embedding" | "EmbeddingBag");
        if embedding && module.attrs.contains_key(&known::MAX_NORM) {
            if let Some(weight) = module.attrs.get(&known::WEIGHT).cloned() {
                let spec = WriteSpec::new(WriteKind::Renorm, call, call)
                    .no_leaf_check()
                    .call(e);
                self.write(&weight, spec);
            }
        }
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        let (mut saves_result, saves_input) = self.layer_saves_what(&module, &class, spec);
        // A whole-sequence RNN given a packed sequence keeps no output (measured with torch
        // 2.15 on the CPU: `RNN`, `LSTM`, `GRU`, one or two layers, either direction; writing
        // the output's data, or the padded tensor `pad_packed_sequence` gives, does not raise).
        let packed = !input.is_empty() && input.iter().all(|v| self.packed.contains(v));
        if packed && ops::SAVES_WEIGHTS_ALWAYS.contains(&class.as_str()) {
            saves_result = false;
        }
        let (inputs, bag) = self.layer_inputs(&class, args);
        // The weights are saved for the inputs' gradients: when any input carries grad, and
        // always in a whole-sequence RNN, whose steps feed each other (measured with torch).
        let inputs_grad =
            self.arg_kind(&inputs) == ArgKind::Grad && !ops::INDEX_INPUT.contains(&class.as_str());
        let input_grad = inputs_grad || ops::SAVES_WEIGHTS_ALWAYS.contains(&class.as_str());
        // A weight set to a computed tensor (`setattr(self.module, "weight", w_bar / sigma)`,
        // a hand-written spectral or weight norm): the layer computes with it, and its history
        // flows into the output as a parameter's would.
        for key in [known::WEIGHT, self.intern("bias")] {
            for v in module.attrs.get(&key).cloned().unwrap_or_default() {
                let computed = self.tensor(v).is_some_and(|t| t.node.is_some() && !t.leaf);
                if computed && !params.contains(&v) {
                    params.push(v);
                }
            }
        }
        let grad_params: Vals = if self.grad_enabled {
            params.clone()
        } else {
            Vals::new()
        };
        let out = self.derive(
            &[inputs, grad_params],
            call,
            OpSaves::default(),
            Some(label),
            true,
        );
        // Record the saves against the real inputs and parameters.
        if !self.grad_enabled || !self.tensor(out).is_some_and(|t| t.grad.is_possible()) {
            return self.layer_result(&class, out);
        }
        let mut new_saves = Saves::new();
        let assumes = self.tensor(out).and_then(|t| t.grad_if);
        if saves_result {
            new_saves.push(self.record_save(out, true, label, save_at, assumes));
        }
        if saves_input {
            for v in input.clone() {
                new_saves.extend(self.save_input(v, label, save_at, assumes));
            }
        }
        let target = spec.is_some_and(|s| s.target);
        let at = (label, save_at, assumes);
        new_saves.extend(self.save_target_and_state(&class, target, args, &params, at));
        if !bag.is_empty() {
            let table = module
                .attrs
                .get(&known::WEIGHT)
                .cloned()
                .unwrap_or_default();
            self.save_weighted_bag(&smallvec![out], &bag, &table, label, save_at);
        }
        let read = self.layer_params_read(&class, args, inputs_grad, input_grad);
        // (Under autocast in a lower precision, the weights it saves are cast copies.)
        let cast = self.save_modes.autocast_low && ops::AUTOCAST_LOWER.contains(&class.as_str());
        let saved = match cast {
            true => Vals::new(),
            false => self.params_saved(&module, &class, &params, read),
        };
        for p in saved {
            new_saves.extend(self.save_input(p, label, save_at, assumes));
        }
        if let Some(n) = self.tensor(out).and_then(|t| t.node) {
            self.nodes.get_mut(n).saves.extend(new_saves);
        }
        // An embedding's ids, a loss's target.
        let index = ops::MODULE_INDEX_OPERANDS
            .iter()
            .find(|(k, _)| *k == class.as_str())
            .and_then(|(_, pos)| args.positional.get(*pos));
        if let Some((operand, _)) = index {
            self.save_with(&smallvec![out], operand, label, save_at);
        }
        self.layer_result(&class, out)
    }

    /// A torch layer built with `inplace=True` writes its input (and, where the in-place
    /// kernel saves it, saves what it wrote for its backward).
    fn run_inplace_layer(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        args: &Args,
        arg: InplaceArg,
        (label, save_at): (OpLabel, Span),
        saves_result: bool,
    ) {
        let call = c.span(e);
        let input = args.first().cloned().unwrap_or_default();
        let tensors = self.as_tensors(&input);
        let (through, keep) = self.first_arg_names(c, args, call);
        let kind = WriteKind::InplaceModule {
            call,
            ctor: arg.call,
        };
        let w = WriteSpec::new(kind, arg.arg, call).through(through, keep);
        self.write(&tensors, w);
        if saves_result && self.grad_enabled {
            let mut saves = Saves::new();
            let assumes = self.assumption(std::slice::from_ref(&tensors));
            for t in tensors.clone() {
                if let Some(tt) = self.tensor(t).filter(|tt| tt.grad.is_possible()) {
                    let st = tt.storage;
                    saves.push(self.record_save(st, true, label, save_at, assumes));
                }
            }
            self.extend_history(&tensors, saves, None);
        }
    }

    /// Whether a torch layer saves its result and its input, as the op table measured the
    /// defaults and as the layer's options change that.
    fn layer_saves_what(
        &mut self,
        module: &ModuleObj,
        class: &str,
        spec: Option<&ops::ModuleSpec>,
    ) -> (bool, bool) {
        let (mut saves_result, mut saves_input) =
            spec.map_or((false, false), |s| (s.result, s.input));
        if ops::SAVES_WEIGHTS_ALWAYS.contains(&class) {
            // The table measures the defaults. Measured with torch 2.15 on CPU: with
            // `batch_first=True` the layer reads a transposed copy of its input; a bidirectional
            // LSTM or one with `proj_size` returns a new tensor, not the output it saved.
            saves_input &= self.layer_option_off(module, "batch_first");
            saves_result &= self.layer_option_off(module, "bidirectional")
                && self.layer_option_off(module, "proj_size");
        }
        if class.starts_with("AdaptiveAvgPool") {
            let global = self.intern(GLOBAL_POOL);
            saves_input &= module.attrs.get(&global).map(|v| v.as_slice()) != Some(&[TRUE]);
        }
        (saves_result, saves_input)
    }

    /// A layer call's input tensors (those inside tuples and lists too: an RNN's `(h, c)`
    /// state), and a weighted bag's per-sample weights (by keyword too), which are inputs as
    /// well.
    fn layer_inputs(&mut self, class: &str, args: &Args) -> (Vals, Vals) {
        let mut inputs: Vals = self.flat_tensors(
            &args
                .positional
                .iter()
                .flat_map(|(v, _)| v.iter().copied())
                .collect(),
        );
        let bag = (class == "EmbeddingBag")
            .then(|| self.bag_weights(args, ops::MODULE_BAG_WEIGHTS_AT))
            .flatten()
            .map(|v| self.flat_tensors(&v))
            .unwrap_or_default();
        for v in &bag {
            if !inputs.contains(v) {
                inputs.push(*v);
            }
        }
        if inputs.len() > MAX_VALUES {
            inputs.truncate(MAX_VALUES);
        }
        (inputs, bag)
    }

    /// What a layer saves of a loss's target (second or by keyword: `criterion(out,
    /// target=label)`) and of a recurrent state.
    fn save_target_and_state(
        &mut self,
        class: &str,
        target: bool,
        args: &Args,
        params: &Vals,
        (label, save_at, assumes): (OpLabel, Span, Option<GradIf>),
    ) -> Saves {
        let mut saves = Saves::new();
        if target {
            let target = (args.named_or_at(known::TARGET, 1))
                .map(|v| self.flat_tensors(v))
                .unwrap_or_default();
            for v in target {
                saves.extend(self.save_input(v, label, save_at, assumes));
            }
        }
        if ops::SAVES_STATE.contains(&class) {
            let state = (args.positional.get(1).map(|(v, _)| v))
                .or_else(|| args.keyword(known::HX).map(|(v, ..)| v))
                .map(|v| self.flat_tensors(v))
                .unwrap_or_default();
            // The weights' gradients read the state; with frozen weights only the LSTMs' cell
            // arithmetic does (both states of `LSTM`, the cell state of `LSTMCell`).
            let weights_grad =
                (params.iter()).any(|p| self.tensor(*p).is_some_and(|t| t.grad.is_possible()));
            let kept = match class {
                _ if weights_grad => 0,
                "LSTM" => 0,
                "LSTMCell" => 1,
                _ => state.len(),
            };
            for v in state.into_iter().skip(kept) {
                saves.extend(self.save_input(v, label, save_at, assumes));
            }
        }
        saves
    }

    /// Which gradients of a layer call read its parameters.
    fn layer_params_read(
        &self,
        class: &str,
        args: &Args,
        inputs_grad: bool,
        input_grad: bool,
    ) -> ParamsRead {
        let state_grad = (args.positional.get(1).map(|(v, _)| v))
            .or_else(|| args.keyword(known::HX).map(|(v, ..)| v))
            .is_some_and(|v| self.arg_kind(&self.flat_tensors(v)) == ArgKind::Grad);
        // (A recurrent state is no input here: a cell reads its input weights only for the
        // input's gradient, whatever the state requires.)
        let operand_grad = match ops::SAVES_STATE.contains(&class) {
            true => (args.positional.first())
                .is_some_and(|(v, _)| self.arg_kind(&self.flat_tensors(v)) == ArgKind::Grad),
            false => inputs_grad,
        };
        ParamsRead {
            input_grad: operand_grad,
            state_grad,
            fallback: input_grad,
        }
    }

    /// The parameters of a torch layer its backward reads, as the op table measured them per
    /// parameter (`nn.Linear`'s weight when the input requires grad, never its bias; a
    /// convolution's weight always; a cell's hidden weights when it is given a state that
    /// requires grad); leaf tensors the table does not name, or a layer it does not measure: all
    /// of them when the input requires grad.
    fn params_saved(
        &self,
        module: &ModuleObj,
        class: &str,
        params: &Vals,
        read: ParamsRead,
    ) -> Vals {
        let table = ops::table()
            .module(class)
            .map(|s| &s.saved_params)
            .filter(|t| !t.is_empty());
        let mut out = Vals::new();
        let mut named = FxHashSet::default();
        // (A recurrent layer's deeper layers and reverse direction read what its first layer
        // does, their input being the layer below's output, which requires grad.)
        let names: Vec<(String, ops::ParamSaved)> = match table {
            Some(t) if ops::SAVES_WEIGHTS_ALWAYS.contains(&class) => (module.attrs.keys())
                .filter_map(|n| {
                    let name = self.name(*n);
                    let (stem, layer) = name.split_once("_l")?;
                    let deeper = !layer.starts_with('0');
                    let when = match *t.get(&format!("{stem}_l0"))? {
                        ops::ParamSaved::InputGrad if deeper => ops::ParamSaved::Always,
                        w => w,
                    };
                    Some((name.to_string(), when))
                })
                .collect(),
            _ => (table.into_iter().flatten())
                .map(|(n, w)| (n.clone(), *w))
                .collect(),
        };
        for (name, when) in &names {
            let saved = match when {
                ops::ParamSaved::Always => true,
                ops::ParamSaved::InputGrad => read.input_grad,
                ops::ParamSaved::Never => read.state_grad && name.starts_with("weight_hh"),
            };
            for v in (self.layer_param(module, name).iter()).filter(|v| params.contains(v)) {
                named.insert(*v);
                if saved {
                    out.push(*v);
                }
            }
        }
        if read.fallback {
            out.extend(params.iter().copied().filter(|p| !named.contains(p)));
        }
        out
    }

    /// A torch layer's parameter by its name in the op table, dotted for a sublayer's
    /// (`out_proj.weight`).
    fn layer_param(&self, module: &ModuleObj, path: &str) -> Vals {
        let attr = |m: &ModuleObj, name: &str| -> Vals {
            (m.attrs.iter())
                .find(|(n, _)| self.name(**n) == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        match path.split_once('.') {
            None => attr(module, path),
            Some((owner, rest)) => (attr(module, owner).iter())
                .filter_map(|m| match self.obj(*m) {
                    Obj::Module(sub) => Some(self.layer_param(sub, rest)),
                    _ => None,
                })
                .flatten()
                .collect(),
        }
    }

    /// A constructor option of a torch layer (kept by [`Self::new_module`]) that is not given, or
    /// known to be `False`, `None` or `0`.
    /// Whether `v` is the integer 1, or a tuple or list of ones (an adaptive pool's global size).
    pub(super) fn all_ones(&self, v: &Vals) -> bool {
        if self.one_int(v) == Some(1) {
            return true;
        }
        match v.as_slice() {
            [seq] => match self.obj(*seq) {
                Obj::Seq(slots) => {
                    !slots.is_empty() && slots.iter().all(|s| self.one_int(s) == Some(1))
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The training mode of module `m`'s tree is not known any more.
    pub(super) fn forget_training_mode(&mut self, m: ObjId) {
        let mut tree = Vec::new();
        self.submodules(m, TreeWalk::PreOrder, &mut tree);
        for (_, sub) in tree {
            if let Obj::Module(module) = self.obj_mut(sub) {
                module.attrs.remove(&known::TRAINING);
            }
        }
    }

    /// A dropout layer that returns its input itself (`nn.Dropout(0.0)(x) is x`, and it writes
    /// nothing with `inplace=True` either): with `p=0`, or in eval mode (`model.eval()`,
    /// `train(False)` on it or a module above it; measured with torch 2.15).
    fn dropout_passes(&self, module: &ModuleObj, class: &str) -> bool {
        let eval = module.attrs.get(&known::TRAINING).map(|v| v.as_slice()) == Some(&[FALSE]);
        ops::MODULE_DROPOUTS.contains(&class)
            && (eval || module.attrs.get(&known::P).and_then(|p| self.one_int(p)) == Some(0))
    }

    fn layer_option_off(&mut self, module: &ModuleObj, option: &str) -> bool {
        let option = self.intern(option);
        module
            .attrs
            .get(&option)
            .is_none_or(|v| matches!(v.as_slice(), [FALSE] | [NONE]) || self.one_int(v) == Some(0))
    }

    /// What calling a torch layer returns: its output, or a recurrent layer's tuple of the
    /// output and its states, all made by the one op: `(output, h_n)` of `RNN`/`GRU`,
    /// `(output, (h_n, c_n))` of `LSTM`, `(h_1, c_1)` of `LSTMCell`.
    fn layer_result(&mut self, class: &str, out: ObjId) -> Vals {
        let (with_output, states) = match class {
            "LSTM" => (true, 2),
            // `(attn_output, attn_weights)`.
            "GRU" | "RNN" | "MultiheadAttention" => (true, 1),
            "LSTMCell" => (false, 1),
            _ => return smallvec![out],
        };
        let Some(t) = self.tensor(out).cloned() else {
            return smallvec![out];
        };
        let mut made: Vec<Vals> = Vec::new();
        for _ in 0..states {
            let state = t.sibling(self.heap.len() as ObjId);
            made.push(smallvec![self.alloc(Obj::Tensor(state))]);
        }
        let tuple = match (with_output, made.len()) {
            (true, 1) => vec![smallvec![out], made.remove(0)],
            (true, _) => vec![smallvec![out], smallvec![self.alloc(Obj::Seq(made))]],
            (false, _) => [vec![smallvec![out]], made].concat(),
        };
        smallvec![self.alloc(Obj::Seq(tuple))]
    }

    /// All parameters of a module and its submodules.
    pub fn module_params(&self, m: ObjId, out: &mut Vals, seen: &mut FxHashSet<ObjId>) {
        if !seen.insert(m) {
            return;
        }
        match self.obj(m) {
            Obj::Module(module) => {
                for (_, vals) in self.attrs_in_creation_order(&module.attrs) {
                    for v in vals {
                        self.module_params(*v, out, seen);
                    }
                }
                for ch in &module.children {
                    self.module_params(*ch, out, seen);
                }
            }
            Obj::Tensor(_) if self.is_param(m) => out.push(m),
            Obj::Seq(items) => {
                for v in items.iter().flatten() {
                    self.module_params(*v, out, seen);
                }
            }
            _ => {}
        }
    }

    /// An object's attribute values in the order their objects were made (ties, one object
    /// under two names, by the names' text), as torch registers them: never the names' hash
    /// order, which the interner's ids decide (a walk bounded by a count, or a list of
    /// `parameters()` indexed by position, would depend on it).
    pub(crate) fn attrs_in_creation_order<'m>(
        &self,
        attrs: &'m FxHashMap<Name, Vals>,
    ) -> Vec<(Name, &'m Vals)> {
        let mut order: Vec<(Option<ObjId>, &str, Name, &'m Vals)> = (attrs.iter())
            .map(|(n, vals)| (vals.iter().min().copied(), self.name(*n), *n, vals))
            .collect();
        order.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        order.into_iter().map(|(.., n, vals)| (n, vals)).collect()
    }

    /// `model.named_parameters()`: each module of the tree, in the order `named_modules()` lists
    /// them, gives the leaf tensors its attributes hold, in the order they were made, named by
    /// its dotted path and the attribute (`fc1.weight`); a tensor two modules share comes once,
    /// as torch lists it. Leaf tensors held otherwise (in a list attribute, or an attribute that
    /// may hold several) come last, their names not known.
    fn named_params(&self, m: ObjId) -> Vec<(Option<String>, ObjId)> {
        let mut modules = Vec::new();
        self.submodules(m, TreeWalk::PreOrder, &mut modules);
        let mut seen = FxHashSet::default();
        let mut out = Vec::new();
        for (path, sub) in &modules {
            let Obj::Module(module) = self.obj(*sub) else {
                continue;
            };
            let mut own: Vec<(ObjId, Name)> = (module.attrs.iter())
                .filter_map(|(n, vs)| match vs.as_slice() {
                    [v] if self.is_param(*v) => Some((*v, *n)),
                    _ => None,
                })
                .collect();
            own.sort_unstable_by(|a, b| (a.0, self.name(a.1)).cmp(&(b.0, self.name(b.1))));
            for (p, n) in own {
                if seen.insert(p) {
                    let attr = self.name(n);
                    let full = match path.is_empty() {
                        true => attr.to_string(),
                        false => format!("{path}.{attr}"),
                    };
                    out.push((Some(full), p));
                }
            }
        }
        let mut rest = Vals::new();
        self.module_params(m, &mut rest, &mut FxHashSet::default());
        out.extend((rest.into_iter().filter(|p| seen.insert(*p))).map(|p| (None, p)));
        out
    }

    /// The modules under `m` with their dotted names, each once, in `out`, as `walk` says: `m`
    /// and its whole tree, each module before its submodules as `named_modules()` lists them
    /// (`eval()` sets them all) or after them (the order `apply` calls in); or `m`'s direct
    /// children (`named_children()`). Only registered modules: a plain list is not walked. Submodules come in the order they were registered: a container's
    /// children by position (named by their key where they have one), then attributes in the
    /// order their modules were made; an attribute that holds one of several modules gives each.
    pub(super) fn submodules(&self, m: ObjId, walk: TreeWalk, out: &mut Vec<(String, ObjId)>) {
        let mut seen = FxHashSet::default();
        if walk == TreeWalk::Children {
            seen.insert(m);
            for (name, sub) in self.direct_submodules(m) {
                if seen.insert(sub) {
                    out.push((name, sub));
                }
            }
            return;
        }
        let post = walk == TreeWalk::PostOrder;
        self.walk_tree(m, String::new(), post, out, &mut seen);
    }

    fn walk_tree(
        &self,
        m: ObjId,
        path: String,
        post: bool,
        out: &mut Vec<(String, ObjId)>,
        seen: &mut FxHashSet<ObjId>,
    ) {
        if !matches!(self.obj(m), Obj::Module(_)) || !seen.insert(m) {
            return;
        }
        if !post {
            out.push((path.clone(), m));
        }
        for (name, sub) in self.direct_submodules(m) {
            let sub_path = if path.is_empty() {
                name
            } else {
                format!("{path}.{name}")
            };
            self.walk_tree(sub, sub_path, post, out, seen);
        }
        if post {
            out.push((path, m));
        }
    }

    /// The modules `m` holds directly, with their names, in registration order.
    fn direct_submodules(&self, m: ObjId) -> Vec<(String, ObjId)> {
        let Obj::Module(module) = self.obj(m) else {
            return Vec::new();
        };
        // (A module under two names: the first by text, not by the names' hash order.)
        let key_of = |c: ObjId| {
            (module.attrs.iter())
                .filter(|(_, vs)| vs.as_slice() == [c])
                .map(|(n, _)| self.name(*n))
                .min()
                .map(str::to_string)
        };
        let mut subs: Vec<(String, ObjId)> = (module.children.iter().enumerate())
            .filter(|(_, c)| matches!(self.obj(**c), Obj::Module(_)))
            .map(|(k, c)| (key_of(*c).unwrap_or_else(|| k.to_string()), *c))
            .collect();
        let mut attrs: Vec<(String, ObjId)> = (module.attrs.iter())
            .flat_map(|(n, vs)| vs.iter().map(move |v| (*n, *v)))
            .filter(|(_, v)| matches!(self.obj(*v), Obj::Module(_)) && !module.children.contains(v))
            .map(|(n, v)| (self.name(n).to_string(), v))
            .collect();
        attrs.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        subs.extend(attrs);
        subs
    }

    /// `model.modules()`, `named_modules()`, `children()`, `named_children()`: one slot per
    /// module (a loop runs its body once for each, in order); with `named_`, `(name, module)`
    /// pairs. A tree of more modules than a list keeps slots for: one slot that may be any.
    fn module_list(&mut self, m: ObjId, meth: &str) -> Vals {
        let walk = if meth.ends_with("modules") {
            TreeWalk::PreOrder
        } else {
            TreeWalk::Children
        };
        let mut found = Vec::new();
        self.submodules(m, walk, &mut found);
        if found.len() > MAX_SLOTS {
            let all = found.into_iter().map(|(_, sub)| sub).collect();
            return smallvec![self.alloc(Obj::Seq(vec![all]))];
        }
        let slots = found
            .into_iter()
            .map(|(path, sub)| {
                if !meth.starts_with("named_") {
                    return smallvec![sub];
                }
                let path = self.intern(&path);
                let path = self.alloc(Obj::Str(path));
                smallvec![self.alloc(Obj::Seq(vec![smallvec![path], smallvec![sub]]))]
            })
            .collect();
        smallvec![self.alloc(Obj::Seq(slots))]
    }

    /// `model.apply(fn)`: `fn` called on every module of the tree, each after its submodules.
    fn apply_to_tree(&mut self, c: Code<'_>, e: ExprId, m: ObjId, args: &Args) -> Vals {
        let mut found = Vec::new();
        self.submodules(m, TreeWalk::PostOrder, &mut found);
        if let Some(f) = args.first().cloned() {
            for (_, sub) in found {
                let one = Args {
                    positional: vec![(smallvec![sub], None)],
                    keywords: Vec::new(),
                    spread: false,
                };
                self.call_one_of(c, e, &f, &one);
            }
        }
        smallvec![m]
    }

    /// The functional conv a module's `_conv_forward` runs: the module's class is, or derives
    /// from, `nn.Conv1d`, `nn.Conv2d` or `nn.Conv3d`.
    fn conv_functional(&self, m: ObjId) -> Option<&'static str> {
        let Obj::Module(mo) = self.obj(m) else {
            return None;
        };
        let base = match &mo.local {
            Some(k) => self.torch_layer_base(k)?,
            None => self.name(mo.class).to_string(),
        };
        match base.as_str() {
            "Conv1d" => Some("torch.nn.functional.conv1d"),
            "Conv2d" => Some("torch.nn.functional.conv2d"),
            "Conv3d" => Some("torch.nn.functional.conv3d"),
            _ => None,
        }
    }

    pub(super) fn module_method(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        meth: Name,
        args: &Args,
    ) -> Vals {
        let call = c.span(e);
        if let Some(v) = self.own_method(c, e, m, meth, args) {
            return v;
        }
        let name = self.name(meth).to_string();
        match name.as_str() {
            // `for name, layer in self.blocks.items()` of an `nn.ModuleDict`: its layers in
            // insertion order, each in a slot of its own (a loop runs them one by one).
            "values" | "items" if self.container_of(m).is_some() => {
                self.container_entries(m, name == "items")
            }
            "keys" if self.container_of(m).is_some() => match self.module_dict_key_list(m) {
                Some(keys) => smallvec![keys],
                None => smallvec![OTHER],
            },
            "parameters" | "named_parameters" => self.parameters_of(m, name == "named_parameters"),
            "forward" => self.call_module(c, e, m, args),
            // `self._conv_forward(x, weight, bias)` in the `forward` of a subclass of
            // `nn.Conv2d` (a causal or padded-same conv, a weight-standardised one): the
            // functional conv with the weight given.
            "_conv_forward" => match self.conv_functional(m) {
                Some(path) => {
                    let path = self.intern(path);
                    self.call_path(c, e, path, args)
                }
                None => self.opaque_call(args, call),
            },
            "children" | "named_children" | "modules" | "named_modules" => {
                self.module_list(m, &name)
            }
            "apply" => self.apply_to_tree(c, e, m, args),
            "requires_grad_" => self.tree_requires_grad(m, args),
            // `model.get_submodule("head.fc")`, `get_parameter("head.fc.weight")`.
            "get_submodule" | "get_parameter" | "get_buffer" => {
                let path = args
                    .positional
                    .first()
                    .and_then(|(v, _)| self.one_exact_str(v));
                match path.and_then(|p| self.dotted_attr(m, p)) {
                    Some(v) => smallvec![v],
                    None => smallvec![self.alloc(Obj::Unknown)],
                }
            }
            "add_module" | "register_module" => {
                if let (Some((keys, _)), Some((v, _))) =
                    (args.positional.first(), args.positional.get(1))
                {
                    let key = match self.str_values(keys).as_deref() {
                        Some([key]) => Some(*key),
                        _ => None,
                    };
                    let v = v.clone();
                    let stmt = self.stmt.filter(|s| s.item == c.item).map(|s| s.stmt);
                    self.add_named_module(c, e, m, key, v, stmt);
                }
                smallvec![OTHER]
            }
            "register_parameter" | "register_buffer" => self.register_by_name(c, e, m, args),
            "append" => {
                if let Some(v) = args.first().cloned() {
                    if let Obj::Module(module) = self.obj_mut(m) {
                        module.children.extend(v);
                    }
                }
                smallvec![OTHER]
            }
            "eval" | "train" => self.set_training(m, name == "eval", args, call),
            _ if ops::MODULE_RETURNS_SELF.contains(&name.as_str()) => smallvec![m],
            "register_forward_hook" | "register_forward_pre_hook" => {
                self.register_forward_hook(m, &name, args)
            }
            "zero_grad" => {
                let mut params = Vals::new();
                self.module_params(m, &mut params, &mut FxHashSet::default());
                self.zero_grads(&params, args, call);
                smallvec![OTHER]
            }
            "register_full_backward_hook" => {
                if let Obj::Module(module) = self.obj_mut(m) {
                    module.backward_hook = Some(call);
                }
                smallvec![OTHER]
            }
            "state_dict" => self.state_dict_of(m, call),
            "load_state_dict" => self.load_state_dict(c, e, m, args),
            _ => self.opaque_call(args, call),
        }
    }

    /// A method the module itself answers before torch's: `ctx.save_for_backward`/
    /// `mark_dirty` of a custom autograd function, a callable attribute, a method (or a
    /// property's layer) of its class, a dict subclass's entries.
    fn own_method(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        m: ObjId,
        meth: Name,
        args: &Args,
    ) -> Option<Vals> {
        let call = c.span(e);
        if let Obj::Module(module) = self.obj(m) {
            if module.class == known::FUNCTION_CTX && meth == known::SAVE_FOR_BACKWARD {
                self.save_for_backward(m, args);
                return Some(smallvec![OTHER]);
            }
            if module.class == known::FUNCTION_CTX
                && (meth == known::MARK_DIRTY || meth == known::MARK_NON_DIFFERENTIABLE)
            {
                self.mark_dirty(m, meth, args);
                return Some(smallvec![OTHER]);
            }
            if let Some(v) = module.attrs.get(&meth).cloned() {
                return Some(self.call_one_of(c, e, &v, args));
            }
            if let Some(k) = module.local.clone() {
                if let Some(def) = self.find_method(&k, meth) {
                    // `self.norm1(out)` of an `@property` returning a layer: the getter's result,
                    // called.
                    if self.is_property(def) {
                        let got = self.inline(def, Some(m), &Args::default(), call);
                        return Some(self.call_one_of(c, e, &got, args));
                    }
                    return Some(self.inline(def, Some(m), args, call));
                }
                // `self.act_layer(inplace=True)` with `act_layer = nn.ReLU` in the class body.
                if let Some(v) = self.class_attribute(&k, meth) {
                    return Some(self.call_one_of(c, e, &v, args));
                }
            }
            // `td.items()`, `td.get("reward")` of a `dict` subclass: the methods of its dict.
            if let Some(d) = self.dict_items(m) {
                return Some(self.seq_call(c, e, d, meth, args));
            }
        }
        None
    }

    /// `parameters()` (one value of all of them) and `named_parameters()` (`(name,
    /// parameter)` pairs, one per parameter, in order).
    fn parameters_of(&mut self, m: ObjId, named: bool) -> Vals {
        let mut ps = Vals::new();
        self.module_params(m, &mut ps, &mut FxHashSet::default());
        let params = self.alloc(Obj::Params {
            owners: smallvec![m],
            tensors: ps.clone(),
        });
        // `(name, parameter)` pairs, one per parameter, in order.
        if named {
            let pairs = (self.named_params(m).into_iter())
                .map(|(path, p)| {
                    let path = match path {
                        Some(path) => {
                            let n = self.intern(&path);
                            self.string(n)
                        }
                        None => OTHER,
                    };
                    smallvec![self.alloc(Obj::Seq(vec![smallvec![path], smallvec![p]]))]
                })
                .collect();
            return smallvec![self.alloc(Obj::Seq(pairs))];
        }
        smallvec![params]
    }

    /// Whether a module has parameters and every one of them is frozen.
    pub(super) fn all_frozen(&self, m: ObjId) -> bool {
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        !params.is_empty() && params.iter().all(|p| self.frozen.contains(p))
    }

    /// Every parameter of a module's tree made (not) to require grad, as `requires_grad_(on)`
    /// of each.
    pub(super) fn set_tree_requires_grad(&mut self, m: ObjId, on: bool) {
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        for p in params {
            self.set_requires_grad(p, on);
        }
    }

    /// `self.gru.requires_grad_(False)`: every parameter of the tree frozen, as the
    /// tensor-level call freezes one; `requires_grad_()` / `(True)` unfreezes them. The
    /// module itself is returned.
    fn tree_requires_grad(&mut self, m: ObjId, args: &Args) -> Vals {
        let flag = (args.positional.first().map(|(v, _)| v))
            .or_else(|| args.keyword(known::REQUIRES_GRAD).map(|(v, ..)| v));
        let on = match flag.map(|v| v.as_slice()) {
            None => Some(true),
            Some([f]) if *f == FALSE => Some(false),
            Some([t]) if *t == TRUE => Some(true),
            _ => None,
        };
        if let Some(on) = on {
            self.set_tree_requires_grad(m, on);
        }
        smallvec![m]
    }

    /// `self.register_buffer("center", t)` is `self.center = t` (a buffer or a parameter by
    /// name; `None` registers nothing to write).
    fn register_by_name(&mut self, c: Code<'_>, e: ExprId, m: ObjId, args: &Args) -> Vals {
        let value = args.positional.get(1).map(|(v, _)| v.clone()).or_else(|| {
            args.keywords
                .iter()
                .find(|(n, ..)| matches!(self.name(*n), "tensor" | "param"))
                .map(|(_, v, ..)| v.clone())
        });
        if let (Some((names, _)), Some(vals)) = (args.positional.first(), value) {
            if let Some([attr]) = self.str_values(names).as_deref() {
                let stmt = self.stmt.filter(|s| s.item == c.item).map(|s| s.stmt);
                self.set_attribute(c, e, m, *attr, vals, stmt);
            }
        }
        smallvec![OTHER]
    }

    /// `model.eval()`, `model.train(False)`: `training` of the whole tree, as torch's
    /// `Module.train` sets it: `eval()` is `self.train(False)`, and each child's `train` runs,
    /// a class's own where it defines one (a LoRA layer merging its weights into the frozen
    /// ones when switched to eval), whose `super().train(mode)` goes on into its children.
    fn set_training(&mut self, m: ObjId, eval: bool, args: &Args, call: Span) -> Vals {
        let given = args
            .first()
            .or_else(|| args.keyword(known::MODE).map(|(v, ..)| v));
        let mode = match given.map(|v| v.as_slice()) {
            _ if eval => FALSE,
            None | Some([TRUE]) => TRUE,
            Some([FALSE]) => FALSE,
            Some(_) => OTHER,
        };
        let mode_args = Args {
            positional: vec![(smallvec![mode], None)],
            ..Args::default()
        };
        if let Some(own) = self.own_train(m).filter(|_| eval) {
            self.inline(own, Some(m), &mode_args, call);
            return smallvec![m];
        }
        let mut seen = FxHashSet::default();
        self.train_tree(m, mode, &mode_args, call, &mut seen);
        smallvec![m]
    }

    /// `training` of `m` set to `mode`, and each child's `train(mode)` run: its class's own,
    /// or this again.
    fn train_tree(
        &mut self,
        m: ObjId,
        mode: ObjId,
        mode_args: &Args,
        call: Span,
        seen: &mut FxHashSet<ObjId>,
    ) {
        if !seen.insert(m) {
            return;
        }
        if let Obj::Module(module) = self.obj_mut(m) {
            module.attrs.insert(known::TRAINING, smallvec![mode]);
        }
        for (_, child) in self.direct_submodules(m) {
            match self.own_train(child) {
                Some(own) if seen.insert(child) => {
                    self.inline(own, Some(child), mode_args, call);
                }
                Some(_) => {}
                None => self.train_tree(child, mode, mode_args, call, seen),
            }
        }
    }

    /// The `train` method a module's class of the program defines.
    fn own_train(&self, m: ObjId) -> Option<DefLoc> {
        let Obj::Module(module) = self.obj(m) else {
            return None;
        };
        let class = module.local.clone()?;
        self.find_method(&class, known::TRAIN)
    }

    /// Module `m` called at `call` after a write through a `state_dict()` value of it (or of a
    /// module whose parameters it holds) added another module's parameters, and the dict was
    /// loaded into another module: it runs with the changed weights. (Not an EMA model updated
    /// through its own state dict, which is meant to change.)
    fn read_after_state_dict_write(&mut self, m: ObjId, call: Span) {
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        let holds: FxHashSet<ObjId> = (params.iter())
            .filter_map(|p| self.tensor(*p).map(|t| t.storage))
            .collect();
        let writes = std::mem::take(&mut self.state_dicts_out.writes);
        for (write, owner, made, loaded) in writes {
            let hit = owner == m
                || (self.state_dicts_out.params.iter())
                    .any(|(s, (o, _))| *o == owner && holds.contains(s));
            if hit && loaded {
                self.report(Event::StateDictWrite {
                    write,
                    made,
                    read: call,
                });
            } else {
                self.state_dicts_out
                    .writes
                    .push((write, owner, made, loaded));
            }
        }
    }

    /// A dict of `.detach()` of each parameter: the same memory, which later steps write (a
    /// "best" state kept this way is not a copy).
    fn state_dict_of(&mut self, m: ObjId, call: Span) -> Vals {
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        for p in &params {
            if let Some(storage) = self.tensor(*p).map(|t| t.storage) {
                self.state_dicts_out.params.insert(storage, (m, call));
            }
        }
        let slots: Vec<Vals> = (params.into_iter().take(MAX_SLOTS))
            .map(|p| smallvec![self.detach_of(p, call)])
            .collect();
        let d = self.alloc(Obj::Seq(slots));
        self.dict_objs.insert(d);
        self.state_dicts.insert(d, call);
        smallvec![d]
    }

    /// `load_state_dict` reads every entry of the state given (a stale snapshot is read
    /// here), then copies each entry into its parameter, in place under `no_grad`: what a
    /// forward saved of them is changed before its backward.
    fn load_state_dict(&mut self, c: Code<'_>, e: ExprId, m: ObjId, args: &Args) -> Vals {
        let call = c.span(e);
        if let Some((v, Some(arg))) = args.positional.first() {
            self.read_entries(v, c.span(*arg));
            // (A module loaded afresh no longer has what was written into it; a dict of
            // another module's written into, loaded here: the code takes it for a state of its
            // own.)
            self.state_dicts_out
                .writes
                .retain(|(_, owner, ..)| *owner != m);
            for d in v.iter().filter_map(|d| self.state_dicts.get(d).copied()) {
                for (_, owner, made, loaded) in &mut self.state_dicts_out.writes {
                    if *made == d && *owner != m {
                        *loaded = true;
                    }
                }
            }
        }
        if (args.keyword(known::ASSIGN)).is_some_and(|(v, ..)| v.as_slice() == [TRUE]) {
            self.load_assigned(c, e, m);
            return smallvec![OTHER];
        }
        let mut params = Vals::new();
        self.module_params(m, &mut params, &mut FxHashSet::default());
        if !params.is_empty() {
            let spec = WriteSpec::new(WriteKind::LoadState, call, call)
                .no_leaf_check()
                .call(e);
            self.write(&params, spec);
        }
        smallvec![OTHER]
    }

    /// What a dotted path of attribute names (`"head.fc"`) names below module `m`, when each
    /// step holds one known value (`""`: `m` itself).
    fn dotted_attr(&mut self, m: ObjId, path: Name) -> Option<ObjId> {
        let path = self.name(path).to_string();
        let mut cur = m;
        for part in path.split('.').filter(|p| !p.is_empty()) {
            let name = self.intern(part);
            let Obj::Module(module) = self.obj(cur) else {
                return None;
            };
            match module.attrs.get(&name).map(|v| v.as_slice()) {
                Some([one]) => cur = *one,
                _ => return None,
            }
        }
        Some(cur)
    }

    /// `.values()` / `.items()` (`items`) of an `nn.ModuleDict`: its layers in insertion order,
    /// each in a slot of its own (a loop runs them one by one).
    fn container_entries(&mut self, m: ObjId, items: bool) -> Vals {
        let children = match self.obj(m) {
            Obj::Module(module) => module.children.clone(),
            _ => Vec::new(),
        };
        let mut slots = Vec::with_capacity(children.len());
        for child in children {
            slots.push(if items {
                smallvec![self.alloc(Obj::Seq(vec![smallvec![OTHER], smallvec![child]]))]
            } else {
                smallvec![child]
            });
        }
        smallvec![self.alloc(Obj::Seq(slots))]
    }

    /// `m.register_forward_hook(hook)` / `m.register_forward_pre_hook(hook)` (`name`): the hook
    /// runs on each later call of `m`. (`with_kwargs=True` hooks take other arguments: not
    /// followed.)
    fn register_forward_hook(&mut self, m: ObjId, name: &str, args: &Args) -> Vals {
        let kw = self.intern("with_kwargs");
        let with_kwargs = self.keyword_on(args, kw);
        if let (Some(hook), false) = (args.first().cloned(), with_kwargs) {
            let maybe = self.uncertain_receiver;
            if let Obj::Module(module) = self.obj_mut(m) {
                if name == "register_forward_hook" {
                    if maybe {
                        module.maybe_hooks.extend(hook.iter().copied());
                    }
                    module.hooks.extend(hook);
                } else {
                    module.pre_hooks.extend(hook);
                }
            }
        }
        smallvec![self.alloc(Obj::Unknown)]
    }

    /// A method of list or dict `s` called at `call`.
    /// `d.update(other)`, `d.update(k=v)`: stores, as `d[k] = v`.
    fn dict_update(&mut self, s: ObjId, args: &Args, call: Span) -> Vals {
        if let Some(other) = args.first() {
            match self.keyed_entries(other) {
                Some(entries) => {
                    for (k, v, _) in entries {
                        self.store_entry(s, Some(k), Index::Other, &Vals::new(), &v, call);
                    }
                }
                None => {
                    // (Keys not known: any entry may be replaced.)
                    if let Obj::Seq(items) = self.obj_mut(s) {
                        for slot in items.iter_mut() {
                            if !slot.contains(&UNKNOWN) {
                                slot.push(UNKNOWN);
                            }
                        }
                    }
                    let add = self.elements(other);
                    let len = match self.obj(s) {
                        Obj::Seq(items) => items.len(),
                        _ => 0,
                    };
                    self.seq_insert(s, len.min(MAX_SLOTS - 1), &add);
                }
            }
        }
        for (k, v, ..) in args.keywords.clone() {
            self.store_entry(s, Some(k), Index::Other, &Vals::new(), &v, call);
        }
        smallvec![NONE]
    }

    /// `d.setdefault(k, v)`: the entry, or `v` stored at `k` where there is none.
    fn dict_setdefault(&mut self, s: ObjId, args: &Args, call: Span) -> Vals {
        let key = args.first().and_then(|k| self.one_exact_str(k));
        let v = (args.positional.get(1)).map_or_else(|| smallvec![NONE], |(v, _)| v.clone());
        let empty = matches!(self.obj(s), Obj::Seq(items) if items.is_empty());
        match key.map(|k| (k, self.key_slot(s, k))) {
            Some((_, Some(Some(at)))) => match self.obj(s) {
                Obj::Seq(items) => items[at].clone(),
                _ => smallvec![UNKNOWN],
            },
            Some((k, Some(None))) | Some((k, None)) if empty || self.dict_keys.contains_key(&s) => {
                self.store_entry(s, Some(k), Index::Other, &Vals::new(), &v, call);
                v
            }
            _ => {
                let mut out = self.elements(&smallvec![s]);
                out.extend(v);
                out
            }
        }
    }

    /// `kwargs.get("act", nn.ReLU)` of a dict whose keys are known: the entry, or the default
    /// where there is none; `pop` takes the entry out.
    fn keyed_take(&mut self, s: ObjId, pop: bool, args: &Args, call: Span) -> Vals {
        let slot = args
            .first()
            .and_then(|k| self.one_exact_str(k))
            .and_then(|key| self.key_slot(s, key));
        let Some(slot) = slot else {
            self.read_any_slot(s, call);
            return self.elements(&smallvec![s]);
        };
        let Some(at) = slot else {
            return args
                .positional
                .get(1)
                .map_or_else(|| smallvec![NONE], |(v, _)| v.clone());
        };
        // (A read of the entry, as `d[k]`: a write since it was stored is seen here.)
        self.read_slot(s, Slot::At(at as u32), call);
        let Obj::Seq(items) = self.obj_mut(s) else {
            return smallvec![UNKNOWN];
        };
        if !pop {
            return items[at].clone();
        }
        let entry = items.remove(at);
        self.exact_seqs.remove(&s);
        self.slot_removed(s, at);
        if let Some(keys) = self.dict_keys.get_mut(&s) {
            keys.remove(at);
        }
        entry
    }

    /// `xs.pop()` takes the last item out, `xs.pop(i)` the item at a known `i`, reading it
    /// as `xs[-1]` and `xs[i]` do (a dict given a constant int key is read where `d[i]` reads
    /// it, and not taken apart); otherwise (an unknown key or position) any item may be read,
    /// and the list is kept whole. `get` reads as `pop` does, taking nothing out.
    /// A deque with a known `maxlen` keeps that many items: the ones past it dropped from the
    /// front (after an append, `front`) or from the back (after `appendleft`).
    pub(super) fn trim_deque(&mut self, s: ObjId, front: bool) {
        let Some(&max) = self.deque_maxlen.get(&s) else {
            return;
        };
        loop {
            let len = match self.obj(s) {
                Obj::Seq(items) => items.len(),
                _ => return,
            };
            if len <= max {
                return;
            }
            let at = if front { 0 } else { len - 1 };
            if let Obj::Seq(items) = self.obj_mut(s) {
                items.remove(at);
            }
            self.slot_removed(s, at);
        }
    }

    fn seq_take(&mut self, s: ObjId, pop: bool, args: &Args, call: Span) -> Vals {
        let dict = self.dict_objs.contains(&s);
        let len = match self.obj(s) {
            Obj::Seq(items) => Some(items.len()),
            _ => None,
        };
        let at = match args.first() {
            None if pop && !dict => len.and_then(|n| n.checked_sub(1)),
            Some(i) => (self.one_int(i).zip(len)).and_then(|(i, n)| position_in(i, n)),
            None => None,
        };
        let Some(at) = at else {
            self.read_any_slot(s, call);
            return self.elements(&smallvec![s]);
        };
        self.read_slot(s, Slot::At(at as u32), call);
        // (The last slot of a full list stands for every item past it.)
        let whole = !dict && len.is_some_and(|n| n < MAX_SLOTS);
        let Obj::Seq(items) = self.obj_mut(s) else {
            return smallvec![UNKNOWN];
        };
        if !(pop && whole) {
            return items[at].clone();
        }
        let entry = items.remove(at);
        self.slot_removed(s, at);
        entry
    }

    /// `s.meth(...)` of a list, tuple or dict: its method; or, where `meth` is no method of a
    /// dict and names an entry of `s` (a dict whose entries are attributes too: `Munch`,
    /// `EasyDict`; a record's field), that entry called (`nets.disc(x)`).
    pub(super) fn seq_call(
        &mut self,
        c: Code<'_>,
        e: ExprId,
        s: ObjId,
        meth: Name,
        args: &Args,
    ) -> Vals {
        const DICT_METHODS: &[&str] = &[
            "clear",
            "copy",
            "fromkeys",
            "get",
            "items",
            "keys",
            "pop",
            "popitem",
            "setdefault",
            "update",
            "values",
        ];
        if let Some(v) = self.arg_parser_method(s, meth, args, c.span(e)) {
            return v;
        }
        let entry = match (self.key_slot(s, meth).flatten(), self.obj(s)) {
            (Some(slot), Obj::Seq(items)) if !DICT_METHODS.contains(&self.name(meth)) => {
                items.get(slot).cloned()
            }
            _ => None,
        };
        let Some(entry) = entry else {
            return self.seq_method(s, meth, args, c.span(e));
        };
        let mut res = Vals::new();
        for f in entry {
            res.extend(self.call_value(c, e, f, args));
        }
        res
    }

    pub(super) fn seq_method(&mut self, s: ObjId, meth: Name, args: &Args, call: Span) -> Vals {
        match self.name(meth) {
            // `d.__setitem__(k, v)` (a hook's `lambda m, i, o: feats.__setitem__(name, o)`),
            // `d.update(k=v)`, `d.update(other)`, `d.setdefault(k, v)`: stores, as `d[k] = v`.
            "__setitem__" => {
                if let [(k, _), (v, _), ..] = args.positional.as_slice() {
                    let key = self.one_exact_str(k);
                    let index = self.one_int(k).map_or(Index::Other, Index::At);
                    self.store_entry(s, key, index, &Vals::new(), v, call);
                }
                smallvec![NONE]
            }
            "update" if self.dict_objs.contains(&s) || self.dict_keys.contains_key(&s) => {
                self.dict_update(s, args, call)
            }
            "setdefault" if self.dict_objs.contains(&s) => self.dict_setdefault(s, args, call),
            // (A deque's ends: `appendleft` puts in front, one slot; `extendleft` puts its
            // items in front too, in one slot that may be any of them.)
            "appendleft" | "extendleft" => {
                let extend = self.name(meth) == "extendleft";
                let mut add = Vals::new();
                for v in args.all_values().cloned().collect::<Vec<_>>() {
                    match extend {
                        true => add.extend(self.elements(&v)),
                        false => add.extend(v.iter().copied()),
                    }
                }
                if let Obj::Seq(items) = self.obj_mut(s) {
                    items.insert(0, Vals::new());
                }
                self.slot_inserted_front(s);
                self.seq_insert(s, 0, &add);
                self.trim_deque(s, false);
                smallvec![OTHER]
            }
            // (Orders a deque's items anew: which is where is no longer followed.)
            "rotate" | "reverse" | "remove"
                if self.deque_maxlen.contains_key(&s) || self.name(meth) == "rotate" =>
            {
                let all = self.elements(&smallvec![s]);
                if let Obj::Seq(items) = self.obj_mut(s) {
                    *items = vec![all];
                }
                self.exact_seqs.remove(&s);
                smallvec![OTHER]
            }
            "popleft" => {
                let first = Args {
                    positional: vec![(smallvec![self.position(0)], None)],
                    ..Args::default()
                };
                self.seq_take(s, true, &first, call)
            }
            m @ ("append" | "extend" | "insert" | "add") => {
                let extend = m == "extend";
                let mut add = Vals::new();
                for v in args.all_values().cloned().collect::<Vec<_>>() {
                    if extend {
                        add.extend(self.elements(&v));
                    } else {
                        add.extend(v.iter().copied());
                    }
                }
                let slot = match self.obj(s) {
                    Obj::Seq(items) => items.len().min(MAX_SLOTS - 1),
                    _ => 0,
                };
                self.seq_insert(s, slot, &add);
                self.trim_deque(s, true);
                smallvec![OTHER]
            }
            m @ ("pop" | "get") if self.dict_keys.contains_key(&s) => {
                self.keyed_take(s, m == "pop", args, call)
            }
            "keys" => match self.dict_key_list(s).or_else(|| self.object_key_list(s)) {
                Some(keys) => smallvec![keys],
                None => smallvec![OTHER],
            },
            "copy" => smallvec![self.copy_seq(s, false)],
            // A dict with its keys all known: its values one by one, in order.
            "values" => match self.obj(s) {
                Obj::Seq(vs) if self.all_keys_known(s) => {
                    let vs = vs.clone();
                    let list = self.alloc(Obj::Seq(vs));
                    self.exact_seqs.insert(list);
                    smallvec![list]
                }
                _ => smallvec![self.copy_seq(s, true)],
            },
            m @ ("pop" | "get") => self.seq_take(s, m == "pop", args, call),
            "items" => {
                // A dict with its keys all known: its `(key, value)` pairs one by one.
                if let Some(pairs) = self.dict_item_list(s) {
                    return smallvec![pairs];
                }
                let e = self.elements(&smallvec![s]);
                let key = match self.object_keys.get(&s) {
                    Some(keys) => keys.clone(),
                    None => smallvec![OTHER],
                };
                let pair = self.alloc(Obj::Seq(vec![key, e]));
                smallvec![self.alloc(Obj::Seq(vec![smallvec![pair]]))]
            }
            _ => smallvec![OTHER],
        }
    }
}
