//! A `.sql` file through the whole pipeline, read as PostgreSQL, as MySQL (by folder) and as
//! a sqlx migration (a runner's transaction).
#![no_main]

use libfuzzer_sys::fuzz_target;
use txlint::config::Config;

mod common;

/// One pipeline run per input: its last byte picks the reading.
const NAMES: [&str; 3] = [
    "fuzz.sql",
    "mysql/fuzz.sql",
    "migrations/20240101000000_fuzz.sql",
];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let name = NAMES[data.last().map_or(0, |b| usize::from(*b) % NAMES.len())];
    let full = common::full(data);
    common::on_stack(move || {
        let run = txlint::check_source(name, &text, &Config::default());
        common::check(&run, full);
    });
});
