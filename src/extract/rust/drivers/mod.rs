//! What the drivers' APIs mean, as data: one table per driver (sqlx, tokio-postgres and
//! postgres, the pools, diesel, sea-orm, the SQLite, MySQL and SQL Server clients), read
//! through the lookups below.
//!
//! A table says which of the driver's types are pools, pooled connections, connections and
//! transactions, and which database they talk to; which traits any of its handles implement;
//! which of its methods and functions send SQL, start a statement from SQL, run one, open or
//! end a transaction, take a connection from a pool, or connect; which macros hold SQL. A new
//! driver is a new table in [`ALL`]; a project's own wrapper types are rows of the
//! configuration (`rust.pool_types`, `rust.connection_types`, `rust.transaction_types`),
//! looked up before the tables.
//!
//! Methods are asked by name, not resolved to the driver's trait: a name one driver gives a
//! role has it on every database handle (the front-end asks about a method only where its
//! receiver or argument is one, or its SQL reads as SQL).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::config::RustConfig;
use crate::model::Executor;
use crate::source::Dialect;

mod clients;
mod diesel;
mod pools;
mod sea_orm;
mod sqlx;
mod tokio_postgres;

/// Every driver txlint knows.
const ALL: &[&Driver] = &[
    &sqlx::SQLX,
    &tokio_postgres::TOKIO_POSTGRES,
    &pools::DEADPOOL,
    &pools::BB8,
    &pools::R2D2,
    &pools::ROCKET,
    &diesel::DIESEL,
    &sea_orm::SEA_ORM,
    &clients::RUSQLITE,
    &clients::LIBSQL,
    &clients::MYSQL,
    &clients::TIBERIUS,
];

/// One driver's API.
pub(super) struct Driver {
    /// The crates its paths start with, and the database each talks to when it is one
    /// (`tokio_postgres::Client`: PostgreSQL).
    pub crates: &'static [(&'static str, Option<Dialect>)],
    /// Its database handle types.
    pub types: &'static [Type],
    /// Type names that name only a database (`Postgres` in `Pool<Postgres>`).
    pub databases: &'static [(&'static str, Dialect)],
    /// Types that make connections for a pool (`ConnectionManager<PgConnection>`): a pooled
    /// connection of one is that connection.
    pub managers: &'static [&'static str],
    /// Traits every kind of its handles implements (`Executor`, `GenericClient`): a value known
    /// only by one of them could be any kind.
    pub traits: &'static [&'static str],
    /// Its methods and functions, by what they do.
    pub methods: Methods,
    /// Its macros that hold SQL: name, index of the SQL argument, whether that names a file.
    pub macros: &'static [(&'static str, usize, bool)],
    /// Attributes that make a struct of the project a pool of the handle it holds, the struct
    /// (its request guard) one connection taken from it (Rocket's `#[database("..")]`).
    pub pool_attributes: &'static [&'static str],
    /// Associated types of its traits that are handles, for code generic over the database
    /// (sqlx's `<DB as Database>::Connection`): the trait, the type, its kind. Such a handle
    /// shares its caller's transactions (`&mut *tx` gives one).
    pub associated: &'static [(&'static str, &'static str, Executor)],
}

impl Driver {
    /// A driver with nothing in it, to fill in.
    pub const NONE: Driver = Driver {
        crates: &[],
        types: &[],
        databases: &[],
        managers: &[],
        traits: &[],
        methods: Methods::NONE,
        macros: &[],
        pool_attributes: &[],
        associated: &[],
    };
}

/// A database handle type.
pub(super) struct Type {
    pub name: &'static str,
    pub kind: Executor,
    /// The crates a path must start with to name it (`Client` of `deadpool_postgres` is pooled);
    /// empty: any path ending in the name.
    pub from: &'static [&'static str],
    /// The database it talks to, when the name tells.
    pub dialect: Option<Dialect>,
    pub shares: Shares,
}

impl Type {
    /// `name` is a `kind`, from any crate, telling no database, sharing no transaction.
    pub const fn of(name: &'static str, kind: Executor) -> Type {
        Type {
            name,
            kind,
            from: &[],
            dialect: None,
            shares: Shares::No,
        }
    }

    /// ... talking to `dialect`.
    pub const fn on(self, dialect: Dialect) -> Type {
        Type {
            dialect: Some(dialect),
            ..self
        }
    }

    /// ... named only through `crates`.
    pub const fn from(self, crates: &'static [&'static str]) -> Type {
        Type {
            from: crates,
            ..self
        }
    }

    /// ... sharing its transactions as `shares` says.
    pub const fn sharing(self, shares: Shares) -> Type {
        Type { shares, ..self }
    }
}

/// Whether a value of the type may be running its caller's transaction, so that a function
/// given one cannot tell whether one is open.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shares {
    No,
    /// Always: the driver's transactions are this type too (sqlx's `&mut *tx` is a `&mut
    /// PgConnection`; diesel's `conn.transaction(|conn| ..)` hands the closure its connection).
    Always,
    /// Borrowed, when it holds one that always does (`&mut PooledConnection<ConnectionManager<
    /// PgConnection>>`): diesel has no transaction type, and a transaction on a pooled object
    /// hands the closure that object. Owned, it was taken from the pool for its owner.
    Borrowed,
}

/// A driver's methods and functions, by what they do.
pub(super) struct Methods {
    /// Send the SQL given as their first argument on their receiver (`client.query(..)`).
    pub sends: &'static [&'static str],
    /// Of those, the ones that send a whole script as one simple-query message.
    pub scripts: &'static [&'static str],
    /// Of those, the ones that send a bare string given alone (not a prepared statement) with
    /// the simple-query protocol (sqlx's `Execute for &str` has no arguments).
    pub simple_when_bare: &'static [&'static str],
    /// Run the statement they are called on, on the executor given as their argument.
    pub runs: &'static [&'static str],
    /// Fail when the statement returns no row.
    pub one: &'static [&'static str],
    /// Give the row the statement returns, or none, as an `Option`.
    pub one_or_none: &'static [&'static str],
    /// Functions that start a statement from the SQL given as their first argument.
    pub starts: &'static [&'static str],
    /// Prepare the SQL given as their first argument, to be run later.
    pub prepares: &'static [&'static str],
    /// Open a transaction on their receiver and give it.
    pub begins: &'static [&'static str],
    /// Run the closure given as an argument in a transaction they open on their receiver.
    pub begins_around: &'static [&'static str],
    /// Run the closure given as an argument on their receiver's connection, as it is (no
    /// transaction of their own): deadpool's `obj.interact(|conn| ..)`.
    pub lends: &'static [&'static str],
    /// End the transaction they are called on.
    pub ends: &'static [&'static str],
    /// Open a transaction on the connection given as their first argument (diesel's
    /// `TransactionManager::begin_transaction(conn)`).
    pub begins_on_argument: &'static [&'static str],
    /// End the transaction open on the connection given as their first argument.
    pub ends_on_argument: &'static [&'static str],
    /// Take a connection from the pool they are called on.
    pub acquires: &'static [&'static str],
    /// Associated functions that make a pool or a connection of their type.
    pub connects: &'static [&'static str],
}

impl Methods {
    pub const NONE: Methods = Methods {
        sends: &[],
        scripts: &[],
        simple_when_bare: &[],
        runs: &[],
        one: &[],
        one_or_none: &[],
        starts: &[],
        prepares: &[],
        begins: &[],
        begins_around: &[],
        lends: &[],
        ends: &[],
        begins_on_argument: &[],
        ends_on_argument: &[],
        acquires: &[],
        connects: &[],
    };
}

/// What a method or function does, asked of [`is`].
#[derive(Clone, Copy)]
pub(super) enum Role {
    Sends,
    Script,
    SimpleWhenBare,
    Runs,
    One,
    OneOrNone,
    Starts,
    Prepares,
    Begins,
    BeginsAround,
    Lends,
    Ends,
    BeginsOnArgument,
    EndsOnArgument,
    Acquires,
    Connects,
}

impl Role {
    const EVERY: [Role; 16] = [
        Role::Sends,
        Role::Script,
        Role::SimpleWhenBare,
        Role::Runs,
        Role::One,
        Role::OneOrNone,
        Role::Starts,
        Role::Prepares,
        Role::Begins,
        Role::BeginsAround,
        Role::Lends,
        Role::Ends,
        Role::BeginsOnArgument,
        Role::EndsOnArgument,
        Role::Acquires,
        Role::Connects,
    ];

    fn names(self, m: &Methods) -> &'static [&'static str] {
        match self {
            Role::Sends => m.sends,
            Role::Script => m.scripts,
            Role::SimpleWhenBare => m.simple_when_bare,
            Role::Runs => m.runs,
            Role::One => m.one,
            Role::OneOrNone => m.one_or_none,
            Role::Starts => m.starts,
            Role::Prepares => m.prepares,
            Role::Begins => m.begins,
            Role::BeginsAround => m.begins_around,
            Role::Lends => m.lends,
            Role::Ends => m.ends,
            Role::BeginsOnArgument => m.begins_on_argument,
            Role::EndsOnArgument => m.ends_on_argument,
            Role::Acquires => m.acquires,
            Role::Connects => m.connects,
        }
    }
}

/// The roles the drivers give the method or function `name`, one bit per [`Role`].
fn roles(name: &str) -> u16 {
    static ROLES: OnceLock<HashMap<&'static str, u16>> = OnceLock::new();
    let roles = ROLES.get_or_init(|| {
        let mut roles: HashMap<&'static str, u16> = HashMap::new();
        for d in ALL {
            for r in Role::EVERY {
                for &n in r.names(&d.methods) {
                    *roles.entry(n).or_default() |= 1 << r as u16;
                }
            }
        }
        roles
    });
    roles.get(name).copied().unwrap_or(0)
}

/// Whether some driver gives the method or function `name` the role `role`.
pub(super) fn is(name: &str, role: Role) -> bool {
    roles(name) & (1 << role as u16) != 0
}

/// Whether some driver gives the method or function `name` any role.
pub(super) fn is_known(name: &str) -> bool {
    roles(name) != 0
}

/// The macro `name` holds SQL: the index of that argument, and whether it names a file.
pub(super) fn sql_macro(name: &str) -> Option<(usize, bool)> {
    ALL.iter()
        .flat_map(|d| d.macros)
        .find(|(n, ..)| *n == name)
        .map(|&(_, index, file)| (index, file))
}

/// The handle type named `name`, written as the path `qualified` (`["deadpool_postgres",
/// "Client"]`): the rows naming its crate first, then a row of a driver of a crate along it. A
/// path through another crate or the run's own modules (`reqwest::Client`, `crate::Pool`)
/// names a driver's type only when the name tells the database (`PgPool`); a bare name, or a
/// type's associated type, is any driver's.
fn handle_type(name: &str, qualified: &[String]) -> Option<&'static Type> {
    let rows = || {
        ALL.iter()
            .flat_map(|d| d.types.iter().map(move |t| (d, t)))
            .filter(|(_, t)| t.name == name)
    };
    // `C::Transaction`, `Self::Pool`: a type's associated type is judged by its name, as a
    // bare name is (crates and modules are written in lower case).
    let of_type = |m: &[String]| m.first().is_some_and(|f| f.starts_with(char::is_uppercase));
    let Some((_, modules)) = qualified
        .split_last()
        .filter(|(_, m)| !m.is_empty() && !of_type(m))
    else {
        return rows().find(|(_, t)| t.from.is_empty()).map(|(_, t)| t);
    };
    // `diesel::r2d2::Pool` is r2d2's: a driver's crate anywhere along the path.
    let through = |d: &Driver| modules.iter().any(|m| d.crates.iter().any(|(c, _)| c == m));
    rows()
        .find(|(_, t)| t.from.contains(&modules[0].as_str()))
        .or_else(|| rows().find(|(d, t)| t.from.is_empty() && through(d)))
        .or_else(|| rows().find(|(_, t)| t.from.is_empty() && t.dialect.is_some()))
        .map(|(_, t)| t)
}

/// The kind of handle a driver's trait `of` names as its associated type `name`.
pub(super) fn associated(of: &str, name: &str) -> Option<Executor> {
    ALL.iter()
        .flat_map(|d| d.associated)
        .find(|&&(t, n, _)| t == of && n == name)
        .map(|&(.., kind)| kind)
}

/// Whether a driver has a handle type named `name`.
pub(super) fn names_a_type(name: &str) -> bool {
    ALL.iter().flat_map(|d| d.types).any(|t| t.name == name)
}

/// The kind of handle a type named `name` (written as `qualified`) is: the configuration's
/// own types first, then the drivers'. `None`: not a database handle.
pub(super) fn kind_of(name: &str, qualified: &[String], cfg: &RustConfig) -> Option<Executor> {
    let listed = |list: &[String]| list.iter().any(|t| t == name || *t == qualified.join("::"));
    if listed(&cfg.pool_types) {
        return Some(Executor::Pool);
    }
    if listed(&cfg.connection_types) {
        return Some(Executor::Connection);
    }
    if listed(&cfg.transaction_types) {
        return Some(Executor::Transaction);
    }
    handle_type(name, qualified).map(|t| t.kind)
}

/// The database a type named `name` (written as `qualified`, with type arguments named
/// `args`) talks to: by its crate, by its name, or by an argument's (`Pool<Sqlite>`).
pub(super) fn dialect_of(name: &str, qualified: &[String], args: &[String]) -> Option<Dialect> {
    let krate = qualified.first().map(String::as_str);
    let of_crate = ALL
        .iter()
        .flat_map(|d| d.crates)
        .find(|(c, _)| Some(*c) == krate);
    if let Some((_, d)) = of_crate
        && d.is_some()
    {
        return *d;
    }
    let by = |n: &str| {
        ALL.iter().find_map(|d| {
            let typed = d.types.iter().find(|t| t.name == n).and_then(|t| t.dialect);
            typed.or_else(|| d.databases.iter().find(|(db, _)| *db == n).map(|&(_, d)| d))
        })
    };
    by(name).or_else(|| args.iter().find_map(|a| by(a)))
}

/// How a type named `name` shares its caller's transactions (see [`Shares`]).
pub(super) fn shares(name: &str) -> Shares {
    ALL.iter()
        .flat_map(|d| d.types)
        .find(|t| t.name == name && t.shares != Shares::No)
        .map_or(Shares::No, |t| t.shares)
}

/// Whether `attrs` make their struct a pool of the handle it holds (see
/// [`Driver::pool_attributes`]).
pub(super) fn pools_what_it_holds(attrs: &[syn::Attribute]) -> bool {
    let named = |a: &syn::Attribute| a.path().segments.last().map(|s| s.ident.to_string());
    attrs
        .iter()
        .filter_map(named)
        .any(|n| ALL.iter().any(|d| d.pool_attributes.contains(&n.as_str())))
}

/// A type that makes connections for a pool (`ConnectionManager`).
pub(super) fn is_manager(name: &str) -> bool {
    ALL.iter().any(|d| d.managers.contains(&name))
}

/// A trait every kind of a driver's handles implements.
pub(super) fn is_executor_trait(name: &str) -> bool {
    ALL.iter().any(|d| d.traits.contains(&name))
}

#[cfg(test)]
mod tests;
