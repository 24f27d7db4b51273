//! A PL/pgSQL body: the reader on its own, then as the body of a function and of a `DO` block
//! through the whole pipeline.
#![no_main]

use libfuzzer_sys::fuzz_target;
use txlint::config::Config;
use txlint::parse::plpgsql::read_body;
use txlint::source::Dialect;

mod common;

fuzz_target!(|data: &[u8]| {
    let body = String::from_utf8_lossy(data).into_owned();
    let full = common::full(data);
    common::on_stack(move || {
        read_body(&body, Dialect::Postgres);
        if body.contains("$fz$") {
            return;
        }
        let text = format!(
            "CREATE FUNCTION fz(a int, b int) RETURNS void LANGUAGE plpgsql AS $fz${body}$fz$;\n\
             DO $fz${body}$fz$;\n"
        );
        let run = txlint::check_source("fuzz.sql", &text, &Config::default());
        common::check(&run, full);
    });
});
