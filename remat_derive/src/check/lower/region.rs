//! Lowering regions: a region's name, policy and arguments are bare code
//! run before it; a `save` region (or one whose policy is chosen at run
//! time) defines a new instance of its site's value; a region that may
//! recompute reads its callee, which replay runs again.

use std::rc::Rc;

use proc_macro2::Span;
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::{Expr, Pat, Token};

use super::Lower;
use crate::ast::{self, compact, Call, Name, PolicyKind, Region};
use crate::check::ir::{Node, Operand, ReadKind, Site};
use crate::check::place::place_text;
use crate::check::scope::Kind;
use crate::preparsed::Parsed;

impl Lower {
    /// Lowers one region: its name, policy and arguments (bare code, where
    /// a save output passed directly is fine), its callee where it may run
    /// on replay; returns its output.
    pub(super) fn region(&mut self, region: &Region) -> Operand {
        match &region.name {
            Name::Static { value, span } => self.note_name(value, *span),
            Name::Dynamic(expr) => self.read_expr(expr),
        }
        if let Some(expr) = &region.policy_expr {
            self.read_expr(expr);
        }
        for arg in region.call.args() {
            self.pass_arg(arg);
        }
        let name = region.name.display();
        if region.policy.kind != PolicyKind::Save {
            let callee = match &region.call {
                Call::Fn(call) => &*call.func,
                Call::Method(call) => &*call.receiver,
            };
            let op = self.value(callee);
            if !matches!(op, Operand::Other | Operand::Nothing) {
                let kind = ReadKind::Callee {
                    keyword: region.policy.keyword().to_owned(),
                    region: name.clone(),
                };
                self.read(op, callee.to_token_stream(), place_text(callee), kind);
            }
        }
        if region.policy.kind == PolicyKind::Recompute {
            return Operand::Other;
        }
        let dynamic = region
            .policy_expr
            .as_ref()
            .map(|e| compact(&e.to_token_stream()));
        self.sites.push(Site {
            region: name,
            dynamic,
            auto: region.policy.kind == PolicyKind::Auto,
            names: Vec::new(),
        });
        let site = self.sites.len() - 1;
        for sites in &mut self.collect {
            sites.push(site);
        }
        self.emit(Node::Def(site));
        Operand::Fresh(site)
    }

    /// A region argument: passing a save output (or a view, a slice, an
    /// array, `vec!` or `Some` of them) is not a read.
    fn pass_arg(&mut self, arg: &Expr) {
        match arg {
            Expr::Reference(e) => self.pass_arg(&e.expr),
            Expr::Paren(e) => self.pass_arg(&e.expr),
            Expr::Group(e) => self.pass_arg(&e.expr),
            Expr::Array(a) => a.elems.iter().for_each(|e| self.pass_arg(e)),
            Expr::Tuple(a) => a.elems.iter().for_each(|e| self.pass_arg(e)),
            Expr::Call(call)
                if call.args.len() == 1
                    && matches!(&*call.func, Expr::Path(p) if p.path.is_ident("Some")) =>
            {
                self.pass_arg(&call.args[0]);
            }
            Expr::Macro(m) if m.mac.path.is_ident("vec") => {
                match m
                    .mac
                    .parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated)
                {
                    Ok(elems) => elems.iter().for_each(|e| self.pass_arg(e)),
                    Err(_) => self.read_expr(arg),
                }
            }
            _ => {
                self.value(arg);
            }
        }
    }

    /// Binds `let PAT = region`: a `recompute` output is known as one, for
    /// `needs`; a fresh output's parts are named after the pattern.
    pub(super) fn bind_region_output(&mut self, pat: &Pat, region: &Region, op: Operand) {
        let kind = match region.policy.kind {
            PolicyKind::Recompute => Kind::Recomputed(region.name.display()),
            _ => Kind::Plain,
        };
        if let Operand::Fresh(site) = op {
            self.record_names(site, pat, Vec::new());
        }
        self.bind_pat(pat, op, &kind);
    }

    fn note_name(&mut self, value: &str, span: Span) {
        // In a loop (closures are lowered as loops) a region runs once per
        // iteration under its one name, by design.
        if self.loops > 0 {
            return;
        }
        if let Some(error) = self.region_names.note(value, span, self.mode) {
            self.error(error);
        }
    }

    /// A `remat!` expression, parsed (`Some` for either form; the caller
    /// wants the expression form).
    pub(super) fn remat_expr(&self, expr: &Expr) -> Option<Rc<Parsed>> {
        let Expr::Macro(mac) = expr else { return None };
        ast::is_remat(&mac.mac).then(|| self.preparsed.get(&mac.mac))
    }
}
