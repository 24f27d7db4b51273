//! PostgreSQL's own regression SQL (../shared/corpus, about 5 MB nobody here wrote) goes through
//! the whole pipeline: no panic, every file read, every position inside its file. Only
//! robustness is asserted here; rules are never tuned to this corpus.

use std::path::PathBuf;

use txlint::config::Config;

#[test]
fn regression_corpus_runs_clean() {
    let root = PathBuf::from("../shared/corpus/postgres-regress");
    assert!(
        root.is_dir(),
        "{} is missing: the corpus ships in ../shared beside the repository",
        root.display()
    );
    let cwd = std::env::current_dir().unwrap();
    let config = Config::default();
    let found = txlint::discover::discover(std::slice::from_ref(&root), &cwd, &config, false);
    assert!(found.files.len() > 200, "{} files", found.files.len());
    let run = txlint::check_paths(&found.files, &cwd, &config);
    assert_eq!(run.unreadable, 0);
    assert!(run.stats.statements > 40_000, "{:?}", run.stats);
    assert_eq!(run.stats.statements, run.stats.parsed + run.stats.fallback);
    for d in &run.diagnostics {
        let file = &run.program.files[d.span.file];
        for span in std::iter::once(d.span).chain(d.labels.iter().map(|l| l.span)) {
            let f = &run.program.files[span.file];
            assert!(
                span.start() <= span.end() && span.end() <= f.text().len(),
                "{}: {span:?}",
                f.display
            );
            assert!(
                f.text().is_char_boundary(span.start()) && f.text().is_char_boundary(span.end()),
                "{}: {span:?}",
                f.display
            );
        }
        assert!(file.line_col(d.span.start()).line >= 1);
    }
    // Rendering every finding in every format must not panic either.
    let style = txlint::report::TextStyle {
        color: false,
        width: 100,
    };
    for format in [
        txlint::report::Format::Text,
        txlint::report::Format::Json,
        txlint::report::Format::Sarif,
    ] {
        assert!(!txlint::report::render(&run, format, style).is_empty());
    }
}
