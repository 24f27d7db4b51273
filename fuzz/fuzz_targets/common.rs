//! What every target asserts of a run: it returned (no panic, no abort), every span of every
//! diagnostic lies inside its file, and every output format renders.

use txlint::Run;
use txlint::report::{self, TextStyle};

pub fn check(run: &Run) {
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
    report::sarif::render(run);
    report::model::render(run);
    report::text::render(
        run,
        TextStyle {
            color: false,
            width: 100,
        },
    );
}
