use super::*;

fn units(text: &str, toml: &str) -> Vec<Unit> {
    let config = crate::config::Config::parse(toml).unwrap();
    let settings = FileSettings {
        dialect: config.dialect,
        mode: config.sql.mode,
    };
    extract(0, text, Dialect::Postgres, settings, None, names(text)).units
}

fn names(text: &str) -> super::super::Routines {
    std::sync::Arc::new(routine_names(text).into_iter().collect())
}

#[test]
fn routine_names_are_read_from_bytes() {
    let text = "create or replace FUNCTION public.Debit(a int) ..;\n\
                CREATE PROCEDURE \"Pay Out\"();\n\
                -- CREATE FUNCTION in_a_comment()\n\
                DROP FUNCTION gone(); SELECT my_function(1); CREATE FUNCTIONS x;";
    assert_eq!(routine_names(text), ["debit", "Pay Out", "in_a_comment"]);
}

fn shape(u: &Unit) -> Vec<(Scope, Isolation, usize)> {
    u.transactions
        .iter()
        .map(|t| (t.scope, t.isolation, t.steps.len()))
        .collect()
}

#[test]
fn script_transactions() {
    let sql = "select 1;\nbegin isolation level serializable;\nselect 2;\nupdate t set a = 1;\ncommit;\nselect 3 \\; select 4;\nset session characteristics as transaction isolation level repeatable read;\nstart transaction;\nselect 5;\nrollback;\n";
    let u = units(sql, "");
    use Isolation::*;
    use Scope::*;
    assert_eq!(
        shape(&u[0]),
        vec![
            (Autocommit, ReadCommitted, 1),
            (Explicit, Serializable, 2),
            (Message, ReadCommitted, 2),
            (Autocommit, ReadCommitted, 1),
            (Explicit, RepeatableRead, 1),
        ]
    );
    let tx = &u[0].transactions[1];
    assert_eq!(
        tx.begin().map(|s| &sql[s.range()]),
        Some("begin isolation level serializable")
    );
    assert_eq!(tx.end().map(|s| &sql[s.range()]), Some("commit"));
}

#[test]
fn modes() {
    let sql = "begin;\nselect 1;\ncommit;\nselect 2;\n";
    let u = units(sql, "[sql]\nmode = \"transaction\"\n");
    assert_eq!(
        shape(&u[0]),
        vec![(Scope::File, Isolation::ReadCommitted, 2)]
    );
    let u = units(sql, "[sql]\nmode = \"statements\"\n");
    assert_eq!(u[0].kind, UnitKind::QueryFile);
    assert!(
        u[0].transactions
            .iter()
            .all(|t| t.scope == Scope::Unknown && t.steps.len() == 1)
    );
    assert_eq!(u[0].transactions.len(), 4);
}

#[test]
fn a_lock_table_outside_begin_makes_the_file_one_transaction() {
    // Read after the statements before it were: the whole file is still one transaction.
    let sql = "select 1;\nupdate t set a = 1;\nLock Table t;\nselect 2;\n";
    let u = units(sql, "");
    assert_eq!(
        shape(&u[0]),
        vec![(Scope::File, Isolation::ReadCommitted, 4)]
    );
    assert!(u[0].runner.is_some());
    // Inside `BEGIN .. COMMIT` it proves nothing.
    let sql = "select 1;\nbegin;\nlock table t;\ncommit;\n";
    let u = units(sql, "");
    let scopes: Vec<Scope> = u[0].transactions.iter().map(|t| t.scope).collect();
    assert_eq!(scopes, [Scope::Autocommit, Scope::Explicit]);
    assert!(u[0].runner.is_none());
}

#[test]
fn only_the_word_lock_can_start_lock_table() {
    assert!(says_lock("LOCK TABLE t"));
    assert!(says_lock("select 1;\nlock t;"));
    assert!(says_lock("x;lock"));
    assert!(!says_lock(
        "select pg_advisory_lock(1); select * from t for update skip locked"
    ));
    assert!(!says_lock("select * from block, clock"));
}

#[test]
fn routine_bodies_are_units_with_host_positions_and_data_flow() {
    let sql = "create function f(k int) returns int language plpgsql as $$\ndeclare v int;\nbegin\n  select balance into v from accounts where id = k;\n  update accounts set balance = v + 1 where id = k;\n  commit;\n  perform pg_advisory_xact_lock(k);\n  return v;\nend $$;\n";
    let u = units(sql, "");
    assert_eq!(u.len(), 2);
    let f = &u[1];
    assert_eq!((f.kind, f.name.as_deref()), (UnitKind::Routine, Some("f")));
    // COMMIT in a procedure body ends one transaction and starts the next.
    assert_eq!(f.transactions.len(), 2);
    let read = &f.transactions[0].steps[0];
    assert_eq!(
        &sql[read.span.range()],
        "select balance into v from accounts where id = k"
    );
    assert_eq!(read.facts.extra().assigns, vec!["v"]);
    assert_eq!(read.facts.reads[0].name, "accounts");
    let write = &f.transactions[0].steps[1];
    assert_eq!(write.facts.kind, StmtKind::Update);
    // `k` is the function's parameter: a variable too.
    assert_eq!(write.facts.extra().uses, vec!["v", "k"]);
    assert_eq!(write.facts.writes[0].name, "accounts");
    let lock = &f.transactions[1].steps[0].facts.extra().advisory[0];
    assert_eq!(&sql[lock.span.range()], "pg_advisory_xact_lock(k)");
    assert_eq!(
        (lock.scope, lock.key.as_str()),
        (LockScope::Transaction, "k")
    );
}

#[test]
fn quoted_and_atomic_bodies() {
    let sql = "create function g() returns void as 'begin update t set s = ''x''; end' language plpgsql;\ncreate function h() returns int language sql begin atomic select 1 from t for update; end;\ndo language plpgsql $$ begin perform 1; end $$;\n";
    let u = units(sql, "");
    assert_eq!(u.len(), 4);
    let g = &u[1].transactions[0].steps[0];
    assert_eq!(&sql[g.span.range()], "update t set s = ''x''");
    let h = &u[2].transactions[0].steps[0];
    assert_eq!(&sql[h.span.range()], "select 1 from t for update");
    assert_eq!(h.facts.row_locks.len(), 1);
    assert_eq!(u[3].kind, UnitKind::DoBlock);
}

#[test]
fn facts_of_statements() {
    let sql = "with c as (select id from jobs for update of jobs skip locked) update jobs set s = 1 from c where jobs.id = c.id;\nlock table only a, b in share row exclusive mode nowait;\nset local lock_timeout = '1s';\nrollback to savepoint sp;\nselect * from a join b on true, c where x in (select 1 from d);\n";
    let u = units(sql, "");
    let steps: Vec<&Step> = u[0].transactions.iter().flat_map(|t| &t.steps).collect();
    let f = &steps[0].facts;
    assert_eq!(f.kind, StmtKind::Update);
    assert!(f.modifies);
    assert_eq!(f.row_locks[0].of, vec!["jobs"]);
    assert_eq!(f.row_locks[0].wait, LockWait::SkipLocked);
    let l = steps[1].facts.extra().table_lock.as_ref().unwrap();
    let names: Vec<_> = l.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        (names, l.mode.as_str()),
        (vec!["a", "b"], "SHARE ROW EXCLUSIVE")
    );
    assert_eq!(
        steps[2].facts.extra().set.as_ref(),
        Some(&SetFact {
            name: "lock_timeout".into(),
            local: true
        })
    );
    assert_eq!(
        steps[3].facts.extra().tx.as_ref(),
        Some(&TxControl::RollbackTo("sp".into()))
    );
    let reads: Vec<_> = steps[4]
        .facts
        .reads
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(reads, vec!["a", "b", "c", "d"]);
}

/// DDL whose tree no rule reads is left unparsed; DDL the schema comes from, and DDL that
/// calls a routine of the run, are parsed.
#[test]
fn ddl_parsed_only_where_its_tree_is_read() {
    let sql = "create function f() returns int language sql as 'select 1';\ncreate index i on t (a);\ngrant select on t to r;\ncreate table t (id int primary key);\ncreate materialized view v as select f();\n";
    let u = units(sql, "");
    let parsed: Vec<(&str, bool)> = u[0]
        .transactions
        .iter()
        .flat_map(|t| &t.steps)
        .map(|s| (&sql[s.span.range()], s.facts.parsed))
        .collect();
    assert_eq!(
        parsed[1..],
        [
            ("create index i on t (a)", false),
            ("grant select on t to r", false),
            ("create table t (id int primary key)", true),
            ("create materialized view v as select f()", true),
        ]
    );
}
