//! Whether the expansion can write a parameter's or the return's type.
//! The expansion names types to make each capture one use of `Capture`
//! (`fn(&T) -> T`) and to give the closure the function's return type, but
//! some written types cannot be named there: those are then left to
//! inference.

use syn::Type;

/// `impl Trait` anywhere in the type, which cannot be named in generated
/// code.
pub(crate) fn has_impl_trait(ty: &Type) -> bool {
    struct Finder(bool);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_type_impl_trait(&mut self, _: &'ast syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut finder = Finder(false);
    syn::visit::Visit::visit_type(&mut finder, ty);
    finder.0
}

/// Whether `ty` names a lifetime or a reference: a function pointer type
/// `fn(&T) -> T` built from it would then have several input lifetimes and
/// fail elision (E0106) before the `Capture` error the user needs.
pub(crate) fn has_lifetime(ty: &Type) -> bool {
    struct Finder(bool);
    impl<'ast> syn::visit::Visit<'ast> for Finder {
        fn visit_lifetime(&mut self, _: &'ast syn::Lifetime) {
            self.0 = true;
        }
        fn visit_type_reference(&mut self, _: &'ast syn::TypeReference) {
            self.0 = true;
        }
    }
    let mut finder = Finder(false);
    syn::visit::Visit::visit_type(&mut finder, ty);
    finder.0
}
