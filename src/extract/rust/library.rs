//! Library calls that send SQL of their own, modelled as the statements they send. sqlx's
//! `Migrate` trait: `conn.lock().await` runs `SELECT pg_advisory_lock($1)` on PostgreSQL and
//! `conn.unlock().await` `SELECT pg_advisory_unlock($1)`, both on one key derived from the
//! database's name (`sqlx-postgres/src/migrate.rs`): a session lock, which a `ROLLBACK` does
//! not release.

use syn::visit::Visit;

use super::*;

/// What the model shows for the key sqlx derives from the database's name: one key for every
/// migrator of the database.
const MIGRATE_KEY: &str = "hashtext(current_database())";

impl Walker<'_, '_> {
    /// `conn.lock().await?` / `conn.unlock().await?` with no arguments on a handle, in a file
    /// that imports sqlx's `Migrate` (the trait must be in scope for its methods to be
    /// called): the statement it sends. `None` for anything else: a mutex around a handle
    /// (`conn.lock().await`), whose guard is no `Result` to pass on with `?`.
    pub(super) fn migrate_lock(
        &mut self,
        name: &str,
        receiver: &Value,
        m: &syn::ExprMethodCall,
    ) -> Option<Value> {
        let function = match name {
            "lock" => "pg_advisory_lock",
            "unlock" => "pg_advisory_unlock",
            _ => return None,
        };
        let Value::Handle(h) = receiver else {
            return None;
        };
        let at = self.method_site(m);
        if !m.args.is_empty()
            || self.tried.last() != Some(&at)
            || h.dialect.is_some_and(|d| d != Dialect::Postgres)
            || !imports_migrate(&self.parsed().ast)
        {
            return None;
        }
        let text = format!("SELECT {function}({MIGRATE_KEY})");
        self.front.out.generated.push((at, text.clone()));
        // Every byte of the text is the call, `lock()`: a span inside it is the call's.
        let mut map = OffsetMap::shifted(at.start());
        for i in 1..text.len() {
            map.push(i, at.start());
        }
        map.push(text.len(), at.end());
        let sql = Sql {
            prepared: true,
            ..Sql::new(at.file, text, map)
        };
        let via = self.source_of(&m.receiver);
        Some(self.emit(&sql, *h, via, at))
    }
}

/// The file has `use sqlx::migrate::Migrate` (renamed, in a group, or `migrate::*`), at any
/// depth.
fn imports_migrate(ast: &syn::File) -> bool {
    struct Uses(bool);
    impl Visit<'_> for Uses {
        fn visit_item_use(&mut self, u: &syn::ItemUse) {
            self.0 |= names_migrate(&u.tree, false);
        }
    }
    fn names_migrate(tree: &syn::UseTree, in_migrate: bool) -> bool {
        match tree {
            syn::UseTree::Path(p) => names_migrate(&p.tree, p.ident == "migrate"),
            syn::UseTree::Group(g) => g.items.iter().any(|t| names_migrate(t, in_migrate)),
            syn::UseTree::Name(n) => in_migrate && n.ident == "Migrate",
            syn::UseTree::Rename(r) => in_migrate && r.ident == "Migrate",
            syn::UseTree::Glob(_) => in_migrate,
        }
    }
    let mut uses = Uses(false);
    uses.visit_file(ast);
    uses.0
}
