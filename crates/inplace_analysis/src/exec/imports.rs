//! Imports of the project's own modules (see [`crate::project`]): an imported module's body
//! runs once, when the first import of it does, in a namespace of its own; its names are read
//! by the importer (`from m import f`, `m.f`, `from m import *`) and by its own code, which
//! runs with its module's globals wherever it is called from.

use super::{Code, Interp};
use crate::domain::*;
use crate::ir::{Expr, Import, List, Name, Stmt};
use crate::project::ModuleName;
use crate::syntax::outline::ItemKind;
use smallvec::smallvec;
use std::sync::Arc;

/// Deepest chain of module bodies running one inside another (`a` imports `b` imports ...).
const MAX_NESTED_MODULES: usize = 32;

impl Interp<'_, '_> {
    /// `import ...` / `from ... import ...`.
    pub(super) fn exec_import(&mut self, c: Code<'_>, list: List) {
        for i in c.body.list(list) {
            let imp = c.body.imports[*i as usize];
            if self.prog.segments.len() > 1 && self.import_project(c, imp) {
                continue;
            }
            let p = self.alloc(Obj::Path(imp.path));
            self.bind_name(c, imp.bind, None, smallvec![p], None);
        }
    }

    /// An import of a project module: run the modules on its path and bind what it names.
    /// False when it names nothing of the project.
    fn import_project(&mut self, c: Code<'_>, imp: Import) -> bool {
        let seg = &self.prog.segments[self.prog.segment_of(c.item)];
        let from = ModuleName::new(self.name(seg.name), seg.is_package);
        let Some(full) = from.absolute(self.name(imp.full)) else {
            return false;
        };
        let mut found = false;
        let mut prefix = String::new();
        for part in full.split('.') {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(part);
            let name = self.intern(&prefix);
            if let Some(s) = self.prog.module_segment(name) {
                self.load_module(s);
                found = true;
            }
        }
        if !found {
            return false;
        }
        if self.name(imp.bind) == "*" {
            let module = self.intern(&full);
            let listed = self
                .prog
                .module_segment(module)
                .and_then(|s| self.all_of(s));
            if let Some(env) = self.module_env(module) {
                let mut public: Vec<(Name, Vals)> = match listed {
                    // `__all__` says what a star import binds, submodules it names included.
                    Some(names) => names
                        .into_iter()
                        .filter_map(|n| {
                            let v = env.get(&n).cloned().or_else(|| {
                                let sub = format!("{full}.{}", self.name(n));
                                let seg = self.prog.module_segment(self.intern(&sub))?;
                                self.load_module(seg);
                                Some(self.module_path_value(&sub))
                            })?;
                            Some((n, v))
                        })
                        .collect(),
                    None => env
                        .iter()
                        .filter(|(n, _)| !self.name(**n).starts_with('_'))
                        .map(|(n, v)| (*n, v.clone()))
                        .collect(),
                };
                public.sort_by_key(|(n, _)| *n);
                for (n, v) in public {
                    self.bind_name(c, n, None, v, None);
                }
            }
            return true;
        }
        let path = from.absolute(self.name(imp.path)).unwrap_or(full);
        let vals = self.module_path_value(&path);
        self.bind_name(c, imp.bind, None, vals, None);
        true
    }

    /// The value of an absolute dotted path into the project: a module (its namespace, as a
    /// path), or a name a module binds; unknown when the module does not bind it.
    fn module_path_value(&mut self, path: &str) -> Vals {
        let name = self.intern(path);
        if self.prog.module_segment(name).is_some() {
            return smallvec![self.alloc(Obj::Path(name))];
        }
        if let Some((parent, last)) = path.rsplit_once('.') {
            let (parent, last) = (self.intern(parent), self.intern(last));
            if let Some(v) = self.module_global(parent, last) {
                return v;
            }
        }
        smallvec![UNKNOWN]
    }

    /// [`Interp::module_attribute`], when the program imports any module.
    pub(super) fn module_member(&mut self, module: Name, attr: Name) -> Option<Vals> {
        if self.prog.segments.len() < 2 {
            return None;
        }
        self.module_attribute(module, attr)
    }

    /// `m.attr` where `m` is the project module named `module`: what it binds, a submodule,
    /// or unknown. `None` when `module` is not a project module.
    fn module_attribute(&mut self, module: Name, attr: Name) -> Option<Vals> {
        let seg = self.prog.module_segment(module)?;
        self.load_module(seg);
        if let Some(v) = self.module_global(module, attr) {
            return Some(v);
        }
        let sub = self.path_join(module, attr);
        if self.prog.module_segment(sub).is_some() {
            return Some(smallvec![self.alloc(Obj::Path(sub))]);
        }
        Some(smallvec![UNKNOWN])
    }

    /// The globals of a project module whose body has run.
    fn module_env(&self, module: Name) -> Option<Arc<Env>> {
        self.modules.get(&module).cloned()
    }

    /// A global of a project module: from its namespace while its body runs, else from what
    /// its body left (noted as read, for reuse).
    pub(super) fn module_global(&mut self, module: Name, name: Name) -> Option<Vals> {
        if let Some(&(_, depth)) = self.running_modules.iter().find(|(m, _)| *m == module) {
            // Its body is running: its namespace is the current environment at that depth.
            let env = if depth < self.outer_envs.len() {
                &self.outer_envs[depth]
            } else {
                &self.state.env
            };
            return env.get(&name).cloned();
        }
        self.deps.module_globals.insert((module, name));
        self.modules.get(&module)?.get(&name).cloned()
    }

    /// A name read by code of segment `seg` (not the analysed file's) that is not local.
    pub(super) fn segment_global(&mut self, seg: usize, name: Name) -> Option<Vals> {
        let module = self.prog.segments[seg].name;
        self.module_global(module, name)
    }

    /// The names a module's `__all__` lists (`__all__ = [...]` or `(...)`, `+= [...]`, of
    /// string literals), if its top level sets one.
    fn all_of(&mut self, seg: usize) -> Option<Vec<Name>> {
        let mut out: Option<Vec<Name>> = None;
        for i in self.prog.segments[seg].items.clone() {
            let item = &self.prog.items[i as usize];
            let o = &item.outline;
            if item.parent().is_some()
                || item.kind() != ItemKind::Statement
                || !self.prog.text[o.start as usize..o.end as usize].contains("__all__")
            {
                continue;
            }
            let Some(body) = self.body_of(item.id) else {
                continue;
            };
            for s in body.stmts_of(body.root) {
                let (target, value, replaces) = match *body.stmt(s) {
                    Stmt::Assign { targets, value } => match body.exprs_of(targets).next() {
                        Some(t) => (t, value, true),
                        None => continue,
                    },
                    Stmt::AugAssign { target, value, .. } => (target, value, false),
                    _ => continue,
                };
                let is_all = matches!(*body.expr(target), Expr::Name { name, .. } if self.name(name) == "__all__");
                let Expr::Seq { items, .. } = *body.expr(value) else {
                    continue;
                };
                if !is_all {
                    continue;
                }
                let list = out.get_or_insert_with(Vec::new);
                if replaces {
                    list.clear();
                }
                list.extend(body.exprs_of(items).filter_map(|e| match *body.expr(e) {
                    Expr::Str(n) => Some(n),
                    _ => None,
                }));
            }
        }
        out
    }

    /// Run the body of the module of segment `seg` once, in a namespace of its own.
    fn load_module(&mut self, seg: usize) {
        let module = self.prog.segments[seg].name;
        if self.modules.contains_key(&module)
            || self.running_modules.iter().any(|(m, _)| *m == module)
            || self.running_modules.len() >= MAX_NESTED_MODULES
        {
            return;
        }
        let saved_env = std::mem::take(&mut self.state.env);
        let saved_bound = std::mem::take(&mut self.state.bound_at);
        let saved_stale = std::mem::take(&mut self.state.stale);
        let saved_stmt = self.stmt.take();
        let saved_assign = self.assign_rhs.take();
        let saved_site = self.call_site.take();
        self.running_modules.push((module, self.outer_envs.len()));
        let items = self.prog.segments[seg].items.clone();
        for i in items {
            if self.state.dead || self.out_of_budget() {
                break;
            }
            if !self.is_main_guard(i as usize) {
                self.run_top_item(i as usize);
            }
        }
        self.running_modules.pop();
        self.state.dead = false;
        let env = std::mem::replace(&mut self.state.env, saved_env);
        self.modules.insert(module, Arc::new(env));
        self.state.bound_at = saved_bound;
        self.state.stale = saved_stale;
        self.stmt = saved_stmt;
        self.assign_rhs = saved_assign;
        self.call_site = saved_site;
    }

    /// `if __name__ == "__main__":` at the top of an imported module: it does not run.
    fn is_main_guard(&self, pos: usize) -> bool {
        let o = &self.prog.items[pos].outline;
        if o.kind != ItemKind::Statement || o.parent.is_some() {
            return false;
        }
        let text = &self.prog.text[o.start as usize..o.end as usize];
        let head = text.split(':').next().unwrap_or("");
        text.starts_with("if") && head.contains("__name__") && head.contains("__main__")
    }
}
