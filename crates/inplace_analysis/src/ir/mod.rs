//! The intermediate representation the interpreter walks: one [`Body`] per item (a top-level
//! statement, a function, a class header or a class-body statement), lowered once from its
//! syntax tree. Statements and expressions live in arenas and refer to each other by index;
//! names are interned; every node keeps its byte range *relative to its item's start*, so a
//! body stays valid when its item moves in the file. Nothing here knows tree-sitter.

pub mod names;

pub use names::{known, Interner, Name};

/// An item of a file: stable for as long as its text does not change (see
/// [`crate::file::FileIr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ItemId(pub u32);

/// A byte range relative to the start of the item it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Rel {
    pub start: u32,
    pub end: u32,
}

impl Rel {
    pub fn new(start: u32, end: u32) -> Rel {
        Rel { start, end }
    }
    pub fn contains(self, o: Rel) -> bool {
        self.start <= o.start && o.end <= self.end
    }
}

/// A place in a file: a range within an item. Moves with its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Span {
    pub item: ItemId,
    pub rel: Rel,
}

impl Span {
    pub fn new(item: ItemId, rel: Rel) -> Span {
        Span { item, rel }
    }
    /// Whether `o` lies within this span (in the same item).
    pub fn contains(self, o: Span) -> bool {
        self.item == o.item && self.rel.contains(o.rel)
    }
}

macro_rules! id {
    ($($name:ident),*) => {$(
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
        impl $name {
            pub const NONE: $name = $name(u32::MAX);
            pub fn is_none(self) -> bool { self.0 == u32::MAX }
            pub fn get(self) -> Option<$name> { (!self.is_none()).then_some(self) }
            pub fn idx(self) -> usize { self.0 as usize }
        }
    )*};
}

id!(ExprId, StmtId, FuncId, ClassId);

/// A function: `func` in the body of `item` (`FuncId::NONE`: the item's own definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DefLoc {
    pub item: ItemId,
    pub func: FuncId,
}

/// A class defined in the body of `item` (a class item defines its class as `ClassId(0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClassLoc {
    pub item: ItemId,
    pub class: ClassId,
}

/// A statement of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StmtRef {
    pub item: ItemId,
    pub stmt: StmtId,
}

/// A list of ids in [`Body::lists`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct List {
    pub start: u32,
    pub len: u32,
}

impl List {
    pub const EMPTY: List = List { start: 0, len: 0 };
    pub fn is_empty(self) -> bool {
        self.len == 0
    }
}

/// A block of statements.
pub type Block = List;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    MatMul,
    Pow,
    FloorDiv,
    Mod,
    /// `&`, `|`, `^`, `<<`, `>>`, ...: no op of the table.
    Other,
}

impl BinOp {
    /// The op table's name (`add`, `mul`, ...).
    pub fn op_name(self) -> Option<&'static str> {
        Some(match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::MatMul => "matmul",
            BinOp::Pow => "pow",
            BinOp::FloorDiv => "floor_divide",
            BinOp::Mod => "remainder",
            BinOp::Other => return None,
        })
    }

    pub fn from_text(op: &str) -> BinOp {
        match op.trim_end_matches('=') {
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "*" => BinOp::Mul,
            "/" => BinOp::Div,
            "@" => BinOp::MatMul,
            "**" => BinOp::Pow,
            "//" => BinOp::FloorDiv,
            "%" => BinOp::Mod,
            _ => BinOp::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeqKind {
    Tuple,
    List,
    Set,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompKind {
    List,
    Set,
    Generator,
    Dict,
}

/// What stands for an unknown part of a string (`f"layer{i}"`, `"layer%d" % i`,
/// `"layer" + str(i)`): every spelling of one family of names reads the same.
pub const STR_HOLE: char = '\u{1}';

/// What a subscript indexes with, as far as it is a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Index {
    /// `[2]`, `[-1]`
    At(i64),
    /// `[1:]`, `[:3]`, `[:]`
    Range(Option<i64>, Option<i64>),
    /// `["key"]`
    Key,
    Other,
}

/// The operator of a comparison with one operator (`Other` for chains).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Is,
    IsNot,
    Eq,
    NotEq,
    In,
    NotIn,
    Lt,
    LtE,
    Gt,
    GtE,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expr {
    /// A name; `reads` is false where only metadata is read (`x.shape`, `x is None`).
    Name {
        name: Name,
        reads: bool,
    },
    /// `value.attr`; the attribute's name starts at `attr_at` (relative).
    Attr {
        value: ExprId,
        attr: Name,
        attr_at: u32,
    },
    /// A call; its arguments are `Body::args[args]`.
    Call {
        func: ExprId,
        args: u32,
    },
    /// `value[...]`; the index is `Body::subscripts[sub]`.
    Subscript {
        value: ExprId,
        sub: u32,
    },
    Binary {
        op: BinOp,
        left: ExprId,
        right: ExprId,
    },
    /// `-x`, `+x`, `~x`.
    Unary {
        operand: ExprId,
    },
    Not(ExprId),
    Bool {
        and: bool,
        left: ExprId,
        right: ExprId,
    },
    /// `a < b`, `a is None`, `a == "relu"`: operands, and the operator when there is one.
    Compare {
        operands: List,
        op: CmpOp,
    },
    Seq {
        kind: SeqKind,
        items: List,
    },
    /// `*x` in a list, tuple or call.
    Starred(ExprId),
    /// A dict literal: keys and values (a key of `ExprId::NONE` is `**splat`).
    Dict {
        keys: List,
        values: List,
    },
    Comp {
        kind: CompKind,
        elt: ExprId,
        value: ExprId,
        gens: List,
    },
    Lambda(FuncId),
    IfExp {
        body: ExprId,
        test: ExprId,
        orelse: ExprId,
    },
    Named {
        target: Name,
        value: ExprId,
    },
    Await(ExprId),
    Yield(ExprId),
    True,
    False,
    None,
    Int(i64),
    Float,
    /// A plain string literal and its value.
    Str(Name),
    /// An f-string with interpolations: its text with each one a [`STR_HOLE`] (`f"layer{i}"`),
    /// and the expression of each hole in order ([`ExprId::NONE`] where a format spec or a
    /// conversion makes its text other than the value's).
    StrPattern {
        pattern: Name,
        parts: List,
    },
    /// Bytes, template strings.
    OtherStr,
    Ellipsis,
    /// A slice with constant bounds (`1:`, `:-1`, `:`), as a part of a subscript; an absent
    /// bound is [`Expr::NO_BOUND`].
    Slice {
        lo: i32,
        hi: i32,
    },
    /// Anything else: its parts are evaluated, its value is unknown.
    Other(List),
}

impl Expr {
    /// The bound of an [`Expr::Slice`] that is absent (`:3`, `1:`).
    pub const NO_BOUND: i32 = i32::MIN;
}

/// A call's arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Args {
    /// Positional arguments (a `Starred` one is `*xs`).
    pub positional: List,
    /// Indexes into [`Body::keywords`].
    pub keywords: List,
    /// The argument list with its parentheses.
    pub span: Rel,
    /// `f(x for x in xs)`.
    pub generator: bool,
}

/// `name=value` (or `**value` when `name` is `None`); `span` covers the whole argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Keyword {
    pub name: Option<Name>,
    pub value: ExprId,
    pub span: Rel,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Subscript {
    pub index: Index,
    /// The index expressions (evaluated for their effects).
    pub parts: List,
    /// Every part selects a whole dimension (`[:]`, `[...]`, `[:, :]`, `[0::1]`): the subscript
    /// is the tensor itself, not a view of part of it.
    pub whole: bool,
    /// Which parts (bit `k`: part `k`, the first 32) select a whole dimension.
    pub whole_parts: u32,
}

/// `for target in iter if cond` in a comprehension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Generator {
    pub target: ExprId,
    pub iter: ExprId,
    pub ifs: List,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stmt {
    Expr(ExprId),
    /// `a = b = value` (targets in order); an annotation without a value has no targets.
    Assign {
        targets: List,
        value: ExprId,
    },
    AugAssign {
        target: ExprId,
        op: BinOp,
        value: ExprId,
    },
    Return(ExprId),
    /// `if`, then its `elif`/`else` clauses (indexes into [`Body::clauses`]).
    If {
        cond: ExprId,
        body: Block,
        clauses: List,
    },
    For {
        target: ExprId,
        iter: ExprId,
        body: Block,
        orelse: Block,
    },
    While {
        cond: ExprId,
        body: Block,
        orelse: Block,
    },
    /// Index into [`Body::tries`].
    Try(u32),
    /// Items are indexes into [`Body::with_items`].
    With {
        items: List,
        body: Block,
    },
    Def(FuncId),
    Class(ClassId),
    /// Indexes into [`Body::imports`].
    Import(List),
    Break,
    Continue,
    Raise(List),
    Match {
        subject: ExprId,
        cases: List,
    },
    Block(Block),
    Pass,
    /// `del a, m.attr, m._parameters[k]`: its targets.
    Delete(List),
    /// Anything else: its expressions are evaluated.
    Other(List),
}

/// An `elif cond:` (cond set) or `else:` (cond `NONE`) clause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clause {
    pub cond: ExprId,
    pub body: Block,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Try {
    pub body: Block,
    /// `except` handlers: (the `as` target or `NONE`, the body), in [`Body::handlers`].
    pub handlers: List,
    pub orelse: Option<Block>,
    pub finally: Option<Block>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handler {
    pub alias: ExprId,
    pub body: Block,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WithItem {
    pub expr: ExprId,
    pub alias: ExprId,
}

/// One name an import binds: `import a.b` binds `a` to path `a`; `import a.b as c` binds `c`
/// to `a.b`; `from m import x as y` binds `y` to `m.x`. Relative paths keep their dots
/// (`from .m import x`: `.m.x`; `from .. import m`: `..m`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Import {
    pub bind: Name,
    pub path: Name,
    /// The whole dotted path the statement imports (`a.b` for `import a.b`, else `path`).
    pub full: Name,
    pub span: Rel,
}

/// What a parameter's annotation says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotation {
    None,
    /// Mentions `Tensor`.
    Tensor,
    /// A type that is no tensor (a config class, `list[int]`).
    NonTensor,
    /// A number, string or flag (`int`, `Optional[float]`): what a caller passes is one.
    Scalar,
    /// Mentions modules, containers or `Any`: it may hold tensors.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    Normal,
    /// `*args`
    VarArgs,
    /// `**kwargs`
    KwArgs,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Param {
    pub name: Name,
    pub kind: ParamKind,
    pub default: ExprId,
    /// The default is a literal (`n=3`, `mode="x"`, `eps=-1e-5`, a tuple).
    pub literal_default: bool,
    pub annotation: Annotation,
    pub span: Rel,
}

/// Decorators the analysis knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decorators {
    pub staticmethod: bool,
    pub classmethod: bool,
    /// `@torch.no_grad()`, `@torch.inference_mode()`.
    pub no_grad: bool,
    /// `@torch.inference_mode()`: the tensors it makes are inference tensors.
    pub inference: bool,
    /// `@property` (a getter: reading the attribute runs it).
    pub property: bool,
    /// `@x.setter` (assigning the attribute runs it).
    pub setter: bool,
    /// `@x.deleter`.
    pub deleter: bool,
}

/// Where a function is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// At module level, or nested in a function.
    None,
    /// A method of a class defined in the same body.
    Class(ClassId),
    /// A method of the class whose body holds this item (found through the file's items).
    ItemClass,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FuncDef {
    pub name: Name,
    pub params: List,
    /// The statements (for a lambda: one `Return`).
    pub body: Block,
    pub lambda: bool,
    pub generator: bool,
    pub decorators: Decorators,
    /// Its decorators' expressions, in source order (`@register_model`, `@torch.no_grad()`).
    pub applied: List,
    pub owner: Owner,
    /// The whole definition, decorators included.
    pub span: Rel,
    /// Lines in its text (its share of the step budget).
    pub lines: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassDef {
    pub name: Name,
    pub bases: List,
    /// Methods defined in this body (`FuncId`s); a class item's methods are items of their own.
    pub methods: List,
    /// Derives from `torch.autograd.Function`: its methods run without grad.
    pub autograd_function: bool,
    /// Its decorators' expressions, in source order (`@register`, `@MODELS.register()`).
    pub decorators: List,
    pub span: Rel,
}

/// One item, lowered.
#[derive(Debug, Clone, Default)]
pub struct Body {
    pub exprs: Vec<Expr>,
    pub expr_spans: Vec<Rel>,
    pub stmts: Vec<Stmt>,
    pub stmt_spans: Vec<Rel>,
    /// Ids of every [`List`].
    pub lists: Vec<u32>,
    pub args: Vec<Args>,
    pub keywords: Vec<Keyword>,
    pub subscripts: Vec<Subscript>,
    pub generators: Vec<Generator>,
    pub clauses: Vec<Clause>,
    pub tries: Vec<Try>,
    pub handlers: Vec<Handler>,
    pub with_items: Vec<WithItem>,
    pub imports: Vec<Import>,
    pub params: Vec<Param>,
    pub funcs: Vec<FuncDef>,
    pub classes: Vec<ClassDef>,
    /// The item's statements.
    pub root: Block,
}

impl Body {
    /// The definition an item of kind function is (its first statement).
    pub fn root_def(&self) -> Option<FuncId> {
        self.stmts_of(self.root).find_map(|s| match self.stmt(s) {
            Stmt::Def(f) => Some(*f),
            _ => None,
        })
    }

    /// The class a class item defines.
    pub fn root_class(&self) -> Option<ClassId> {
        self.stmts_of(self.root).find_map(|s| match self.stmt(s) {
            Stmt::Class(c) => Some(*c),
            _ => None,
        })
    }

    pub fn expr(&self, e: ExprId) -> &Expr {
        &self.exprs[e.idx()]
    }
    pub fn stmt(&self, s: StmtId) -> &Stmt {
        &self.stmts[s.idx()]
    }
    pub fn expr_span(&self, e: ExprId) -> Rel {
        self.expr_spans[e.idx()]
    }
    pub fn stmt_span(&self, s: StmtId) -> Rel {
        self.stmt_spans[s.idx()]
    }
    pub fn list(&self, l: List) -> &[u32] {
        &self.lists[l.start as usize..(l.start + l.len) as usize]
    }
    pub fn exprs_of(&self, l: List) -> impl Iterator<Item = ExprId> + '_ {
        self.list(l).iter().map(|&i| ExprId(i))
    }
    /// Every import of the body, in its nested blocks too (not in nested functions' bodies
    /// when they are items of their own).
    pub fn all_imports(&self) -> Vec<Import> {
        self.imports_within(false)
    }

    /// Every import of the body, in its nested blocks and, with `in_defs`, in the bodies of
    /// the functions it defines (a function item's own body among them).
    pub fn imports_within(&self, in_defs: bool) -> Vec<Import> {
        let mut out = Vec::new();
        let mut blocks = vec![self.root];
        while let Some(b) = blocks.pop() {
            for s in self.stmts_of(b) {
                blocks.extend(self.inner_blocks(s));
                match *self.stmt(s) {
                    Stmt::Import(list) => {
                        out.extend(self.list(list).iter().map(|i| self.imports[*i as usize]))
                    }
                    Stmt::Def(f) if in_defs => blocks.push(self.func(f).body),
                    _ => {}
                }
            }
        }
        out
    }

    /// Names the statements of `root` bind in its own scope (assignment, loop, `with` and
    /// `except` targets, augmented assignments, imports, definitions; not what nested
    /// functions and classes bind inside them), each once, in no particular order.
    pub fn bound_in(&self, root: Block) -> Vec<Name> {
        let mut out = Vec::new();
        let mut targets = Vec::new();
        let mut blocks = vec![root];
        while let Some(b) = blocks.pop() {
            for s in self.stmts_of(b) {
                blocks.extend(self.inner_blocks(s));
                match *self.stmt(s) {
                    Stmt::Assign { targets: t, .. } => targets.extend(self.exprs_of(t)),
                    Stmt::AugAssign { target, .. } | Stmt::For { target, .. } => {
                        targets.push(target)
                    }
                    Stmt::Try(t) => targets.extend(
                        self.list(self.tries[t as usize].handlers)
                            .iter()
                            .map(|h| self.handlers[*h as usize].alias),
                    ),
                    Stmt::With { items, .. } => targets.extend(
                        self.list(items)
                            .iter()
                            .map(|i| self.with_items[*i as usize].alias),
                    ),
                    Stmt::Def(f) => out.push(self.func(f).name),
                    Stmt::Class(k) => out.push(self.class(k).name),
                    Stmt::Import(list) => out.extend(
                        self.list(list)
                            .iter()
                            .map(|i| self.imports[*i as usize].bind),
                    ),
                    _ => {}
                }
            }
        }
        // Every name in a target pattern (`a, (b, *c) = ...`).
        while let Some(t) = targets.pop() {
            if t.is_none() {
                continue;
            }
            match *self.expr(t) {
                Expr::Name { name, .. } => out.push(name),
                Expr::Seq { items, .. } => targets.extend(self.exprs_of(items)),
                Expr::Starred(inner) => targets.push(inner),
                _ => {}
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether a new binding of a name (the one `is_name` accepts) made by statement `s` would
    /// be a name of the scope `s` runs in: always at an item's top level; in a function, when it
    /// is one of its parameters or its own statements bind it (else `name = ...` there would
    /// make it local and its reads before raise `UnboundLocalError`: a closure's or a global's
    /// name). Walrus and `match` targets are not counted: such a name only loses its fix.
    pub fn binds_locally(&self, s: StmtId, is_name: impl Fn(Name) -> bool) -> bool {
        let at = self.stmt_span(s);
        let Some(f) = (self.funcs.iter())
            .filter(|f| !f.lambda && f.span.contains(at))
            .min_by_key(|f| f.span.end - f.span.start)
        else {
            return true;
        };
        self.param_names(f).any(&is_name) || self.bound_in(f.body).into_iter().any(is_name)
    }

    /// The names of the parameters of function `f`, in order.
    pub fn param_names<'b>(&'b self, f: &'b FuncDef) -> impl Iterator<Item = Name> + 'b {
        self.list(f.params)
            .iter()
            .map(|p| self.params[*p as usize].name)
    }

    pub fn stmts_of(&self, l: List) -> impl Iterator<Item = StmtId> + '_ {
        self.list(l).iter().map(|&i| StmtId(i))
    }

    /// The blocks a statement runs in its own scope (branches, loop bodies, `try` clauses,
    /// `with` bodies, `match` cases; not the bodies of `def` and `class`).
    pub fn inner_blocks(&self, s: StmtId) -> smallvec::SmallVec<[Block; 4]> {
        let mut out = smallvec::SmallVec::new();
        match *self.stmt(s) {
            Stmt::If { body, clauses, .. } => {
                out.push(body);
                out.extend(
                    self.list(clauses)
                        .iter()
                        .map(|c| self.clauses[*c as usize].body),
                );
            }
            Stmt::For { body, orelse, .. } | Stmt::While { body, orelse, .. } => {
                out.extend([body, orelse])
            }
            Stmt::Try(t) => {
                let t = self.tries[t as usize];
                out.push(t.body);
                out.extend(
                    self.list(t.handlers)
                        .iter()
                        .map(|h| self.handlers[*h as usize].body),
                );
                out.extend(t.orelse);
                out.extend(t.finally);
            }
            Stmt::With { body, .. } => out.push(body),
            Stmt::Match { cases, .. } => {
                out.extend(self.stmts_of(cases).filter_map(|c| match *self.stmt(c) {
                    Stmt::Block(b) => Some(b),
                    _ => None,
                }))
            }
            Stmt::Block(b) => out.push(b),
            _ => {}
        }
        out
    }
    pub fn func(&self, f: FuncId) -> &FuncDef {
        &self.funcs[f.idx()]
    }
    pub fn class(&self, c: ClassId) -> &ClassDef {
        &self.classes[c.idx()]
    }
    /// Replace every name by `map[name]`: a body lowered with another interner (on another
    /// thread), moved to the interner `map` came from ([`Interner::absorb`]).
    pub fn rename(&mut self, map: &[Name]) {
        self.rename_with(|n| map[n.idx()]);
    }

    /// Replace every name `n` with `f(n)`.
    pub fn rename_with(&mut self, mut f: impl FnMut(Name) -> Name) {
        let mut m = |n: &mut Name| *n = f(*n);
        for e in &mut self.exprs {
            match e {
                Expr::Name { name, .. } => m(name),
                Expr::Attr { attr, .. } => m(attr),
                Expr::Named { target, .. } => m(target),
                Expr::Str(s) | Expr::StrPattern { pattern: s, .. } => m(s),
                _ => {}
            }
        }
        self.keywords
            .iter_mut()
            .filter_map(|k| k.name.as_mut())
            .for_each(&mut m);
        for i in &mut self.imports {
            m(&mut i.bind);
            m(&mut i.path);
            m(&mut i.full);
        }
        self.params.iter_mut().for_each(|p| m(&mut p.name));
        self.funcs.iter_mut().for_each(|f| m(&mut f.name));
        self.classes.iter_mut().for_each(|c| m(&mut c.name));
    }

    /// The first expression spanning exactly `rel` (a call or name a span was recorded for).
    pub fn expr_with_span(&self, rel: Rel) -> Option<ExprId> {
        (self.expr_spans.iter())
            .position(|sp| *sp == rel)
            .map(|i| ExprId(i as u32))
    }

    /// The statements of the block that holds statement `s`, in order (the item's own, a
    /// function's, or a compound statement's body or branch).
    pub fn siblings(&self, s: StmtId) -> Vec<StmtId> {
        let mut blocks = vec![self.root];
        while let Some(b) = blocks.pop() {
            let stmts: Vec<StmtId> = self.stmts_of(b).collect();
            if stmts.contains(&s) {
                return stmts;
            }
            for t in stmts {
                blocks.extend(self.inner_blocks(t));
                if let Stmt::Def(f) = *self.stmt(t) {
                    blocks.push(self.func(f).body);
                }
            }
        }
        Vec::new()
    }

    /// Whether the body reads or binds the variable `n` anywhere (nested functions and classes
    /// included; attributes, keywords and strings are not variables).
    pub fn mentions(&self, n: Name) -> bool {
        self.exprs.iter().any(|e| {
            matches!(*e, Expr::Name { name, .. } | Expr::Named { target: name, .. } if name == n)
        }) || self.imports.iter().any(|i| i.bind == n)
            || self.params.iter().any(|p| p.name == n)
            || self.funcs.iter().any(|f| f.name == n)
            || self.classes.iter().any(|c| c.name == n)
    }

    /// Drop the spare capacity lowering left (a body is kept across versions of an open file).
    pub fn shrink_to_fit(&mut self) {
        self.exprs.shrink_to_fit();
        self.expr_spans.shrink_to_fit();
        self.stmts.shrink_to_fit();
        self.stmt_spans.shrink_to_fit();
        self.lists.shrink_to_fit();
        self.args.shrink_to_fit();
        self.keywords.shrink_to_fit();
        self.subscripts.shrink_to_fit();
        self.generators.shrink_to_fit();
        self.clauses.shrink_to_fit();
        self.tries.shrink_to_fit();
        self.handlers.shrink_to_fit();
        self.with_items.shrink_to_fit();
        self.imports.shrink_to_fit();
        self.params.shrink_to_fit();
        self.funcs.shrink_to_fit();
        self.classes.shrink_to_fit();
    }

    /// Approximate heap size, for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.exprs.capacity() * (size_of::<Expr>() + size_of::<Rel>())
            + self.stmts.capacity() * (size_of::<Stmt>() + size_of::<Rel>())
            + self.lists.capacity() * 4
            + self.args.capacity() * size_of::<Args>()
            + self.keywords.capacity() * size_of::<Keyword>()
            + self.subscripts.capacity() * size_of::<Subscript>()
            + self.funcs.capacity() * size_of::<FuncDef>()
            + self.params.capacity() * size_of::<Param>()
            + self.generators.capacity() * size_of::<Generator>()
            + self.clauses.capacity() * size_of::<Clause>()
            + self.tries.capacity() * size_of::<Try>()
            + self.handlers.capacity() * size_of::<Handler>()
            + self.with_items.capacity() * size_of::<WithItem>()
            + self.imports.capacity() * size_of::<Import>()
            + self.classes.capacity() * size_of::<ClassDef>()
    }
}
