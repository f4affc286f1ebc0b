//! Lowering: one item's syntax tree -> its [`Body`]. Ranges become relative to the item's start.
//! Everything the interpreter, the torch semantics and the rules need of the syntax is decided
//! here, once (literal indexes, annotations, decorators, generators, which names read values).

use super::{NodeExt, Parsed};
use crate::ir::*;
use crate::ops;
use tree_sitter::Node;

pub(crate) struct Lowerer<'a> {
    src: &'a str,
    /// Subtracted from a node's byte offset in `src` to make it relative to the item.
    shift: usize,
    names: &'a mut Interner,
    body: Body,
    /// Whether a `yield` was seen, per enclosing function being lowered.
    functions: Vec<bool>,
    /// The owner of the functions defined at the current level.
    owner: Owner,
    /// Deepest nesting followed; deeper code is lowered as an unknown value.
    depth: u32,
}

/// Nesting beyond which code is not lowered (the rest of the tree is one unknown).
const MAX_DEPTH: u32 = 200;

/// Lower a parsed item.
pub(crate) fn lower(p: &Parsed<'_>, names: &mut Interner) -> Body {
    let mut l = Lowerer {
        src: &p.text,
        shift: p.shift,
        names,
        body: Body::default(),
        functions: Vec::new(),
        owner: if p.member {
            Owner::ItemClass
        } else {
            Owner::None
        },
        depth: 0,
    };
    let stmts: Vec<Node<'_>> = p.statements();
    let mut ids = Vec::new();
    for s in stmts {
        l.stmt_into(s, &mut ids, p.class_header);
    }
    l.body.root = l.list(&ids);
    l.body.shrink_to_fit();
    l.body
}

fn named_children(n: Node<'_>) -> Vec<Node<'_>> {
    let mut c = n.walk();
    n.named_children(&mut c)
        .filter(|c| c.k() != "comment")
        .collect()
}

impl Lowerer<'_> {
    fn rel(&self, n: Node<'_>) -> Rel {
        Rel::new(
            n.start_byte().saturating_sub(self.shift) as u32,
            n.end_byte().saturating_sub(self.shift) as u32,
        )
    }

    fn text(&self, n: Node<'_>) -> &str {
        &self.src[n.start_byte()..n.end_byte()]
    }

    fn intern(&mut self, n: Node<'_>) -> Name {
        let t = &self.src[n.start_byte()..n.end_byte()];
        self.names.intern(t)
    }

    fn list(&mut self, ids: &[u32]) -> List {
        let start = self.body.lists.len() as u32;
        self.body.lists.extend_from_slice(ids);
        List {
            start,
            len: ids.len() as u32,
        }
    }

    fn push_expr(&mut self, e: Expr, span: Rel) -> ExprId {
        self.body.exprs.push(e);
        self.body.expr_spans.push(span);
        ExprId(self.body.exprs.len() as u32 - 1)
    }

    fn push_stmt(&mut self, s: Stmt, span: Rel) -> StmtId {
        self.body.stmts.push(s);
        self.body.stmt_spans.push(span);
        StmtId(self.body.stmts.len() as u32 - 1)
    }

    // ----------------------------------------------------------------------------- statements

    fn block(&mut self, n: Option<Node<'_>>) -> Block {
        let Some(n) = n else { return List::EMPTY };
        if self.depth > MAX_DEPTH {
            return List::EMPTY;
        }
        self.depth += 1;
        // A definition inside a nested block is no method of the class around it.
        let owner = std::mem::replace(&mut self.owner, Owner::None);
        let mut ids = Vec::new();
        if n.k() == "block" {
            for s in named_children(n) {
                self.stmt_into(s, &mut ids, false);
            }
        } else {
            self.stmt_into(n, &mut ids, false);
        }
        self.owner = owner;
        self.depth -= 1;
        self.list(&ids)
    }

    /// Lower a statement node, appending its statement ids.
    fn stmt_into(&mut self, n: Node<'_>, out: &mut Vec<u32>, class_header: bool) {
        let span = self.rel(n);
        let s = match n.k() {
            "expression_statement" => {
                let parts = named_children(n);
                match parts.as_slice() {
                    [one] => return out.push(self.simple_stmt(*one).0),
                    _ => {
                        for p in parts {
                            let id = self.simple_stmt(p);
                            out.push(id.0);
                        }
                        return;
                    }
                }
            }
            "return_statement" => {
                let v = n.named_child(0).map_or(ExprId::NONE, |e| self.expr(e));
                Stmt::Return(v)
            }
            "if_statement" => self.if_stmt(n),
            "for_statement" => Stmt::For {
                target: self.opt_expr(n.field("left")),
                iter: self.opt_expr(n.field("right")),
                body: self.block(n.field("body")),
                orelse: self.else_body(n.field("alternative")),
            },
            "while_statement" => Stmt::While {
                cond: self.opt_expr(n.field("condition")),
                body: self.block(n.field("body")),
                orelse: self.else_body(n.field("alternative")),
            },
            "try_statement" => self.try_stmt(n),
            "with_statement" => self.with_stmt(n),
            "function_definition" => Stmt::Def(self.function(n, None, n)),
            "class_definition" => Stmt::Class(self.class(n, None, class_header)),
            "decorated_definition" => {
                let decorators: Vec<Node<'_>> = named_children(n)
                    .into_iter()
                    .filter(|d| d.k() == "decorator")
                    .collect();
                match n.field("definition") {
                    Some(d) if d.k() == "function_definition" => {
                        Stmt::Def(self.function(d, Some(&decorators), n))
                    }
                    Some(d) if d.k() == "class_definition" => {
                        Stmt::Class(self.class(d, Some(n), class_header))
                    }
                    _ => Stmt::Pass,
                }
            }
            "import_statement" | "import_from_statement" => Stmt::Import(self.imports(n)),
            "break_statement" => Stmt::Break,
            "continue_statement" => Stmt::Continue,
            "raise_statement" => {
                let ids: Vec<u32> = named_children(n)
                    .into_iter()
                    .map(|c| self.expr(c).0)
                    .collect();
                Stmt::Raise(self.list(&ids))
            }
            "match_statement" => {
                let subject = self.opt_expr(n.field("subject"));
                let mut cases = Vec::new();
                if let Some(b) = n.field("body") {
                    for case in named_children(b) {
                        let blk = self.block(case.field("consequence"));
                        let id = self.push_stmt(Stmt::Block(blk), self.rel(case));
                        cases.push(id.0);
                    }
                }
                Stmt::Match {
                    subject,
                    cases: self.list(&cases),
                }
            }
            "block" => Stmt::Block(self.block(Some(n))),
            "delete_statement" => {
                let mut ids = Vec::new();
                for t in named_children(n) {
                    if t.k() == "expression_list" {
                        ids.extend(named_children(t).into_iter().map(|x| self.expr(x).0));
                    } else if t.k() != "comment" {
                        ids.push(self.expr(t).0);
                    }
                }
                Stmt::Delete(self.list(&ids))
            }
            "pass_statement"
            | "global_statement"
            | "nonlocal_statement"
            | "future_import_statement"
            | "comment" => Stmt::Pass,
            _ => {
                let ids: Vec<u32> = named_children(n)
                    .into_iter()
                    .filter(|c| c.k() != "block")
                    .map(|c| self.expr(c).0)
                    .collect();
                Stmt::Other(self.list(&ids))
            }
        };
        out.push(self.push_stmt(s, span).0);
    }

    /// An assignment, augmented assignment or expression.
    fn simple_stmt(&mut self, n: Node<'_>) -> StmtId {
        let span = self.rel(n);
        let s = match n.k() {
            "assignment" => self.assignment(n),
            "augmented_assignment" => {
                let op = n.field("operator").map(|o| self.text(o)).unwrap_or("+=");
                Stmt::AugAssign {
                    op: BinOp::from_text(op),
                    target: self.opt_expr(n.field("left")),
                    value: self.opt_expr(n.field("right")),
                }
            }
            _ => Stmt::Expr(self.expr(n)),
        };
        self.push_stmt(s, span)
    }

    /// `a = b = value`: targets outermost first; an annotation alone assigns nothing.
    fn assignment(&mut self, n: Node<'_>) -> Stmt {
        let mut targets = Vec::new();
        let mut cur = n;
        loop {
            let Some(right) = cur.field("right") else {
                if targets.is_empty() {
                    // `x: int`: evaluates nothing at run time we model.
                    return Stmt::Pass;
                }
                break;
            };
            if let Some(l) = cur.field("left") {
                targets.push(self.expr(l).0);
            }
            if right.k() == "assignment" {
                cur = right;
                continue;
            }
            let value = self.expr(right);
            let targets = self.list(&targets);
            return Stmt::Assign { targets, value };
        }
        Stmt::Pass
    }

    fn if_stmt(&mut self, n: Node<'_>) -> Stmt {
        let cond = self.opt_expr(n.field("condition"));
        let body = self.block(n.field("consequence"));
        let mut clauses = Vec::new();
        let mut c = n.walk();
        let alts: Vec<Node<'_>> = n.children_by_field_name("alternative", &mut c).collect();
        for alt in alts {
            let clause = if alt.k() == "elif_clause" {
                Clause {
                    cond: self.opt_expr(alt.field("condition")),
                    body: self.block(alt.field("consequence")),
                }
            } else {
                Clause {
                    cond: ExprId::NONE,
                    body: self.block(alt.field("body")),
                }
            };
            self.body.clauses.push(clause);
            clauses.push(self.body.clauses.len() as u32 - 1);
        }
        Stmt::If {
            cond,
            body,
            clauses: self.list(&clauses),
        }
    }

    fn else_body(&mut self, alt: Option<Node<'_>>) -> Block {
        match alt {
            Some(a) => self.block(a.field("body")),
            None => List::EMPTY,
        }
    }

    fn try_stmt(&mut self, n: Node<'_>) -> Stmt {
        let body = self.block(n.field("body"));
        let mut handlers = Vec::new();
        let mut orelse = None;
        let mut finally = None;
        for clause in named_children(n) {
            match clause.k() {
                "except_clause" | "except_group_clause" => {
                    let mut alias = ExprId::NONE;
                    let mut blk = List::EMPTY;
                    for c in named_children(clause) {
                        if c.k() == "block" {
                            blk = self.block(Some(c));
                        } else if c.k() == "as_pattern" {
                            if let Some(a) = c.field("alias") {
                                let target = if a.k() == "as_pattern_target" {
                                    a.named_child(0).unwrap_or(a)
                                } else {
                                    a
                                };
                                alias = self.expr(target);
                            }
                        }
                    }
                    self.body.handlers.push(Handler { alias, body: blk });
                    handlers.push(self.body.handlers.len() as u32 - 1);
                }
                "else_clause" => orelse = Some(self.block(clause.field("body"))),
                "finally_clause" => {
                    let blk = named_children(clause)
                        .into_iter()
                        .find(|c| c.k() == "block");
                    finally = Some(self.block(blk));
                }
                _ => {}
            }
        }
        let handlers = self.list(&handlers);
        self.body.tries.push(Try {
            body,
            handlers,
            orelse,
            finally,
        });
        Stmt::Try(self.body.tries.len() as u32 - 1)
    }

    fn with_stmt(&mut self, n: Node<'_>) -> Stmt {
        let mut items = Vec::new();
        for clause in named_children(n) {
            if clause.k() != "with_clause" {
                continue;
            }
            for item in named_children(clause) {
                let Some(value) = item.field("value") else {
                    continue;
                };
                let (expr, alias) = if value.k() == "as_pattern" {
                    (value.named_child(0).unwrap_or(value), value.field("alias"))
                } else {
                    (value, None)
                };
                let expr = self.expr(expr);
                let alias = match alias {
                    Some(a) => {
                        let target = if a.k() == "as_pattern_target" {
                            a.named_child(0).unwrap_or(a)
                        } else {
                            a
                        };
                        self.expr(target)
                    }
                    None => ExprId::NONE,
                };
                self.body.with_items.push(WithItem { expr, alias });
                items.push(self.body.with_items.len() as u32 - 1);
            }
        }
        let items = self.list(&items);
        Stmt::With {
            items,
            body: self.block(n.field("body")),
        }
    }

    fn imports(&mut self, n: Node<'_>) -> List {
        let mut ids = Vec::new();
        let plain = n.k() == "import_statement";
        let module: String = if plain {
            String::new()
        } else {
            n.field("module_name")
                .map(|m| self.text(m).split_whitespace().collect())
                .unwrap_or_default()
        };
        let mut c = n.walk();
        let names: Vec<Node<'_>> = n.children_by_field_name("name", &mut c).collect();
        for name in names {
            let (path_node, alias) = match name.k() {
                "aliased_import" => (name.field("name"), name.field("alias")),
                _ => (Some(name), None),
            };
            let Some(path_node) = path_node else { continue };
            let dotted: String = self.text(path_node).split_whitespace().collect();
            let (bind, path) = match (plain, alias) {
                // `import a.b.c` binds `a`.
                (true, None) => {
                    let first = dotted.split('.').next().unwrap_or("").to_string();
                    (first.clone(), first)
                }
                (true, Some(a)) => (self.text(a).to_string(), dotted.clone()),
                (false, alias) => {
                    let bind = alias.map_or(dotted.clone(), |a| self.text(a).to_string());
                    // `from . import m` is `.m`, not `..m`.
                    let sep = if module.ends_with('.') { "" } else { "." };
                    (bind, format!("{module}{sep}{dotted}"))
                }
            };
            let full = if plain { dotted } else { path.clone() };
            let import = Import {
                bind: self.names.intern(&bind),
                path: self.names.intern(&path),
                full: self.names.intern(&full),
                span: self.rel(name),
            };
            self.body.imports.push(import);
            ids.push(self.body.imports.len() as u32 - 1);
        }
        // `from m import *` binds every public name of `m`: one import binding `*`.
        let mut c = n.walk();
        if !plain && n.children(&mut c).any(|ch| ch.k() == "wildcard_import") {
            let m = self.names.intern(&module);
            self.body.imports.push(Import {
                bind: self.names.intern("*"),
                path: m,
                full: m,
                span: self.rel(n),
            });
            ids.push(self.body.imports.len() as u32 - 1);
        }
        self.list(&ids)
    }

    // ---------------------------------------------------------------------------- definitions

    /// A `def` (or a lambda, when `n` is one). `whole` covers its decorators.
    fn function(
        &mut self,
        n: Node<'_>,
        decorators: Option<&[Node<'_>]>,
        whole: Node<'_>,
    ) -> FuncId {
        let lambda = n.k() == "lambda";
        let name = match n.field("name") {
            Some(nm) => self.intern(nm),
            None => known::EMPTY,
        };
        let mut flags = Decorators::default();
        let mut applied = Vec::new();
        for d in decorators.unwrap_or(&[]) {
            if let Some(e) = named_children(*d).into_iter().next() {
                applied.push(self.expr(e).0);
            }
            let t = self.text(*d);
            flags.staticmethod |= t.contains("staticmethod");
            flags.classmethod |= t.contains("classmethod");
            flags.no_grad |= t.contains("no_grad") || t.contains("inference_mode");
            flags.inference |= t.ends_with("inference_mode")
                || t.ends_with("inference_mode()")
                || t.ends_with("inference_mode(True)");
            flags.property |= t.contains("property");
            flags.setter |= t.contains(".setter");
            flags.deleter |= t.contains(".deleter");
        }
        let applied = self.list(&applied);
        let params = self.params(n.field("parameters"));
        let saved_owner = std::mem::replace(&mut self.owner, Owner::None);
        let owner = if lambda { Owner::None } else { saved_owner };
        self.functions.push(false);
        let body = if lambda {
            let e = self.opt_expr(n.field("body"));
            let span = n.field("body").map_or(self.rel(n), |b| self.rel(b));
            let ret = self.push_stmt(Stmt::Return(e), span);
            self.list(&[ret.0])
        } else {
            self.block(n.field("body"))
        };
        let generator = self.functions.pop().unwrap_or(false);
        self.owner = saved_owner;
        let lines = (whole.end_position().row - whole.start_position().row + 1) as u32;
        self.body.funcs.push(FuncDef {
            name,
            params,
            body,
            lambda,
            generator: generator && !lambda,
            decorators: flags,
            applied,
            owner,
            span: self.rel(whole),
            lines,
        });
        FuncId(self.body.funcs.len() as u32 - 1)
    }

    fn params(&mut self, n: Option<Node<'_>>) -> List {
        let Some(n) = n else { return List::EMPTY };
        let mut ids = Vec::new();
        for p in named_children(n) {
            if let Some(param) = self.param(p) {
                self.body.params.push(param);
                ids.push(self.body.params.len() as u32 - 1);
            }
        }
        self.list(&ids)
    }

    fn param(&mut self, p: Node<'_>) -> Option<Param> {
        let span = self.rel(p);
        let splat_kind = |n: Node<'_>| match n.k() {
            "list_splat_pattern" => ParamKind::VarArgs,
            "dictionary_splat_pattern" => ParamKind::KwArgs,
            _ => ParamKind::Normal,
        };
        let (name_node, kind, default, ty) = match p.k() {
            "identifier" => (p, ParamKind::Normal, None, None),
            "typed_parameter" => {
                let inner = p.named_child(0)?;
                let kind = splat_kind(inner);
                let name = if kind == ParamKind::Normal {
                    inner
                } else {
                    inner.named_child(0)?
                };
                (name, kind, None, p.field("type"))
            }
            "default_parameter" | "typed_default_parameter" => (
                p.field("name")?,
                ParamKind::Normal,
                p.field("value"),
                p.field("type"),
            ),
            "list_splat_pattern" | "dictionary_splat_pattern" => {
                (p.named_child(0)?, splat_kind(p), None, None)
            }
            _ => return None,
        };
        let annotation = match ty {
            None => Annotation::None,
            Some(t) => {
                let t = self.text(t);
                if t.contains("Tensor") {
                    Annotation::Tensor
                } else if only_words(t, SCALAR) {
                    Annotation::Scalar
                } else if only_words(t, PLAIN) {
                    // `tuple[int, int]`, `Optional[List[float]]`: containers of numbers.
                    Annotation::NonTensor
                } else if TENSORISH.iter().any(|k| t.contains(k)) {
                    Annotation::Other
                } else {
                    Annotation::NonTensor
                }
            }
        };
        let literal_default = default.is_some_and(|d| {
            matches!(
                d.k(),
                "integer"
                    | "float"
                    | "string"
                    | "true"
                    | "false"
                    | "none"
                    | "concatenated_string"
                    | "unary_operator"
                    | "tuple"
            )
        });
        Some(Param {
            name: self.intern(name_node),
            kind,
            default: self.opt_expr(default),
            literal_default,
            annotation,
            span,
        })
    }

    /// A class; `decorated` is its `decorated_definition` (for the span). A class header item
    /// (`header_only`) has `pass` for a body: its methods are items of their own.
    fn class(&mut self, n: Node<'_>, decorated: Option<Node<'_>>, header_only: bool) -> ClassId {
        let name = match n.field("name") {
            Some(nm) => self.intern(nm),
            None => known::EMPTY,
        };
        let mut bases = Vec::new();
        let mut autograd_function = false;
        if let Some(supers) = n.field("superclasses") {
            for b in named_children(supers) {
                if b.k() == "keyword_argument" {
                    continue;
                }
                let t = self.text(b);
                // (`torch.autograd.function.InplaceFunction` too.)
                autograd_function |=
                    t == "Function" || t.ends_with(".Function") || t.ends_with("InplaceFunction");
                bases.push(self.expr(b).0);
            }
        }
        let bases = self.list(&bases);
        let mut decorators = Vec::new();
        for d in decorated.map(named_children).unwrap_or_default() {
            if d.k() == "decorator" {
                if let Some(e) = named_children(d).into_iter().next() {
                    decorators.push(self.expr(e).0);
                }
            }
        }
        let decorators = self.list(&decorators);
        let id = ClassId(self.body.classes.len() as u32);
        self.body.classes.push(ClassDef {
            name,
            bases,
            methods: List::EMPTY,
            autograd_function,
            decorators,
            span: self.rel(decorated.unwrap_or(n)),
        });
        if !header_only {
            let saved = std::mem::replace(&mut self.owner, Owner::Class(id));
            let mut methods = Vec::new();
            if let Some(b) = n.field("body") {
                for s in named_children(b) {
                    let mut ids = Vec::new();
                    self.stmt_into(s, &mut ids, false);
                    for sid in ids {
                        if let Stmt::Def(f) = self.body.stmts[sid as usize] {
                            methods.push(f.0);
                        }
                    }
                }
            }
            self.owner = saved;
            self.body.classes[id.idx()].methods = self.list(&methods);
        }
        id
    }

    // ---------------------------------------------------------------------------- expressions

    fn opt_expr(&mut self, n: Option<Node<'_>>) -> ExprId {
        match n {
            Some(n) => self.expr(n),
            None => ExprId::NONE,
        }
    }

    fn expr(&mut self, n: Node<'_>) -> ExprId {
        self.expr_ctx(n, true)
    }

    /// Lower an expression; `reads` is false for a name whose value is not read.
    fn expr_ctx(&mut self, n: Node<'_>, reads: bool) -> ExprId {
        if self.depth > MAX_DEPTH {
            return self.push_expr(Expr::Other(List::EMPTY), self.rel(n));
        }
        self.depth += 1;
        let span = self.rel(n);
        let e = self.expr_kind(n, reads);
        self.depth -= 1;
        match e {
            Ok(e) => self.push_expr(e, span),
            Err(id) => id,
        }
    }

    /// The expression, or (for parentheses) the id of the expression inside.
    fn expr_kind(&mut self, n: Node<'_>, reads: bool) -> Result<Expr, ExprId> {
        Ok(match n.k() {
            "identifier" => Expr::Name {
                name: self.intern(n),
                reads,
            },
            "attribute" => {
                let attr_node = n.field("attribute");
                let attr = attr_node.map_or(known::EMPTY, |a| self.intern(a));
                let metadata = attr_node.is_some_and(|a| ops::metadata_attr(self.text(a)));
                let value = match n.field("object") {
                    Some(o) => self.expr_ctx(o, !metadata),
                    None => ExprId::NONE,
                };
                let attr_at = attr_node.map_or(0, |a| self.rel(a).start);
                Expr::Attr {
                    value,
                    attr,
                    attr_at,
                }
            }
            "call" => self.call(n),
            "subscript" => self.subscript(n),
            "binary_operator" => {
                let op = n.field("operator").map(|o| self.text(o)).unwrap_or("+");
                Expr::Binary {
                    op: BinOp::from_text(op),
                    left: self.opt_expr(n.field("left")),
                    right: self.opt_expr(n.field("right")),
                }
            }
            "unary_operator" => {
                let operand = self.opt_expr(n.field("argument"));
                match (
                    n.field("operator").map(|o| self.text(o)),
                    self.body.exprs.get(operand.idx()),
                ) {
                    (Some("-"), Some(Expr::Int(i))) => Expr::Int(-*i),
                    _ => Expr::Unary { operand },
                }
            }
            "not_operator" => Expr::Not(self.opt_expr(n.field("argument"))),
            "boolean_operator" => Expr::Bool {
                and: n.field("operator").is_some_and(|o| o.k() == "and"),
                left: self.opt_expr(n.field("left")),
                right: self.opt_expr(n.field("right")),
            },
            "comparison_operator" => self.comparison(n),
            "parenthesized_expression" => match n.named_child(0) {
                Some(inner) if inner.k() != "comment" => return Err(self.expr_ctx(inner, reads)),
                _ => Expr::Other(List::EMPTY),
            },
            "tuple" | "expression_list" | "pattern_list" | "tuple_pattern" => {
                self.seq(n, SeqKind::Tuple)
            }
            "list" | "list_pattern" => self.seq(n, SeqKind::List),
            "set" => self.seq(n, SeqKind::Set),
            "list_splat" | "list_splat_pattern" => Expr::Starred(self.opt_expr(n.named_child(0))),
            "dictionary" => self.dictionary(n),
            "list_comprehension" => self.comprehension(n, CompKind::List),
            "set_comprehension" => self.comprehension(n, CompKind::Set),
            "generator_expression" => self.comprehension(n, CompKind::Generator),
            "dictionary_comprehension" => self.comprehension(n, CompKind::Dict),
            "lambda" => Expr::Lambda(self.function(n, None, n)),
            "conditional_expression" => self.conditional(n),
            "named_expression" => Expr::Named {
                target: n.field("name").map_or(known::EMPTY, |t| self.intern(t)),
                value: self.opt_expr(n.field("value")),
            },
            "await" => Expr::Await(self.opt_expr(n.named_child(0))),
            "yield" => {
                if let Some(top) = self.functions.last_mut() {
                    *top = true;
                }
                // `yield from xs` yields each element of `xs`: `Yield(Starred(xs))`.
                let value = self.opt_expr(n.named_child(0));
                let mut c = n.walk();
                let from = n.children(&mut c).any(|ch| ch.k() == "from");
                match value.get() {
                    Some(v) if from => {
                        let at = self.rel(n);
                        Expr::Yield(self.push_expr(Expr::Starred(v), at))
                    }
                    _ => Expr::Yield(value),
                }
            }
            "true" => Expr::True,
            "false" => Expr::False,
            "none" => Expr::None,
            "integer" => match self.text(n).replace('_', "").parse::<i64>() {
                Ok(i) => Expr::Int(i),
                Err(_) => Expr::Float,
            },
            "float" => Expr::Float,
            "ellipsis" => Expr::Ellipsis,
            // `a[:, :1]`: a part with constant bounds keeps them (which elements it selects).
            "slice" if matches!(self.index(n), Index::Range(..)) => {
                let Index::Range(lo, hi) = self.index(n) else {
                    unreachable!()
                };
                // (`Expr::NO_BOUND` where a bound is absent; a bound too big for it is unknown.)
                let bound = |b: Option<i64>| match b {
                    None => Some(Expr::NO_BOUND),
                    Some(v) => i32::try_from(v).ok().filter(|v| *v != Expr::NO_BOUND),
                };
                match (bound(lo), bound(hi)) {
                    (Some(lo), Some(hi)) => Expr::Slice { lo, hi },
                    _ => Expr::Other(List::EMPTY),
                }
            }
            "string" | "concatenated_string" => {
                let parts = if n.k() == "string" {
                    vec![n]
                } else {
                    named_children(n)
                };
                let mut text = String::new();
                let mut holes = Vec::new();
                for part in parts {
                    match self.string_value(part) {
                        Some((t, h)) => {
                            text.push_str(&t);
                            holes.extend(h);
                        }
                        None => return Ok(Expr::OtherStr),
                    }
                }
                let name = self.names.intern(&text);
                if text.contains(STR_HOLE) {
                    let ids: Vec<u32> = holes
                        .into_iter()
                        .map(|h| h.map_or(ExprId::NONE, |n| self.expr(n)).0)
                        .collect();
                    Expr::StrPattern {
                        pattern: name,
                        parts: self.list(&ids),
                    }
                } else {
                    Expr::Str(name)
                }
            }
            "keyword_argument" => return Err(self.opt_expr(n.field("value"))),
            _ => {
                let ids: Vec<u32> = named_children(n)
                    .into_iter()
                    .map(|c| self.expr(c).0)
                    .collect();
                Expr::Other(self.list(&ids))
            }
        })
    }

    /// `a < b <= c`, `x is None`: operands of an identity test are not reads of a tensor.
    fn comparison(&mut self, n: Node<'_>) -> Expr {
        let mut c = n.walk();
        let ops: Vec<&str> = n
            .children(&mut c)
            .filter(|c| !c.is_named())
            .map(|c| c.k())
            .collect();
        // (A chain of one operator, `a == b == c`, is that operator over every operand.)
        let same = ops.windows(2).all(|w| w[0] == w[1]);
        let first = if same {
            &ops[..ops.len().min(1)]
        } else {
            &ops[..]
        };
        let op = match first {
            ["is"] => CmpOp::Is,
            ["is not"] => CmpOp::IsNot,
            ["=="] => CmpOp::Eq,
            ["!="] => CmpOp::NotEq,
            ["in"] => CmpOp::In,
            ["not in"] => CmpOp::NotIn,
            ["<"] => CmpOp::Lt,
            ["<="] => CmpOp::LtE,
            [">"] => CmpOp::Gt,
            [">="] => CmpOp::GtE,
            _ => CmpOp::Other,
        };
        let identity = ops.iter().any(|o| matches!(*o, "is" | "is not"));
        let ids: Vec<u32> = named_children(n)
            .into_iter()
            .map(|p| self.expr_ctx(p, !identity).0)
            .collect();
        Expr::Compare {
            operands: self.list(&ids),
            op,
        }
    }

    /// `{k: v, **rest}` (a spread has no key).
    fn dictionary(&mut self, n: Node<'_>) -> Expr {
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for pair in named_children(n) {
            if pair.k() == "pair" {
                keys.push(self.opt_expr(pair.field("key")).0);
                values.push(self.opt_expr(pair.field("value")).0);
            } else {
                keys.push(ExprId::NONE.0);
                let inner = if pair.k() == "dictionary_splat" {
                    pair.named_child(0)
                } else {
                    Some(pair)
                };
                values.push(self.opt_expr(inner).0);
            }
        }
        Expr::Dict {
            keys: self.list(&keys),
            values: self.list(&values),
        }
    }

    /// `body if test else orelse`.
    fn conditional(&mut self, n: Node<'_>) -> Expr {
        let parts = named_children(n);
        let mut get = |i: usize| match parts.get(i) {
            Some(p) => self.expr(*p),
            None => ExprId::NONE,
        };
        let body = get(0);
        let test = get(1);
        let orelse = get(2);
        Expr::IfExp { body, test, orelse }
    }

    /// The value of a string literal (escapes kept as written), and its holes: an f-string's
    /// interpolations are each [`STR_HOLE`], with the expression whose value fills it (none where
    /// a format spec or a conversion changes its text). Bytes and template strings have none.
    #[allow(clippy::type_complexity)]
    fn string_value<'n>(&self, n: Node<'n>) -> Option<(String, Vec<Option<Node<'n>>>)> {
        if n.k() != "string" {
            return None;
        }
        let mut out = String::new();
        let mut holes = Vec::new();
        let mut fstring = false;
        for c in named_children(n) {
            match c.k() {
                "string_start" => {
                    let t = self.text(c);
                    if t.chars().any(|ch| matches!(ch, 'b' | 'B' | 't' | 'T')) {
                        return None;
                    }
                    fstring = t.chars().any(|ch| matches!(ch, 'f' | 'F'));
                }
                // (`{{` in an f-string is one `{`.)
                "string_content" if fstring => {
                    out.push_str(&self.text(c).replace("{{", "{").replace("}}", "}"))
                }
                "string_content" => out.push_str(self.text(c)),
                "interpolation" => {
                    out.push(STR_HOLE);
                    // (A conversion, a format spec or `{x=}` make its text other than the
                    // value's.)
                    let mut w = c.walk();
                    let plain = c
                        .children(&mut w)
                        .all(|p| !matches!(p.kind(), "type_conversion" | "format_specifier" | "="));
                    holes.push(c.field("expression").filter(|_| plain));
                }
                "string_end" => {}
                _ => return None,
            }
        }
        Some((out, holes))
    }

    fn seq(&mut self, n: Node<'_>, kind: SeqKind) -> Expr {
        let ids: Vec<u32> = named_children(n)
            .into_iter()
            .map(|c| self.expr(c).0)
            .collect();
        Expr::Seq {
            kind,
            items: self.list(&ids),
        }
    }

    fn comprehension(&mut self, n: Node<'_>, kind: CompKind) -> Expr {
        let mut gens = Vec::new();
        let mut body = None;
        // Clauses in order: each `if` belongs to the `for` before it.
        let mut pending: Option<(ExprId, ExprId, Vec<u32>)> = None;
        for c in named_children(n) {
            match c.k() {
                "for_in_clause" => {
                    if let Some((t, i, ifs)) = pending.take() {
                        gens.push(self.generator(t, i, &ifs));
                    }
                    let iter = self.opt_expr(c.field("right"));
                    let target = self.opt_expr(c.field("left"));
                    pending = Some((target, iter, Vec::new()));
                }
                "if_clause" => {
                    let conds: Vec<u32> = named_children(c)
                        .into_iter()
                        .map(|x| self.expr(x).0)
                        .collect();
                    if let Some((_, _, ifs)) = pending.as_mut() {
                        ifs.extend(conds);
                    }
                }
                _ => body = Some(c),
            }
        }
        if let Some((t, i, ifs)) = pending.take() {
            gens.push(self.generator(t, i, &ifs));
        }
        let (elt, value) = match body {
            Some(b) if b.k() == "pair" => (
                self.opt_expr(b.field("key")),
                self.opt_expr(b.field("value")),
            ),
            Some(b) => (self.expr(b), ExprId::NONE),
            None => (ExprId::NONE, ExprId::NONE),
        };
        Expr::Comp {
            kind,
            elt,
            value,
            gens: self.list(&gens),
        }
    }

    fn generator(&mut self, target: ExprId, iter: ExprId, ifs: &[u32]) -> u32 {
        let ifs = self.list(ifs);
        self.body.generators.push(Generator { target, iter, ifs });
        self.body.generators.len() as u32 - 1
    }

    fn call(&mut self, n: Node<'_>) -> Expr {
        let func = self.opt_expr(n.field("function"));
        let args = self.args(n.field("arguments"));
        self.metadata_arg(func, args);
        Expr::Call { func, args }
    }

    /// A name passed where only its metadata is read (`torch.zeros_like(x)`, `y.view_as(x)`), or
    /// only which tensor it is (`ctx.mark_dirty(x)`), is not a read of its values.
    fn metadata_arg(&mut self, func: ExprId, args: u32) {
        let name = match self.body.exprs.get(func.idx()) {
            Some(Expr::Name { name, .. } | Expr::Attr { attr: name, .. }) => *name,
            _ => return,
        };
        let func = self.names.resolve(name);
        // (`ctx.mark_dirty(x, y)`: autograd's bookkeeping of which tensors these are.)
        let all = ops::identity_args(func);
        if !all && !ops::metadata_arg(func) {
            return;
        }
        let given: Vec<ExprId> = (self.body)
            .exprs_of(self.body.args[args as usize].positional)
            .take(if all { usize::MAX } else { 1 })
            .collect();
        for e in given {
            if let Some(Expr::Name { reads, .. }) = self.body.exprs.get_mut(e.idx()) {
                *reads = false;
            }
        }
    }

    fn args(&mut self, n: Option<Node<'_>>) -> u32 {
        let mut positional = Vec::new();
        let mut keywords = Vec::new();
        let span = n.map_or(Rel::default(), |a| self.rel(a));
        let mut generator = false;
        if let Some(list) = n {
            if list.k() == "generator_expression" {
                generator = true;
                positional.push(self.expr(list).0);
            } else {
                for a in named_children(list) {
                    match a.k() {
                        "keyword_argument" => {
                            let name = a.field("name").map(|nm| self.intern(nm));
                            let value = self.opt_expr(a.field("value"));
                            self.body.keywords.push(Keyword {
                                name,
                                value,
                                span: self.rel(a),
                            });
                            keywords.push(self.body.keywords.len() as u32 - 1);
                        }
                        "dictionary_splat" => {
                            let value = self.opt_expr(a.named_child(0));
                            self.body.keywords.push(Keyword {
                                name: None,
                                value,
                                span: self.rel(a),
                            });
                            keywords.push(self.body.keywords.len() as u32 - 1);
                        }
                        _ => positional.push(self.expr(a).0),
                    }
                }
            }
        }
        let args = Args {
            positional: self.list(&positional),
            keywords: self.list(&keywords),
            span,
            generator,
        };
        self.body.args.push(args);
        self.body.args.len() as u32 - 1
    }

    fn subscript(&mut self, n: Node<'_>) -> Expr {
        let value = self.opt_expr(n.field("value"));
        let mut c = n.walk();
        let idx: Vec<Node<'_>> = n.children_by_field_name("subscript", &mut c).collect();
        let index = match idx.as_slice() {
            [one] => self.index(*one),
            _ => Index::Other,
        };
        let whole = !idx.is_empty() && idx.iter().all(|i| self.whole_dimension(*i));
        let whole_parts = idx
            .iter()
            .take(32)
            .enumerate()
            .filter(|(_, i)| self.whole_dimension(**i))
            .fold(0u32, |m, (k, _)| m | 1 << k);
        let parts: Vec<u32> = idx.into_iter().map(|i| self.expr(i).0).collect();
        let parts = self.list(&parts);
        self.body.subscripts.push(Subscript {
            index,
            parts,
            whole,
            whole_parts,
        });
        Expr::Subscript {
            value,
            sub: self.body.subscripts.len() as u32 - 1,
        }
    }

    /// An index part that selects all of its dimension: `...`, or a slice whose start is absent
    /// or 0, whose stop is absent or None, and whose step is absent or 1.
    fn whole_dimension(&self, part: Node<'_>) -> bool {
        match part.k() {
            "ellipsis" => true,
            "slice" => {
                let text: String = self.text(part).split_whitespace().collect();
                let mut pieces = text.split(':');
                let start = pieces.next().unwrap_or("");
                let stop = pieces.next().unwrap_or("");
                let step = pieces.next().unwrap_or("");
                pieces.next().is_none()
                    && matches!(start, "" | "0" | "None")
                    && matches!(stop, "" | "None")
                    && matches!(step, "" | "1" | "None")
            }
            _ => false,
        }
    }

    /// A literal index: `[2]`, `[-1]`, `[1:]`, `["key"]`.
    fn index(&self, one: Node<'_>) -> Index {
        let int = |n: Node<'_>| self.text(n).replace([' ', '_'], "").parse::<i64>().ok();
        match one.k() {
            "integer" | "unary_operator" => int(one).map(Index::At).unwrap_or(Index::Other),
            "string" | "concatenated_string" => Index::Key,
            // `"u_%d" % i`, `"layer" + str(i)`: a string key built at run time.
            "binary_operator"
                if one
                    .field("left")
                    .is_some_and(|l| matches!(l.k(), "string" | "concatenated_string")) =>
            {
                Index::Key
            }
            "slice" => {
                let text = self.text(one);
                if text.matches(':').count() > 1 {
                    return Index::Other;
                }
                let colon = text.find(':').map_or(usize::MAX, |c| one.start_byte() + c);
                let (mut lo, mut hi) = (None, None);
                for p in named_children(one) {
                    let Some(v) = int(p) else {
                        return Index::Other;
                    };
                    if p.end_byte() <= colon {
                        lo = Some(v);
                    } else if hi.is_none() {
                        hi = Some(v);
                    }
                }
                Index::Range(lo, hi)
            }
            _ => Index::Other,
        }
    }
}

/// Numbers, strings and flags (`int`, `Optional[float]`, `Union[int, str]`).
const SCALAR: &[&str] = &[
    "int", "float", "bool", "str", "bytes", "complex", "None", "Optional", "Union", "typing",
];

/// Python values and containers of them (`tuple[int, ...]`, `Optional[Sequence[float]]`).
const PLAIN: &[&str] = &[
    "int", "float", "bool", "str", "bytes", "complex", "None", "tuple", "Tuple", "list", "List",
    "Sequence", "Iterable", "Optional", "Union", "dict", "Dict", "set", "Set", "typing", "Mapping",
];

/// Whether every word of an annotation is one of `allowed`.
fn only_words(annotation: &str, allowed: &[&str]) -> bool {
    let mut words = annotation
        .split(|c: char| !super::ident_char(c))
        .filter(|w| !w.is_empty())
        .peekable();
    words.peek().is_some() && words.all(|w| allowed.contains(&w))
}

/// Words in an annotation that say it may hold tensors.
const TENSORISH: &[&str] = &[
    "Tensor",
    "Module",
    "Any",
    "Parameter",
    "torch",
    "Variable",
    "Sequence",
    "Iterable",
    "list",
    "List",
    "tuple",
    "Tuple",
    "dict",
    "Dict",
];
