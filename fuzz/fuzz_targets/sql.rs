//! A `.sql` file through the whole pipeline, read as PostgreSQL, as MySQL (by folder) and as
//! a sqlx migration (a runner's transaction).
#![no_main]

use libfuzzer_sys::fuzz_target;
use txlint::config::Config;

mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let config = Config::default();
    for name in ["fuzz.sql", "mysql/fuzz.sql", "migrations/20240101000000_fuzz.sql"] {
        common::check(&txlint::check_source(name, &text, &config));
    }
});
