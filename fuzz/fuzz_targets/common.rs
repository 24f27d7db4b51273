//! What every target asserts of a run: it returned (no panic, no abort), every span of every
//! diagnostic lies inside its file, and every output format renders.
//!
//! SARIF carries every rule's documentation, whatever the input: rendering it is most of a
//! small input's time. It is rendered for the inputs [`full`] picks (an eighth, chosen by
//! their bytes, so a crash reproduces), the other formats for all.

use txlint::Run;
use txlint::report::{self, TextStyle};

/// The inputs whose runs render SARIF too.
pub fn full(data: &[u8]) -> bool {
    data.iter()
        .fold(0u8, |h, b| h.wrapping_mul(31).wrapping_add(*b))
        % 8
        == 0
}

pub fn check(run: &Run, full: bool) {
    for d in &run.diagnostics {
        let spans = std::iter::once(d.span).chain(d.labels.iter().map(|l| l.span));
        for s in spans {
            let len = run.program.files[s.file].text().len();
            assert!(
                s.start() <= s.end() && s.end() <= len,
                "{}: span {s:?} outside 0..{len}",
                d.rule
            );
        }
    }
    report::json::render(run);
    if full {
        report::sarif::render(run);
    }
    report::model::render(run);
    report::text::render(
        run,
        TextStyle {
            color: false,
            width: 100,
        },
    );
}
