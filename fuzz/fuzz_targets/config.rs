//! A `txlint.toml`: parsed, and when it is valid, used for a run on a small program.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use txlint::config::Config;

mod common;

const SQL: &str = "BEGIN;\nSELECT n FROM t WHERE id = 1;\nUPDATE t SET n = 2 WHERE id = 1;\nCOMMIT;\n\
                   SELECT pg_advisory_xact_lock(1);\n";
const RUST: &str = "async fn f(pool: &sqlx::PgPool) -> sqlx::Result<()> {\n\
                    sqlx::query(\"SELECT pg_advisory_lock(1)\").execute(pool).await?;\n    Ok(())\n}\n";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let full = common::full(data);
    common::on_stack(move || {
        let Ok(config) = Config::parse(&text) else {
            return;
        };
        for path in [
            "db/x.sql",
            "migrations/1_x.sql",
            "tests/x.sql",
            "src/lib.rs",
        ] {
            config.settings_for(Path::new(path));
            config.is_test_path(Path::new(path));
        }
        // One pipeline run per input: SQL and Rust together.
        let files = vec![
            txlint::source::SourceFile::new("db/x.sql".into(), "db/x.sql".into(), SQL.into()),
            txlint::source::SourceFile::new("src/lib.rs".into(), "src/lib.rs".into(), RUST.into()),
        ];
        common::check(&txlint::check_files(files, &config), full);
    });
});
