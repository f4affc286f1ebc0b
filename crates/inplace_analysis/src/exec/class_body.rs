//! What a class body binds besides its methods (its statement items).
//!
//! Class attributes: `expansion = 4`, `act_layer = nn.ReLU` read through an instance
//! (`self.act_layer(inplace=True)`) or the class, when the instance has no attribute of that
//! name; the value is evaluated where it is read.
//!
//! Record classes: a `typing.NamedTuple` subclass or a `@dataclass` without an `__init__` of
//! its own. Their fields are the annotated names of the class body, in order (a base record's
//! first); calling the class binds each field, from the arguments by position or keyword, else
//! from its default. `__post_init__` runs after.
//!
//! Record types made by a call (`collections.namedtuple("State", ["h", "c"])`,
//! `typing.NamedTuple("State", [("h", Tensor), ...])`): an instance is a tuple whose slots
//! the field names also name (`state.h`, `state[0]`, `h, c = state`).

use super::{Args, Code, Interp};
use crate::domain::*;
use crate::ir::{DefLoc, Expr, ExprId, ItemId, List, Name, Span, Stmt};
use smallvec::smallvec;
use std::sync::Arc;

/// A field: its name, and the item and expression of its default, if it has one.
type Field = (Name, Option<(ItemId, crate::ir::ExprId)>);

/// Deepest chain of base classes followed for fields and class attributes.
const MAX_BASES: usize = 8;

impl Interp<'_, '_> {
    /// Run a class's or function's decorators of the program's own code on it, innermost
    /// first, for what they do (`@register` filling a registry, `@MODELS.register()`,
    /// `@register_model`); the name keeps the definition (a registering decorator gives it
    /// back). A decorator the analysis cannot see is skipped.
    pub(super) fn apply_decorators(&mut self, c: Code<'_>, decorators: List, class: ObjId) {
        let found: Vec<(ExprId, Vals)> = c
            .body
            .exprs_of(decorators)
            .map(|d| (d, self.eval(c, d)))
            .collect();
        for (d, vals) in found.into_iter().rev() {
            let callees: Vals = vals
                .into_iter()
                .filter(|v| matches!(self.obj(*v), Obj::Func(_) | Obj::Bound(..)))
                .collect();
            if callees.is_empty() {
                continue;
            }
            let args = Args {
                positional: vec![(smallvec![class], None)],
                keywords: Vec::new(),
                spread: false,
            };
            // (One that gives back something else, a wrapper, stops the outer ones: they
            // would register the wrapper, not what the name keeps.)
            if !self.call_one_of(c, d, &callees, &args).contains(&class) {
                break;
            }
        }
    }

    /// Bind a new instance's fields from a constructor call, when its class is a record.
    /// False when it is not one.
    pub(super) fn init_record(
        &mut self,
        obj: ObjId,
        class: &Arc<ClassObj>,
        args: &Args,
        call: crate::ir::Span,
    ) -> bool {
        let mut fields = Vec::new();
        if !self.record_fields(class, &mut fields, 0) {
            return false;
        }
        for (i, (name, default)) in fields.into_iter().enumerate() {
            let given = args
                .positional
                .get(i)
                .map(|(v, _)| v.clone())
                .or_else(|| args.keyword(name).map(|(v, ..)| v.clone()));
            let vals = match (given, default) {
                (Some(v), _) => v,
                (None, Some((item, e))) => self.field_default(item, e),
                (None, None) => smallvec![UNKNOWN],
            };
            if let Obj::Module(m) = self.obj_mut(obj) {
                m.attrs.insert(name, vals);
            }
        }
        let post_init = self.intern("__post_init__");
        if let Some(post) = self.find_method(class, post_init) {
            self.inline(post, Some(obj), &Args::default(), call);
        }
        true
    }

    /// A field's default when the constructor is not given it: evaluated once per class and
    /// shared by its instances (`total: torch.Tensor = torch.zeros(3)`, `field(default=v)`), as
    /// Python does, except `field(default_factory=f)`, which calls `f` for each instance.
    fn field_default(&mut self, item: ItemId, e: ExprId) -> Vals {
        let Some(body) = self.body_of(item) else {
            return smallvec![UNKNOWN];
        };
        let factory = match *body.expr(e) {
            Expr::Call { args, .. } => {
                (body.list(body.args[args as usize].keywords).iter()).any(|k| {
                    body.keywords[*k as usize]
                        .name
                        .is_some_and(|n| self.name(n) == "default_factory")
                })
            }
            _ => false,
        };
        if let Some(v) = self.field_defaults.get(&(item, e)).filter(|_| !factory) {
            return v.clone();
        }
        let v = self.eval(Code { body: &body, item }, e);
        if !factory {
            self.field_defaults.insert((item, e), v.clone());
        }
        v
    }

    /// The fields of a record class, its record bases' first, added to `out`; false when the
    /// class is not a record.
    fn record_fields(&mut self, class: &ClassObj, out: &mut Vec<Field>, depth: usize) -> bool {
        if depth > MAX_BASES {
            return false;
        }
        let mut record = self.is_dataclass(class.loc.item) || self.is_named_tuple(class, depth);
        for b in class.bases.clone() {
            if let Obj::Class(k) = self.obj(b) {
                let k = k.clone();
                record |= self.record_fields(&k, out, depth + 1);
            }
        }
        if !record {
            return false;
        }
        for item in self.class_statements(class.loc.item) {
            let Some(field) = self.field_of(item) else {
                continue;
            };
            // A field declared again (in a subclass) keeps its place and takes the new default.
            match out.iter_mut().find(|(n, _)| *n == field.0) {
                Some(old) => *old = field,
                None => out.push(field),
            }
        }
        true
    }

    /// The field values of an instance of a `NamedTuple` of `n` fields, in order.
    pub(super) fn named_tuple_items(&mut self, obj: ObjId, n: usize) -> Option<Vec<Vals>> {
        let Obj::Module(m) = self.obj(obj) else {
            return None;
        };
        let class = m.local.clone().filter(|k| self.is_named_tuple(k, 0))?;
        let mut fields = Vec::new();
        if !self.record_fields(&class, &mut fields, 0) || fields.len() != n {
            return None;
        }
        let Obj::Module(m) = self.obj(obj) else {
            return None;
        };
        Some(
            fields
                .iter()
                .map(|(name, _)| {
                    m.attrs
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| smallvec![UNKNOWN])
                })
                .collect(),
        )
    }

    /// `name` bound by the body of a class of the file or of its bases (`k = v`, `k: T = v`):
    /// its value, evaluated now.
    pub(super) fn class_attribute(&mut self, class: &ClassObj, name: Name) -> Option<Vals> {
        self.class_attribute_depth(class, name, 0)
    }

    fn class_attribute_depth(
        &mut self,
        class: &ClassObj,
        name: Name,
        depth: usize,
    ) -> Option<Vals> {
        // A class nested in the body (`class T: class Lambda: ...`, read as `T.Lambda`).
        let nested = self.nested_classes(class.loc.item);
        if let Some(&(_, item)) = nested.iter().find(|(n, _)| *n == name) {
            let body = self.body_of(item)?;
            let k = body.root_class()?;
            let class = self.class_ref(Code { body: &body, item }, k);
            return Some(smallvec![self.alloc(Obj::Class(Arc::new(class)))]);
        }
        for item in self.class_statements(class.loc.item) {
            let binds = self
                .bound_by(item)
                .is_some_and(|(n, _)| n == self.name(name));
            if !binds {
                continue;
            }
            let body = self.body_of(item)?;
            let value = body.stmts_of(body.root).find_map(|s| match *body.stmt(s) {
                Stmt::Assign { targets, value } => body
                    .exprs_of(targets)
                    .any(|t| matches!(*body.expr(t), Expr::Name { name: n, .. } if n == name))
                    .then_some(value),
                _ => None,
            });
            if let Some(value) = value {
                return Some(self.eval(Code { body: &body, item }, value));
            }
        }
        if depth >= MAX_BASES {
            return None;
        }
        for b in class.bases.clone() {
            if let Obj::Class(k) = self.obj(b) {
                let k = k.clone();
                if let Some(v) = self.class_attribute_depth(&k, name, depth + 1) {
                    return Some(v);
                }
            }
        }
        None
    }

    /// A subclass of `typing.NamedTuple` (directly or through the file's classes).
    pub(super) fn is_named_tuple(&self, class: &ClassObj, depth: usize) -> bool {
        self.derives_from(class, &|p| p.ends_with("NamedTuple"), depth)
    }

    /// Whether a class of the file derives, directly or through the file's classes, from a
    /// class outside it whose qualified name `base` accepts.
    pub(super) fn derives_from(
        &self,
        class: &ClassObj,
        base: &dyn Fn(&str) -> bool,
        depth: usize,
    ) -> bool {
        depth <= MAX_BASES
            && class.bases.iter().any(|b| match self.obj(*b) {
                Obj::Path(p) => base(self.name(*p)),
                Obj::Class(k) => self.derives_from(k, base, depth + 1),
                _ => false,
            })
    }

    /// A class item decorated with `@dataclass` (`@dataclasses.dataclass(...)`,
    /// `@pydantic.dataclasses.dataclass`).
    fn is_dataclass(&self, item: ItemId) -> bool {
        let Some(it) = self.prog.item(item) else {
            return false;
        };
        let text = &self.prog.text[it.outline.start as usize..it.outline.end as usize];
        text.lines()
            .map(str::trim_start)
            .take_while(|l| l.starts_with('@'))
            .any(|l| l.contains("dataclass"))
    }

    /// `forward = step`, `__call__ = forward` at the top of a class item's body: a function
    /// bound as a method under another name, as Python binds a function read through an
    /// instance (one of the class's `methods`, or a function the body's scope reads).
    pub(super) fn methods_bound_by_name(
        &mut self,
        item: ItemId,
        methods: &mut rustc_hash::FxHashMap<Name, DefLoc>,
    ) {
        for st in self.class_statements(item) {
            let Some((bound, false)) = self.bound_by(st) else {
                continue;
            };
            let bound = bound.to_string();
            let bound = self.intern(&bound);
            if methods.contains_key(&bound) {
                continue;
            }
            let Some(body) = self.body_of(st) else {
                continue;
            };
            // (`forward = step`, or a chain of names, `forward = run = step`.)
            let source = body.stmts_of(body.root).find_map(|s| match *body.stmt(s) {
                Stmt::Assign { targets, value } => match *body.expr(value) {
                    Expr::Name { name, .. } => Some((name, value, targets)),
                    _ => None,
                },
                _ => None,
            });
            let Some((source, value, targets)) = source else {
                continue;
            };
            let names: Vec<Name> = (body.exprs_of(targets))
                .filter_map(|t| match *body.expr(t) {
                    Expr::Name { name, .. } => Some(name),
                    _ => None,
                })
                .collect();
            let def = match methods.get(&source) {
                Some(d) => Some(*d),
                None => match self
                    .eval(
                        Code {
                            body: &body,
                            item: st,
                        },
                        value,
                    )
                    .as_slice()
                {
                    [v] => match self.obj(*v) {
                        Obj::Func(d) => Some(*d),
                        _ => None,
                    },
                    _ => None,
                },
            };
            if let Some(def) = def {
                for n in names {
                    methods.entry(n).or_insert(def);
                }
            }
        }
    }

    /// The name a class-body statement item binds, read off its text (`name = v`: false,
    /// `name: T` or `name: T = v`: true for annotated), without lowering it.
    fn bound_by(&self, item: ItemId) -> Option<(&str, bool)> {
        let it = self.prog.item(item)?;
        let text = &self.prog.text[it.outline.start as usize..it.outline.end as usize];
        let len = text
            .find(|c: char| !crate::syntax::ident_char(c))
            .unwrap_or(text.len());
        let rest = text[len..].trim_start();
        let annotated = rest.starts_with(':') && !rest.starts_with(":=");
        let assigned = rest.starts_with('=') && !rest.starts_with("==");
        (len > 0 && (annotated || assigned)).then_some((&text[..len], annotated))
    }

    /// `name: T` or `name: T = default` at the top of a class body.
    fn field_of(&mut self, item: ItemId) -> Option<Field> {
        let (name, annotated) = self.bound_by(item)?;
        if !annotated {
            return None;
        }
        let name = name.to_string();
        let name = self.intern(&name);
        let body = self.body_of(item)?;
        let default = body.stmts_of(body.root).find_map(|s| match *body.stmt(s) {
            Stmt::Assign { value, .. } => Some((item, value)),
            _ => None,
        });
        Some((name, default))
    }

    /// The field names a `namedtuple(name, fields)` call gives: a string of names separated
    /// by commas or spaces, or a list of names (or of `(name, type)` pairs).
    pub(super) fn record_fields_given(&mut self, args: &Args) -> Option<Vec<Name>> {
        let keyword = ["field_names", "fields"].into_iter().find_map(|k| {
            let k = self.intern(k);
            args.keyword(k).map(|(v, ..)| v.clone())
        });
        let given = args.positional.get(1).map(|(v, _)| v.clone()).or(keyword)?;
        if let Some(text) = self.one_exact_str(&given) {
            let text = self.name(text).to_string();
            let names: Vec<Name> = text
                .split(|ch: char| ch == ',' || ch.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(|s| self.intern(s))
                .collect();
            return (!names.is_empty()).then_some(names);
        }
        let [seq] = given.as_slice() else {
            return None;
        };
        let Obj::Seq(slots) = self.obj(*seq) else {
            return None;
        };
        slots
            .clone()
            .iter()
            .map(|slot| match slot.as_slice() {
                [one] => self.exact_str(*one).or_else(|| match self.obj(*one) {
                    Obj::Seq(pair) => pair.first().and_then(|n| self.one_exact_str(n)),
                    _ => None,
                }),
                _ => None,
            })
            .collect()
    }

    /// An instance of a record type made by a call: its fields from the arguments, by
    /// position or keyword (unknown when not given).
    pub(super) fn new_record(&mut self, fields: &[Name], args: &Args, call: Span) -> ObjId {
        let slots: Vec<Vals> = fields
            .iter()
            .enumerate()
            .map(|(i, name)| {
                args.positional
                    .get(i)
                    .map(|(v, _)| v.clone())
                    .or_else(|| args.keyword(*name).map(|(v, ..)| v.clone()))
                    .unwrap_or_else(|| smallvec![UNKNOWN])
            })
            .collect();
        let record = self.alloc(Obj::Seq(slots));
        let keys = fields.iter().map(|n| Some((*n, call))).collect();
        self.dict_keys.insert(record, keys);
        record
    }
}
