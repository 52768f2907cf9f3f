//! The oracle's programs (`oracle`): the statements it generates, the
//! strategy that draws them, and their rendering as a checkpoint body, in
//! which every construct is written as model code writes it.

use std::fmt::Write;
use std::str::FromStr;

use proc_macro2::TokenStream;
use proptest::prelude::*;
use quote::quote;

pub(super) const VARS: usize = 4;

#[derive(Debug, Clone)]
pub(super) enum Stmt {
    /// `vI = remat!(save ..)`
    Save(usize),
    /// `(vI, vJ) = remat!(save ..)`: a two-tensor output.
    SaveTuple(usize, usize),
    /// `vI = remat!(recompute ..: f(&vJ))`: consumes vJ, output plain.
    Recompute(usize, usize),
    /// `vI = vJ.shallow_clone();` (a view)
    Copy(usize, usize),
    /// `vI = vJ.i(x);`: `index_select`, a copy, which reads vJ.
    IndexCopy(usize, usize),
    /// `vI = vJ.i((.., 0..1));` (a view)
    IndexView(usize, usize),
    /// `vI = vJ.chunk(2, 0)[K].shallow_clone();`: a piece of a split view,
    /// which shares vJ's storage.
    Piece(usize, usize, usize),
    /// `vI = x.exp();`
    Plain(usize),
    /// `h.t = vI.shallow_clone();` (field 0 or 1)
    Store(usize, usize),
    /// The same store through a `&mut` re-borrow: `{ let r = &mut h;
    /// r.t = ..; }`, or `{ let r = &mut h.t; *r = ..; }` when the flag is set.
    StoreRef(usize, usize, bool),
    /// `vI = h.t.shallow_clone();`
    Load(usize, usize),
    Needs(usize),
    Read(usize),
    ReadField(usize),
    If(Vec<Stmt>, Vec<Stmt>),
    Loop(Vec<Stmt>),
    /// `'bK: { .. }`
    Labelled(Vec<Stmt>),
    /// `if is_recomputing() { A } else { B }`, or with `!` when the flag is
    /// set: one arm runs on the forward only, the other on recomputation
    /// only. The arms hold no regions and no control flow, so that both
    /// passes make the same instances and draw the same choices.
    Phased(bool, Vec<Stmt>, Vec<Stmt>),
    /// `#[cfg(feature = "fK")] let mut vI = x.exp();`: a shadowing `let`
    /// that may be compiled out; the shadow ends with its block.
    CfgLet(usize),
    /// `if cI { break 'bK; }` out of the innermost labelled block (through
    /// any loops in it); nothing outside one.
    Leave,
    /// `p = remat!(save [K]: fv(x));`: a `Vec` output of two tensors, into
    /// the one `Vec` local `p`.
    SaveVec,
    /// `remat! { needs p; }`: every element.
    NeedsVec,
    /// `remat! { needs p[K]; }`
    NeedsElem(usize),
    /// `let _ = p[K].exp();`
    ReadElem(usize),
    /// `p[K] = vI.shallow_clone();`
    StoreElem(usize, usize),
    /// `for t in &p { .. }`: reads each element, after marking it
    /// (`needs t;`) when the flag is set.
    ForRead(bool),
    /// `for t in &p { vI = t.shallow_clone(); }`: `vI` ends with the last.
    ForLoad(usize),
}

pub(super) fn stmt() -> impl Strategy<Value = Stmt> {
    let v = || 0..VARS;
    let leaf = prop_oneof![
        3 => v().prop_map(Stmt::Save),
        1 => (v(), v()).prop_filter("distinct", |(a, b)| a != b).prop_map(|(a, b)| Stmt::SaveTuple(a, b)),
        1 => (v(), v()).prop_map(|(a, b)| Stmt::Recompute(a, b)),
        2 => (v(), v()).prop_map(|(a, b)| Stmt::Copy(a, b)),
        1 => (v(), v()).prop_map(|(a, b)| Stmt::IndexCopy(a, b)),
        1 => (v(), v()).prop_map(|(a, b)| Stmt::IndexView(a, b)),
        1 => (v(), v(), 0..2usize).prop_map(|(a, b, k)| Stmt::Piece(a, b, k)),
        1 => v().prop_map(Stmt::Plain),
        1 => (0..2usize, v()).prop_map(|(f, a)| Stmt::Store(f, a)),
        1 => (0..2usize, v(), any::<bool>()).prop_map(|(f, a, d)| Stmt::StoreRef(f, a, d)),
        1 => (v(), 0..2usize).prop_map(|(a, f)| Stmt::Load(a, f)),
        3 => v().prop_map(Stmt::Needs),
        3 => v().prop_map(Stmt::Read),
        1 => (0..2usize).prop_map(Stmt::ReadField),
        1 => Just(Stmt::Leave),
        1 => v().prop_map(Stmt::CfgLet),
        1 => Just(Stmt::SaveVec),
        1 => Just(Stmt::NeedsVec),
        1 => (0..2usize).prop_map(Stmt::NeedsElem),
        1 => (0..2usize).prop_map(Stmt::ReadElem),
        1 => (0..2usize, v()).prop_map(|(k, a)| Stmt::StoreElem(k, a)),
        1 => any::<bool>().prop_map(Stmt::ForRead),
        1 => v().prop_map(Stmt::ForLoad),
    ];
    let v = || 0..VARS;
    let plain = prop_oneof![
        3 => v().prop_map(Stmt::Needs),
        3 => v().prop_map(Stmt::Read),
        1 => (v(), v()).prop_map(|(a, b)| Stmt::Copy(a, b)),
        1 => v().prop_map(Stmt::Plain),
    ];
    let arms = prop::collection::vec(plain, 0..4);
    let phased =
        (any::<bool>(), arms.clone(), arms).prop_map(|(not, a, b)| Stmt::Phased(not, a, b));
    let leaf = prop_oneof![3 => leaf, 1 => phased];
    leaf.prop_recursive(3, 40, 5, |inner| {
        prop_oneof![
            (
                prop::collection::vec(inner.clone(), 0..4),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(a, b)| Stmt::If(a, b)),
            prop::collection::vec(inner.clone(), 1..5).prop_map(Stmt::Loop),
            prop::collection::vec(inner, 1..5).prop_map(Stmt::Labelled),
        ]
    })
}

const FIELDS: [&str; 2] = ["t", "u"];

struct Render {
    text: String,
    sites: usize,
    branches: usize,
    /// The labels of the labelled blocks around, innermost last.
    blocks: Vec<usize>,
}

impl Render {
    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn site(&mut self) -> usize {
        self.sites += 1;
        self.sites
    }

    fn stmt(&mut self, s: &Stmt) {
        let t = &mut String::new();
        match s {
            Stmt::Save(a) => {
                let k = self.site();
                write!(t, "v{a} = remat!(save [{k}]: f(x));").unwrap();
            }
            Stmt::SaveTuple(a, b) => {
                let k = self.site();
                write!(t, "(v{a}, v{b}) = remat!(save [{k}]: f2(x));").unwrap();
            }
            Stmt::Recompute(a, b) => {
                let k = self.site();
                write!(t, "v{a} = remat!(recompute [{k}]: f(&v{b}));").unwrap();
            }
            Stmt::Copy(a, b) => write!(t, "v{a} = v{b}.shallow_clone();").unwrap(),
            Stmt::IndexCopy(a, b) => write!(t, "v{a} = v{b}.i(x);").unwrap(),
            Stmt::IndexView(a, b) => write!(t, "v{a} = v{b}.i((.., 0..1));").unwrap(),
            Stmt::Piece(a, b, k) => {
                write!(t, "v{a} = v{b}.chunk(2, 0)[{k}].shallow_clone();").unwrap()
            }
            Stmt::Plain(a) => write!(t, "v{a} = x.exp();").unwrap(),
            Stmt::Store(f, a) => write!(t, "h.{} = v{a}.shallow_clone();", FIELDS[*f]).unwrap(),
            Stmt::StoreRef(f, a, false) => write!(
                t,
                "{{ let r = &mut h; r.{} = v{a}.shallow_clone(); }}",
                FIELDS[*f]
            )
            .unwrap(),
            Stmt::StoreRef(f, a, true) => write!(
                t,
                "{{ let r = &mut h.{}; *r = v{a}.shallow_clone(); }}",
                FIELDS[*f]
            )
            .unwrap(),
            Stmt::Load(a, f) => write!(t, "v{a} = h.{}.shallow_clone();", FIELDS[*f]).unwrap(),
            Stmt::Needs(a) => write!(t, "remat! {{ needs v{a}; }}").unwrap(),
            Stmt::Read(a) => write!(t, "let _ = v{a}.exp();").unwrap(),
            Stmt::ReadField(f) => write!(t, "let _ = h.{}.exp();", FIELDS[*f]).unwrap(),
            Stmt::If(a, b) => {
                let id = self.branches;
                self.branches += 1;
                write!(self.text, "if c{id} {{ ").unwrap();
                self.stmts(a);
                self.text.push_str("} else { ");
                self.stmts(b);
                self.text.push_str("} ");
            }
            Stmt::Loop(body) => {
                let id = self.branches;
                self.branches += 1;
                write!(self.text, "for _ in 0..n{id} {{ ").unwrap();
                self.stmts(body);
                self.text.push_str("} ");
            }
            Stmt::Labelled(body) => {
                let id = self.branches;
                self.branches += 1;
                write!(self.text, "'b{id}: {{ ").unwrap();
                self.blocks.push(id);
                self.stmts(body);
                self.blocks.pop();
                self.text.push_str("} ");
            }
            Stmt::Phased(not, a, b) => {
                let not = if *not { "!" } else { "" };
                write!(self.text, "if {not}is_recomputing() {{ ").unwrap();
                self.stmts(a);
                self.text.push_str("} else { ");
                self.stmts(b);
                self.text.push_str("} ");
            }
            Stmt::CfgLet(a) => {
                let id = self.branches;
                self.branches += 1;
                write!(t, "#[cfg(feature = \"f{id}\")] let mut v{a} = x.exp();").unwrap();
            }
            Stmt::SaveVec => {
                let k = self.site();
                write!(t, "p = remat!(save [{k}]: fv(x));").unwrap();
            }
            Stmt::NeedsVec => t.push_str("remat! { needs p; }"),
            Stmt::NeedsElem(k) => write!(t, "remat! {{ needs p[{k}]; }}").unwrap(),
            Stmt::ReadElem(k) => write!(t, "let _ = p[{k}].exp();").unwrap(),
            Stmt::StoreElem(k, a) => write!(t, "p[{k}] = v{a}.shallow_clone();").unwrap(),
            Stmt::ForRead(false) => t.push_str("for t in &p { let _ = t.exp(); }"),
            Stmt::ForRead(true) => {
                t.push_str("for t in &p { remat! { needs t; } let _ = t.exp(); }")
            }
            Stmt::ForLoad(a) => write!(t, "for t in &p {{ v{a} = t.shallow_clone(); }}").unwrap(),
            Stmt::Leave => {
                if let Some(block) = self.blocks.last() {
                    let id = self.branches;
                    self.branches += 1;
                    write!(t, "if c{id} {{ break 'b{block}; }}").unwrap();
                }
            }
        }
        self.text.push_str(t);
        self.text.push(' ');
    }
}

pub(super) fn render(stmts: &[Stmt]) -> TokenStream {
    let body = TokenStream::from_str(&render_body(stmts)).expect("balanced");
    quote!(fn block(x: &Tensor) -> Tensor { #body })
}

/// The body's text, which `render` wraps in a function.
pub(super) fn render_body(stmts: &[Stmt]) -> String {
    let mut r = Render {
        text: String::new(),
        sites: 0,
        branches: 0,
        blocks: Vec::new(),
    };
    for i in 0..VARS {
        write!(r.text, "let mut v{i} = x.shallow_clone(); ").unwrap();
    }
    r.text
        .push_str("let mut h = H { t: x.shallow_clone(), u: x.shallow_clone() }; ");
    r.text
        .push_str("let mut p = vec![x.shallow_clone(), x.shallow_clone()]; ");
    r.stmts(stmts);
    r.text.push_str("x.shallow_clone()");
    r.text
}
