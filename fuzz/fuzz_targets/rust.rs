//! A Rust file through the whole pipeline: syn or the token fallback, the SQL it sends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use txlint::config::Config;

mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let full = common::full(data);
    common::on_stack(move || {
        let run = txlint::check_source("fuzz.rs", &text, &Config::default());
        common::check(&run, full);
    });
});
