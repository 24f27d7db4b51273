//! `io::run_on_this_thread`: after it, a run starts no thread (the fuzz targets run every input
//! on one thread they made). Its own test binary: the switch is for the whole process.

use txlint::config::Config;

#[test]
fn runs_do_their_work_on_the_calling_thread_after_the_switch() {
    let sql = "BEGIN;\nSELECT n FROM t WHERE id = 1;\nUPDATE t SET n = 2 WHERE id = 1;\nCOMMIT;\n\
               SELECT pg_advisory_xact_lock(1);\n";
    let rules = |run: &txlint::Run| -> Vec<String> {
        run.diagnostics.iter().map(|d| d.rule.to_string()).collect()
    };
    let before = rules(&txlint::check_source("a.sql", sql, &Config::default()));
    let me = std::thread::current().id();
    let spread = txlint::io::parallel(8, |_| std::thread::current().id());
    assert_eq!(spread.len(), 8);

    txlint::io::run_on_this_thread();
    assert!(txlint::io::on_this_thread());
    let here = txlint::io::parallel(8, |_| std::thread::current().id());
    assert_eq!(here, vec![me; 8], "every job ran on the calling thread");
    // The same findings as on the analysis thread, among them the lock outside a transaction.
    let after = rules(&txlint::check_source("a.sql", sql, &Config::default()));
    assert_eq!(after, before);
    assert!(
        after.iter().any(|r| r == "xact-lock-outside-transaction"),
        "{after:?}"
    );
}
