//! What kind of executor a Rust type, constructor or method gives: pool, pooled connection,
//! dedicated connection, transaction, or unknown (generic executors).

use super::drivers::{self, Shares};
use crate::config::RustConfig;
use crate::model::Executor;
use crate::source::Dialect;

/// Executor kind of a type as written (`&PgPool`, `Arc<Pool>`, `&mut Transaction<'_, Postgres>`,
/// `impl PgExecutor<'_>`). `None`: not a database handle.
pub fn of_type(ty: &syn::Type, cfg: &RustConfig) -> Option<Executor> {
    match ty {
        syn::Type::Reference(r) => of_type(&r.elem, cfg),
        syn::Type::Paren(p) => of_type(&p.elem, cfg),
        syn::Type::Group(g) => of_type(&g.elem, cfg),
        syn::Type::ImplTrait(t) => t
            .bounds
            .iter()
            .any(|b| matches!(b, syn::TypeParamBound::Trait(t) if is_executor_trait(&t.path)))
            .then_some(Executor::Unknown),
        syn::Type::TraitObject(t) => t
            .bounds
            .iter()
            .any(|b| matches!(b, syn::TypeParamBound::Trait(t) if is_executor_trait(&t.path)))
            .then_some(Executor::Unknown),
        syn::Type::Path(p) => of_path(&p.path, cfg),
        _ => None,
    }
}

/// The name of the type a value is of, through references and smart pointers (`&Repo`,
/// `Arc<Repo>`, `&mut crate::db::Repo`: `Repo`).
pub fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Reference(r) => type_name(&r.elem),
        syn::Type::Paren(p) => type_name(&p.elem),
        syn::Type::Group(g) => type_name(&g.elem),
        syn::Type::Path(p) => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            if matches!(name.as_str(), "Arc" | "Rc" | "Box") {
                if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                    return args.args.iter().find_map(|a| match a {
                        syn::GenericArgument::Type(t) => type_name(t),
                        _ => None,
                    });
                }
                return None;
            }
            Some(name)
        }
        _ => None,
    }
}

fn of_path(path: &syn::Path, cfg: &RustConfig) -> Option<Executor> {
    let last = path.segments.last()?;
    let name = last.ident.to_string();
    // Smart pointers and wrappers: look inside.
    if matches!(
        name.as_str(),
        "Arc"
            | "Rc"
            | "Box"
            | "Option"
            | "Mutex"
            | "RwLock"
            | "Lazy"
            | "LazyLock"
            | "LazyCell"
            | "OnceCell"
            | "OnceLock"
            | "OnceBox"
    ) {
        if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
            for arg in &args.args {
                if let syn::GenericArgument::Type(t) = arg {
                    return of_type(t, cfg);
                }
            }
        }
        return None;
    }
    let qualified: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    drivers::kind_of(&name, &qualified, cfg)
}

/// What a function declared to return `ty` gives when it succeeds: the `T` of `Result<T, E>`,
/// `Option<T>`, a project's `DbResult<T>` and `impl Future<Output = T>`; else `ty`.
pub fn returned(ty: &syn::Type) -> &syn::Type {
    fn first_type(args: &syn::PathArguments) -> Option<&syn::Type> {
        match args {
            syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            }),
            _ => None,
        }
    }
    match ty {
        syn::Type::Paren(p) => returned(&p.elem),
        syn::Type::Group(g) => returned(&g.elem),
        syn::Type::Path(p) => {
            let Some(last) = p.path.segments.last() else {
                return ty;
            };
            let name = last.ident.to_string();
            match first_type(&last.arguments) {
                Some(t) if name == "Option" || name.ends_with("Result") => returned(t),
                _ => ty,
            }
        }
        syn::Type::ImplTrait(t) => t
            .bounds
            .iter()
            .find_map(|b| match b {
                syn::TypeParamBound::Trait(t) => t.path.segments.last().and_then(|s| {
                    let syn::PathArguments::AngleBracketed(a) = &s.arguments else {
                        return None;
                    };
                    a.args.iter().find_map(|g| match g {
                        syn::GenericArgument::AssocType(a) if a.ident == "Output" => {
                            Some(returned(&a.ty))
                        }
                        _ => None,
                    })
                }),
                _ => None,
            })
            .unwrap_or(ty),
        _ => ty,
    }
}

/// A cell set once whose `get` hands out what it holds (`OnceCell<PgPool>`, `OnceLock<..>`):
/// `POOL.get()` is the pool, not a connection taken from it.
pub fn is_once_cell(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| {
        matches!(s.ident.to_string().as_str(), "OnceCell" | "OnceLock" | "OnceBox")
    }))
}

/// A connection type that the driver's transactions are too: sqlx's `&mut *tx` is a `&mut
/// PgConnection`, diesel hands `conn.transaction(|conn| ..)` its connection type. A function
/// given one cannot tell whether its caller opened a transaction on it. (A tokio-postgres
/// `Client` is not one: its transactions are a type of their own.) So is a borrowed pool object
/// around a diesel connection (`&mut deadpool::Object<AsyncPgConnection>`, r2d2's and bb8's
/// `&mut PooledConnection<ConnectionManager<PgConnection>>`): diesel has no transaction type,
/// and `conn.transaction(|conn| ..)` on a pooled object hands the closure that object. One
/// owned (returned by a getter, held in a field) was taken from the pool for its owner.
pub fn shares_transactions(ty: &syn::Type) -> bool {
    let Some(name) = type_name(ty) else {
        return false;
    };
    match drivers::shares(&name) {
        Shares::Always => true,
        Shares::Borrowed => {
            matches!(ty, syn::Type::Reference(_)) && type_args(ty).any(holds_sharing_connection)
        }
        Shares::No => false,
    }
}

/// The type arguments of a path type, behind references.
pub(super) fn type_args(mut ty: &syn::Type) -> impl Iterator<Item = &syn::Type> {
    while let syn::Type::Reference(r) = ty {
        ty = &r.elem;
    }
    let args = match ty {
        syn::Type::Path(p) => p.path.segments.last().and_then(|s| match &s.arguments {
            syn::PathArguments::AngleBracketed(a) => Some(a),
            _ => None,
        }),
        _ => None,
    };
    args.into_iter()
        .flat_map(|a| a.args.iter())
        .filter_map(|g| match g {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        })
}

/// A connection that always shares its transactions, or a pool's manager of one
/// (`ConnectionManager<PgConnection>`, `AsyncDieselConnectionManager<AsyncPgConnection>`).
fn holds_sharing_connection(ty: &syn::Type) -> bool {
    let Some(name) = type_name(ty) else {
        return false;
    };
    drivers::shares(&name) == Shares::Always
        || drivers::is_manager(&name) && type_args(ty).any(holds_sharing_connection)
}

/// The database a handle type talks to (`SqlitePool`, `Pool<Sqlite>`, `&mut Transaction<'_,
/// MySql>`, `rusqlite::Connection`, `impl Executor<'_, Database = Sqlite>`).
pub fn dialect_of_type(ty: &syn::Type) -> Option<Dialect> {
    match ty {
        syn::Type::Reference(r) => dialect_of_type(&r.elem),
        syn::Type::Paren(p) => dialect_of_type(&p.elem),
        syn::Type::Group(g) => dialect_of_type(&g.elem),
        syn::Type::ImplTrait(t) => t.bounds.iter().find_map(|b| match b {
            syn::TypeParamBound::Trait(t) => dialect_of_path(&t.path),
            _ => None,
        }),
        syn::Type::Path(p) => dialect_of_path(&p.path),
        _ => None,
    }
}

fn dialect_of_path(path: &syn::Path) -> Option<Dialect> {
    let last = path.segments.last()?;
    let qualified: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let mut args = Vec::new();
    if let syn::PathArguments::AngleBracketed(a) = &last.arguments {
        for arg in &a.args {
            match arg {
                syn::GenericArgument::Type(t) => {
                    if let Some(d) = dialect_of_type(t) {
                        return Some(d);
                    }
                    if let syn::Type::Path(p) = t
                        && let Some(s) = p.path.segments.last()
                    {
                        args.push(s.ident.to_string());
                    }
                }
                // `Executor<'c, Database = Sqlite>`
                syn::GenericArgument::AssocType(a) => {
                    if let syn::Type::Path(p) = &a.ty
                        && let Some(s) = p.path.segments.last()
                    {
                        args.push(s.ident.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    drivers::dialect_of(&last.ident.to_string(), &qualified, &args)
}

/// `Executor`, `PgExecutor`, `Acquire`, sea-orm's `ConnectionTrait`, tokio-postgres'
/// `GenericClient`, diesel's `Connection`: could be any kind.
pub fn is_executor_trait(path: &syn::Path) -> bool {
    path.segments
        .last()
        .is_some_and(|s| drivers::is_executor_trait(&s.ident.to_string()))
}

/// Executor kind guessed from a variable name, when nothing else tells (documented in
/// docs/rust.md): only names that are near-certain.
pub fn of_variable_name(name: &str) -> Option<Executor> {
    let n = name.trim_start_matches('_').to_ascii_lowercase();
    if n == "pool" || n.ends_with("_pool") || n.starts_with("pool_") {
        Some(Executor::Pool)
    } else if matches!(n.as_str(), "tx" | "txn" | "transaction") {
        Some(Executor::Transaction)
    } else {
        None
    }
}

/// The row type a query builds its rows as: `query_as!(Task, ..)`, `query_as::<_, Task>(..)`,
/// at the root of a chain (`.fetch_all(..).await?`).
pub(super) fn row_type(e: &syn::Expr) -> Option<String> {
    match e {
        syn::Expr::MethodCall(m) => row_type(&m.receiver),
        syn::Expr::Await(a) => row_type(&a.base),
        syn::Expr::Try(t) => row_type(&t.expr),
        syn::Expr::Paren(p) => row_type(&p.expr),
        syn::Expr::Macro(m) if m.mac.path.segments.last()?.ident == "query_as" => {
            let first = m.mac.tokens.clone().into_iter().next()?;
            match first {
                proc_macro2::TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            }
        }
        syn::Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                return None;
            };
            let last = p.path.segments.last()?;
            if last.ident != "query_as" {
                return None;
            }
            let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            match args.args.iter().nth(1)? {
                syn::GenericArgument::Type(t) => type_name(t).filter(|n| n != "_"),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The collection a loop walks, through `&`, `.iter()`, `.into_iter()`.
pub(super) fn collection(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Reference(r) => collection(&r.expr),
        syn::Expr::MethodCall(m) if m.method == "iter" || m.method == "into_iter" => {
            collection(&m.receiver)
        }
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(ty: &str) -> Option<Executor> {
        of_type(&syn::parse_str(ty).unwrap(), &RustConfig::default())
    }

    #[test]
    fn returned_types_look_through_results_options_and_futures() {
        let ret = |t: &str| {
            let ty: syn::Type = syn::parse_str(t).unwrap();
            kind(&quote::ToTokens::to_token_stream(returned(&ty)).to_string())
        };
        assert_eq!(ret("Result<PgPool, Error>"), Some(Executor::Pool));
        assert_eq!(
            ret("DbResult<&mut PgConnection>"),
            Some(Executor::Connection)
        );
        assert_eq!(
            ret("impl Future<Output = anyhow::Result<Option<PgPool>>>"),
            Some(Executor::Pool)
        );
        assert_eq!(ret("Vec<PgPool>"), None);
    }

    #[test]
    fn types() {
        assert_eq!(kind("&PgPool"), Some(Executor::Pool));
        assert_eq!(kind("Arc<sqlx::Pool<Postgres>>"), Some(Executor::Pool));
        assert_eq!(
            kind("&mut Transaction<'_, Postgres>"),
            Some(Executor::Transaction)
        );
        assert_eq!(kind("&mut PgConnection"), Some(Executor::Connection));
        assert_eq!(
            kind("PoolConnection<Postgres>"),
            Some(Executor::PooledConnection)
        );
        assert_eq!(
            kind("deadpool_postgres::Client"),
            Some(Executor::PooledConnection)
        );
        assert_eq!(kind("&tokio_postgres::Client"), Some(Executor::Connection));
        assert_eq!(kind("impl PgExecutor<'_>"), Some(Executor::Unknown));
        assert_eq!(
            kind("&mut sqlx::PgTransaction<'_>"),
            Some(Executor::Transaction)
        );
        assert_eq!(kind("&str"), None);
        let cfg = RustConfig {
            pool_types: vec!["Db".into()],
            ..RustConfig::default()
        };
        assert_eq!(
            of_type(&syn::parse_str("&Db").unwrap(), &cfg),
            Some(Executor::Pool)
        );
    }

    #[test]
    fn row_types_of_queries() {
        let ty = |src: &str| row_type(&syn::parse_str::<syn::Expr>(src).unwrap());
        assert_eq!(
            ty("sqlx::query_as!(Task, \"SELECT 1\").fetch_all(&mut *tx).await?").as_deref(),
            Some("Task")
        );
        assert_eq!(
            ty("sqlx::query_as::<_, Task>(\"SELECT 1\").fetch_one(pool).await").as_deref(),
            Some("Task")
        );
        assert_eq!(
            ty("sqlx::query_as(\"SELECT 1\").fetch_all(pool).await?"),
            None
        );
        assert_eq!(ty("sqlx::query(\"SELECT 1\").fetch_all(pool).await?"), None);
        let e = syn::parse_str::<syn::Expr>("tasks.iter()").unwrap();
        assert!(matches!(collection(&e), syn::Expr::Path(p) if p.path.is_ident("tasks")));
    }

    #[test]
    fn diesel_pooled_connections_may_hold_their_callers_transaction() {
        let shares = |t: &str| shares_transactions(&syn::parse_str(t).unwrap());
        assert!(shares("&mut PgConnection"));
        assert!(shares("&mut Object<AsyncPgConnection>"));
        assert!(shares(
            "&mut deadpool::managed::Object<AsyncDieselConnectionManager<AsyncPgConnection>>"
        ));
        assert!(shares(
            "&mut PooledConnection<ConnectionManager<PgConnection>>"
        ));
        assert!(shares(
            "&mut PooledConnection<'_, AsyncDieselConnectionManager<AsyncPgConnection>>"
        ));
        // sqlx's pooled connection and tokio-postgres's pools hand out no transaction.
        assert!(!shares("&mut PoolConnection<Postgres>"));
        assert!(!shares(
            "&mut PooledConnection<'_, PostgresConnectionManager<NoTls>>"
        ));
        assert!(!shares("&mut Object<Manager>"));
        assert!(!shares("&Client"));
        // Owned, it was taken from the pool for its owner.
        assert!(!shares("Object<AsyncPgConnection>"));
    }
}
