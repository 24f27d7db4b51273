//! Rust sources: the SQL strings sent through sqlx, tokio-postgres/postgres, deadpool/bb8,
//! diesel and sea-orm, with the session and transaction each statement runs on.
//!
//! Every function body becomes a unit. Its statements are walked in program order (both arms
//! of a branch, a loop body once); each value is followed just far enough to know whether it is
//! a database handle (and of which kind) or SQL text. A call to a function of the run that is
//! given a handle is walked in place, with its parameter bound to the caller's handle, so a
//! helper's statements join the caller's transaction; such a helper is then not reported on
//! its own.

mod batch;
mod bind;
mod calls;
mod collect;
mod dataflow;
mod depth;
mod diesel;
mod drivers;
mod emit;
mod expr;
mod fallback;
mod fields;
mod fncall;
mod generics;
mod handles;
mod index;
mod inline;
mod jobs;
mod leases;
mod library;
mod lit;
mod macros;
mod modules;
mod names;
mod order;
mod parsed;
pub mod prescan;
mod returns;
mod seaorm;
mod syntax;
mod text;
mod truths;
mod types;
mod value;
mod walk;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use proc_macro2::{LineColumn, TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;

use super::session::SessionWalker;
use super::{Extracted, Front, dialects};
use crate::config::Config;
use crate::model::*;
use crate::parse::facts::ParseFailure;
use crate::parse::split::split;
use crate::source::{Dialect, FileId, LineIndex, OffsetMap, SourceFile, Span};
use batch::{Extra, batch, batches};
use dataflow::Flow;
use drivers::Role;
use index::{FnDef, Index, in_scope, is_test};
use parsed::{Parsed, Unparsed, expand_macros, home, mentions_text, parse};
use value::*;

/// Read the Rust files `ids` of `files`; SQL files named by `query_file!` are added to `files`.
///
/// Files are read in batches, one per Cargo workspace (calls are followed within a batch), on
/// every core. A file is read from disk here if it was not read yet, given to syn only if the
/// pre-scan says it can matter, and forgotten again (text and syntax tree) once its batch is
/// walked unless a statement, a unit or a suppression comment points into it: memory holds
/// the largest workspace's syntax trees, not the whole tree's.
pub fn extract(
    files: &mut Vec<SourceFile>,
    ids: &[FileId],
    config: &Config,
    routines: &crate::extract::Routines,
) -> Extracted {
    let batches = batches(files, ids);
    let extra = Extra::new(files, batches.len());
    // Each batch's files move to the thread that reads them, and back.
    let work: Vec<std::sync::Mutex<Vec<(FileId, SourceFile)>>> = batches
        .iter()
        .map(|b| {
            let own = b
                .iter()
                .map(|&id| {
                    let placeholder = SourceFile::unread(PathBuf::new(), String::new());
                    (id, std::mem::replace(&mut files[id], placeholder))
                })
                .collect();
            std::sync::Mutex::new(own)
        })
        .collect();
    let results = crate::io::parallel(work.len(), |b| {
        let own = work[b]
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        let result = batch(b, own, config, &extra, routines);
        extra.done(b);
        result
    });
    let mut out = Extracted::default();
    for (x, own) in results {
        for (id, f) in own {
            files[id] = f;
        }
        out.merge(x);
    }
    files.extend(extra.into_files());
    out
}

/// Where a SQL text starts in its host file (and, for a text completed at run time, a hash of
/// what it became), and the dialect it is read in.
type SqlKey = ((FileId, usize, u64), Dialect);

/// State shared by every walk of a batch.
struct Shared<'e> {
    /// Steps of each SQL literal, read once per dialect, with their messages.
    cache: HashMap<SqlKey, Vec<(Step, usize)>>,
    /// Functions walked in place in some caller, with the calls walked.
    inlined: HashMap<usize, Vec<Span>>,
    /// Functions holding a call that a walk reached too deep to walk in place, after the
    /// function that walk started from: checked alone when that function is, so that what the
    /// call does is not lost.
    cut: HashSet<(usize, usize)>,
    /// Calls a walk reached too deep to walk in place and whose sessions the function holding
    /// them cannot know alone: what each does in the walked function's transactions is lost.
    deep: Vec<Deep>,
    /// What `self.<field>` holds as SQL, per file it is read in and field name (see
    /// `Walker::field_sql`); `None` while it is being read (a field whose text uses itself,
    /// through others, is no SQL).
    field_sql: HashMap<(usize, String), Option<Value>>,
    /// Whether each function asked about calls no function of the run (see
    /// `Walker::is_leaf`).
    leaves: HashMap<usize, bool>,
    /// The type a walk takes for a trait several types of the run implement (see
    /// `Walker::implementor`), and the first such trait a walk met with none taken.
    chosen: Vec<(String, String)>,
    ambiguous: Option<(String, Vec<String>)>,
    /// SQL files read for `query_file!`.
    extra: &'e Extra,
    /// The batch's place in the run (see [`Extra`]).
    batch: usize,
}

/// A call too deep to walk in place, on a handle from the caller of the function holding it.
struct Deep {
    /// The function whose walk reached it, and the one it is written in.
    root: usize,
    holder: usize,
    callee: usize,
    at: Span,
    /// The call in `root` it is reached through.
    top: Span,
}

/// Expressions the walker follows into one another before it stops (within [`crate::io::STACK`]).
const MAX_DEPTH: usize = 4_000;

const UNKNOWN: usize = 0;
const POOL: usize = 1;

struct Walker<'a, 'w> {
    ix: &'w Index<'a>,
    front: &'w mut Front,
    shared: &'w mut Shared<'a>,
    file: usize,
    vars: HashMap<String, Value>,
    /// What the names of the function walked in place stand for in its outermost caller: a
    /// parameter, the argument it was given (`tenant_id` for `&request.tenant_id`), `self`, the
    /// receiver. Values bound to statements are written in the caller's terms, so that one
    /// value reached by two paths is one key.
    aliases: HashMap<String, String>,
    walkers: Vec<SessionWalker>,
    sessions: Vec<Session>,
    /// Sessions of `self.<field>` connections.
    field_sessions: HashMap<String, Handle>,
    /// Handles a struct literal of the run put in a field (`Self { transaction }` in
    /// `begin_write`), by struct and field: `self.transaction` in its methods is that handle.
    /// `None` once two literals put different handles there.
    built: HashMap<(std::rc::Rc<str>, String), Option<Handle>>,
    /// The text variables the last branch arm walked built on (see [`Walker::in_arm`]).
    arm_sql: Vec<(String, Sql)>,
    /// Handles (by session walker) reached through an exclusive lock's guard, with the lock.
    guarded: HashMap<usize, crate::model::Name>,
    /// Values returned by the functions being walked in place, innermost last.
    returned: Vec<Vec<Value>>,
    /// Closures handed to functions of the run, or bound by a `let` (see [`Value::Closure`]).
    closures: Vec<Held>,
    /// The closures `let`s bound in the blocks being walked (see [`Walker::let_closure`]).
    let_closures: Vec<usize>,
    seq: usize,
    message: usize,
    branch: Vec<usize>,
    next_branch: usize,
    /// Each exit with the frame it only leaves (see `frames`), `None` when it leaves the
    /// function walked: a `return Ok(..)` in a helper, a `?` in a helper or an `async` block
    /// whose result the code around it handles, leave only those.
    exits: Vec<(Exit, Option<usize>)>,
    /// Exits that left only a helper walked in place or an `async` block, with the `seq` that
    /// frame ended at (see [`crate::model::Unit::frame_exits`]).
    frame_exits: Vec<(Exit, usize)>,
    /// How many helper bodies and `async` blocks the walk is inside.
    frames: usize,
    /// The `async` block about to be walked is awaited with `?` (`async { .. }.await?`).
    async_tried: bool,
    conditions: Vec<Condition>,
    loops: Vec<Loop>,
    /// The loops whose bodies are being walked (indices into `loops`), outermost first.
    open_loops: Vec<usize>,
    choices: Vec<Vec<usize>>,
    /// Booleans bound once, and what each arm needs of them (see [`truths`]).
    truths: truths::Truths,
    /// Collections sorted in place so far (`ids.sort()`).
    sorted: HashSet<String>,
    /// Names whose iteration order is a hash's, differing between processes: a `HashMap`,
    /// `HashSet`, or a list collected from one or pushed to in a loop over one. A diesel
    /// `.values(&rows)` of one inserts (and on conflict locks) its rows in that order.
    hashed: HashSet<String>,
    /// `for` loops over a collection in [`Walker::hashed`] being walked.
    hash_loops: usize,
    /// Variables computed to be in key order (`let lo = a.min(b)`), with the names they were
    /// computed from.
    ordered: HashMap<String, Vec<String>>,
    /// Fields of a row assigned since it was bound (`row.value = row.value + 1`), in the
    /// outermost caller's terms (`row.value`), with what the value assigned carries: a
    /// whole-row save (diesel's `.set(&row)`) writes these back, and the others as they were.
    assigned: HashMap<String, Flow>,
    /// Call sites of the helpers being walked in place, outermost first.
    calls: Vec<Span>,
    /// Calls whose error the enclosing expression passes on: with `?`, or as the value of the
    /// function (its tail, a `return`), innermost last.
    tried: Vec<Span>,
    /// An error of the code being walked reaches the unit's caller: each helper call on the way
    /// was passed on with `?` (see [`Host::propagated`]).
    passes_on: bool,
    /// Walking test code that the rules skip: helpers it calls are still walked on their own.
    test: bool,
    /// The function walked is `async`: its caller may drop it at any `.await`.
    in_async: bool,
    /// Its parameters that are references (`conn: &mut PgConnection`): passing one on moves
    /// a borrow, not the connection.
    borrowed: Vec<String>,
    /// Constants being resolved through other constants.
    const_depth: usize,
    /// Expressions being walked, nested in one another.
    depth: usize,
    /// Variables known, in the arm being walked, to hold a sea-orm backend
    /// (`if backend == DbBackend::Sqlite`).
    backends: HashMap<String, Dialect>,
    /// Sequence number of the last step emitted.
    last_step: Option<usize>,
    /// Steps whose rows were fetched as "one or none" (`fetch_optional`, `query_opt`, diesel's
    /// `.optional()`, sea-orm's `.one`): an `Option` of their result says whether a row was
    /// found, not whether a column was `NULL`.
    optional: HashSet<usize>,
    /// Steps fetched by a call that fails when they return no row (see [`Host::required`]),
    /// unless `.optional()` made it "one or none".
    required: HashSet<usize>,
    /// Functions being walked (outermost first), against recursion.
    stack: Vec<usize>,
    /// Values of types with an `impl Drop` that the function walked holds (see [`leases`]).
    held: Vec<leases::Held>,
    /// The types of local variables that the code names (`let persist = NewCrate { .. }`,
    /// `let r: Repo = ..`): a method called on one is that type's.
    types: HashMap<String, std::rc::Rc<str>>,
}

/// The folder of the package `path` is in: the nearest one above it with a `Cargo.toml`.
pub(super) fn package_dir(path: &Path) -> Option<&Path> {
    path.ancestors()
        .skip(1)
        .find(|d| d.join("Cargo.toml").is_file())
}
