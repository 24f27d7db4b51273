//! What a parameter of a generic type is known by: the bounds of its generic parameter
//! (`E: PgExecutor<'_>`, `C: AsMut<PgConnection>`, `R: Accounts`), `impl Trait`, `dyn Trait`.

use super::Executor;
use super::types::is_executor_trait;

/// `E: PgExecutor<'_>` and `where E: Executor`: a parameter of a generic executor type.
pub fn generic_executor(sig: &syn::Signature, ty: &syn::Type) -> Option<Executor> {
    generic_bounds(sig, ty)
        .iter()
        .any(|b| matches!(b, syn::TypeParamBound::Trait(t) if is_executor_trait(&t.path)))
        .then_some(Executor::Unknown)
}

/// A driver's associated handle type of a generic database (see
/// [`drivers::associated`](super::drivers::associated)): `<DB as Database>::Connection`, or
/// `DB::Connection` with `DB: Database` among the function's bounds or those of its `impl` or
/// trait (`outer`).
pub fn associated_handle(
    sig: &syn::Signature,
    outer: Option<&syn::Generics>,
    ty: &syn::Type,
) -> Option<Executor> {
    let syn::Type::Path(p) = peel_references(ty) else {
        return None;
    };
    let segments: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
    let (last, before) = segments.split_last()?;
    let name = last.ident.to_string();
    let traits: Vec<String> = match (&p.qself, before) {
        (Some(q), _) if q.position > 0 => vec![segments[q.position - 1].ident.to_string()],
        (None, [param]) => {
            let generics = std::iter::once(&sig.generics).chain(outer);
            trait_names(generics.flat_map(|g| bounds_in(g, &param.ident)))
        }
        _ => return None,
    };
    traits
        .iter()
        .find_map(|t| super::drivers::associated(t, &name))
}

fn peel_references(ty: &syn::Type) -> &syn::Type {
    match ty {
        syn::Type::Reference(r) => peel_references(&r.elem),
        syn::Type::Paren(p) => peel_references(&p.elem),
        t => t,
    }
}

/// The traits a parameter's type is known only by: the bounds of the generic parameter it
/// names (`&R` with `R: Accounts`), `impl Accounts`, `&dyn Accounts`, `Arc<dyn Accounts>`.
pub fn bound_traits(sig: &syn::Signature, ty: &syn::Type) -> Vec<String> {
    let inner = match ty {
        syn::Type::Reference(r) => &*r.elem,
        t => t,
    };
    let bounds: Vec<&syn::TypeParamBound> = match inner {
        syn::Type::ImplTrait(t) => t.bounds.iter().collect(),
        syn::Type::TraitObject(t) => t.bounds.iter().collect(),
        syn::Type::Path(p) if p.path.get_ident().is_none() => {
            // `Arc<dyn Accounts>`, `Box<dyn Accounts>`.
            let last = p.path.segments.last();
            let arg = last.and_then(|s| match &s.arguments {
                syn::PathArguments::AngleBracketed(a) => a.args.first(),
                _ => None,
            });
            return match arg {
                Some(syn::GenericArgument::Type(t))
                    if matches!(t, syn::Type::TraitObject(_))
                        && last.is_some_and(|s| {
                            matches!(s.ident.to_string().as_str(), "Arc" | "Box" | "Rc")
                        }) =>
                {
                    bound_traits(sig, t)
                }
                _ => Vec::new(),
            };
        }
        _ => generic_bounds(sig, ty),
    };
    trait_names(bounds)
}

/// A parameter of this type is text a caller gives: `&str`, `String`, `Cow<str>`, or a type
/// known only by a bound that text meets (`impl AsRef<str>`, `T: ToStatement`, `Into<String>`).
pub fn is_text(sig: &syn::Signature, ty: &syn::Type) -> bool {
    let named = matches!(
        super::types::type_name(ty).as_deref(),
        Some("str" | "String" | "Cow")
    );
    named
        || bound_traits(sig, ty)
            .iter()
            .any(|t| matches!(t.as_str(), "AsRef" | "Into" | "ToStatement" | "Borrow"))
}

/// The names of the traits among `bounds` (`Views` of `Views + Send + 'static`, `Send` too).
fn trait_names<'s>(bounds: impl IntoIterator<Item = &'s syn::TypeParamBound>) -> Vec<String> {
    bounds
        .into_iter()
        .filter_map(|b| match b {
            syn::TypeParamBound::Trait(t) => t.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        })
        .collect()
}

/// The bounds of the generic parameter a type (or a reference to it) names, in the
/// parameter list and the `where` clause; none when it names no generic parameter.
fn generic_bounds<'s>(sig: &'s syn::Signature, ty: &syn::Type) -> Vec<&'s syn::TypeParamBound> {
    let ty = match ty {
        syn::Type::Reference(r) => &*r.elem,
        t => t,
    };
    let Some(name) = (match ty {
        syn::Type::Path(p) => p.path.get_ident(),
        _ => None,
    }) else {
        return Vec::new();
    };
    bounds_in(&sig.generics, name)
}

/// The bounds `generics` gives the parameter `name`, in the list and the `where` clause.
fn bounds_in<'s>(generics: &'s syn::Generics, name: &syn::Ident) -> Vec<&'s syn::TypeParamBound> {
    let in_params = generics.params.iter().filter_map(|g| match g {
        syn::GenericParam::Type(t) if t.ident == *name => Some(&t.bounds),
        _ => None,
    });
    let in_where = generics
        .where_clause
        .iter()
        .flat_map(|w| &w.predicates)
        .filter_map(|p| match p {
            syn::WherePredicate::Type(t)
                if matches!(&t.bounded_ty, syn::Type::Path(b) if b.path.get_ident() == Some(name)) =>
            {
                Some(&t.bounds)
            }
            _ => None,
        });
    in_params.chain(in_where).flatten().collect()
}

/// The traits bounding the generic parameter a field's type names (`views: R`, `Arc<R>`,
/// `Box<R>`, `std::sync::Arc<R>`), in any of `generics` (the struct's, the `impl` block's).
pub fn field_traits<'g>(
    ty: &syn::Type,
    generics: impl IntoIterator<Item = &'g syn::Generics>,
) -> Vec<String> {
    let mut ty = ty;
    loop {
        match ty {
            syn::Type::Reference(r) => ty = &r.elem,
            // `Arc<R>`, `std::sync::Arc<R>`: what it points to.
            syn::Type::Path(p) => {
                let Some(last) = p.path.segments.last() else {
                    return Vec::new();
                };
                let inner = match &last.arguments {
                    syn::PathArguments::AngleBracketed(a)
                        if matches!(last.ident.to_string().as_str(), "Arc" | "Box" | "Rc") =>
                    {
                        a.args.first()
                    }
                    _ => break,
                };
                match inner {
                    Some(syn::GenericArgument::Type(t)) => ty = t,
                    _ => return Vec::new(),
                }
            }
            _ => return Vec::new(),
        }
    }
    let syn::Type::Path(p) = ty else {
        return Vec::new();
    };
    let Some(name) = p.path.get_ident() else {
        return Vec::new();
    };
    trait_names(generics.into_iter().flat_map(|g| bounds_in(g, name)))
}

/// The type a generic parameter gives access to by its bounds: `C` in `fn f<C:
/// AsMut<PgConnection>>(conn: C)` (also `BorrowMut<..>`, `DerefMut<Target = ..>`, in the
/// parameter list or a `where` clause) stands for a `PgConnection`.
pub fn generic_target<'s>(sig: &'s syn::Signature, ty: &syn::Type) -> Option<&'s syn::Type> {
    generic_bounds(sig, ty).into_iter().find_map(|b| {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let last = t.path.segments.last()?;
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            return None;
        };
        args.args
            .iter()
            .find_map(|a| match (last.ident.to_string().as_str(), a) {
                ("AsMut" | "BorrowMut" | "AsRef" | "Borrow", syn::GenericArgument::Type(t)) => {
                    Some(t)
                }
                ("DerefMut" | "Deref", syn::GenericArgument::AssocType(a))
                    if a.ident == "Target" =>
                {
                    Some(&a.ty)
                }
                _ => None,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signature of the function `f` and the type of its first parameter.
    fn first_param(f: &str) -> (syn::Signature, syn::Type) {
        let f: syn::ItemFn = syn::parse_str(f).expect("test fn parses");
        let Some(syn::FnArg::Typed(arg)) = f.sig.inputs.first() else {
            panic!("no typed argument");
        };
        let ty = (*arg.ty).clone();
        (f.sig, ty)
    }

    #[test]
    fn a_generic_parameter_stands_for_what_its_bounds_give() {
        let target = |f: &str| {
            let (sig, ty) = first_param(f);
            generic_target(&sig, &ty).map(|t| quote::ToTokens::to_token_stream(t).to_string())
        };
        assert_eq!(
            target("fn f<C: AsMut<PgConnection>>(c: C) {}").as_deref(),
            Some("PgConnection")
        );
        assert_eq!(
            target("fn f<C>(c: &mut C) where C: DerefMut<Target = PgConnection> + Send {}")
                .as_deref(),
            Some("PgConnection")
        );
        assert_eq!(target("fn f<C: Clone>(c: C) {}"), None);
        assert_eq!(target("fn f(c: PgConnection) {}"), None);
    }

    #[test]
    fn a_generic_databases_connection_is_a_connection() {
        let kind = |f: &str| {
            let (sig, ty) = first_param(f);
            associated_handle(&sig, None, &ty)
        };
        let conn = Some(Executor::Connection);
        assert_eq!(kind("fn f(c: &mut <DB as Database>::Connection) {}"), conn);
        assert_eq!(
            kind("fn f(c: &mut <DB as sqlx::Database>::Connection) {}"),
            conn
        );
        assert_eq!(kind("fn f<DB: Database>(c: &mut DB::Connection) {}"), conn);
        assert_eq!(
            kind("fn f<DB>(c: &mut DB::Connection) where DB: Database {}"),
            conn
        );
        assert_eq!(kind("fn f<DB: Clone>(c: &mut DB::Connection) {}"), None);
        assert_eq!(
            kind("fn f(c: &mut <M as ManageConnection>::Connection) {}"),
            None
        );
        assert_eq!(kind("fn f(c: &mut <DB as Database>::Row) {}"), None);
        assert_eq!(kind("fn f(c: &mut Connection) {}"), None);
        // Bounded by the trait a default method is written in.
        let tr: syn::ItemTrait =
            syn::parse_str("trait Migrate<DB: Database> {}").expect("test trait parses");
        let (sig, ty) = first_param("fn f(c: &mut DB::Connection) {}");
        assert_eq!(associated_handle(&sig, Some(&tr.generics), &ty), conn);
        assert_eq!(associated_handle(&sig, None, &ty), None);
    }

    #[test]
    fn a_parameter_is_text_by_its_type_or_the_bounds_text_meets() {
        let text = |f: &str| {
            let (sig, ty) = first_param(f);
            is_text(&sig, &ty)
        };
        assert!(text("fn f(sql: &str) {}"));
        assert!(text("fn f(sql: String) {}"));
        assert!(text("fn f(sql: &std::borrow::Cow<'_, str>) {}"));
        assert!(text("fn f(sql: impl AsRef<str>) {}"));
        assert!(text("fn f<T: ?Sized + ToStatement>(query: &T) {}"));
        assert!(text("fn f<S>(sql: S) where S: Into<String> {}"));
        assert!(!text("fn f(id: i64) {}"));
        assert!(!text("fn f(pool: &PgPool) {}"));
        assert!(!text("fn f<E: PgExecutor<'static>>(e: E) {}"));
        assert!(!text("fn f(rows: &[String]) {}"));
    }

    #[test]
    fn a_field_of_a_generic_type_is_known_by_the_bounds_of_struct_and_impl() {
        let item: syn::ItemStruct =
            syn::parse_str("struct Q<R, S: Clone> where R: Views + Send { a: Arc<R>, b: S, c: &'static R, d: Vec<R>, e: std::sync::Arc<R>, f: other::R }")
                .expect("test struct parses");
        let imp: syn::ItemImpl =
            syn::parse_str("impl<S: Store, R> Q<R, S> {}").expect("test impl parses");
        let field = |n: usize| {
            let ty = &item.fields.iter().nth(n).expect("field").ty;
            field_traits(ty, [&item.generics, &imp.generics])
        };
        assert_eq!(field(0), ["Views", "Send"]);
        assert_eq!(field(1), ["Clone", "Store"]);
        assert_eq!(field(2), ["Views", "Send"]);
        assert!(field(3).is_empty(), "a collection of them is not one");
        assert_eq!(field(4), ["Views", "Send"], "a pointer named by its path");
        assert!(
            field(5).is_empty(),
            "another crate's `R` is not the parameter"
        );
    }

    #[test]
    fn a_value_known_by_a_trait_is_known_by_its_name() {
        let traits = |f: &str| {
            let (sig, ty) = first_param(f);
            bound_traits(&sig, &ty)
        };
        assert_eq!(
            traits("fn f<R: Accounts + Send>(r: &R) {}"),
            ["Accounts", "Send"]
        );
        assert_eq!(
            traits("fn f<R>(r: R) where R: db::Accounts {}"),
            ["Accounts"]
        );
        assert_eq!(traits("fn f(r: impl Accounts) {}"), ["Accounts"]);
        assert_eq!(traits("fn f(r: &dyn Accounts) {}"), ["Accounts"]);
        assert_eq!(traits("fn f(r: Arc<dyn Accounts>) {}"), ["Accounts"]);
        assert!(traits("fn f(r: Vec<Accounts>) {}").is_empty());
        assert!(traits("fn f(r: &PgAccounts) {}").is_empty());
    }
}
