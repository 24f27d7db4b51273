//! Every code block of every `rules/<name>.md` runs as a test (biome's habit): blocks tagged
//! `expect_diagnostic` must give exactly one diagnostic, of that rule, and nothing else; other
//! `sql` and `rust` blocks must give none at all. `mode=...`, `dialect=...` and `pool_mode=...`
//! in the tag set the config.

use txlint::config::Config;
use txlint::registry::ALL;

struct Block {
    line: usize,
    lang: String,
    expect: bool,
    config: String,
    code: String,
}

fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = doc.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut tags = info.split(',').map(str::trim);
        let lang = tags.next().unwrap_or("");
        let mut code = String::new();
        for (_, l) in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            code.push_str(l);
            code.push('\n');
        }
        if lang != "sql" && lang != "rust" {
            continue;
        }
        let mut expect = false;
        let mut sql = String::new();
        let mut top = String::new();
        for tag in tags {
            match tag.split_once('=') {
                None if tag == "expect_diagnostic" => expect = true,
                Some(("mode", v)) => sql += &format!("mode = \"{v}\"\n"),
                Some(("dialect", v)) => top += &format!("dialect = \"{v}\"\n"),
                Some(("pool_mode", v)) => top += &format!("pool_mode = \"{v}\"\n"),
                _ => panic!("unknown code block tag `{tag}` at line {}", n + 1),
            }
        }
        out.push(Block {
            line: n + 1,
            lang: lang.to_string(),
            expect,
            config: format!("{top}[sql]\n{sql}"),
            code,
        });
    }
    out
}

/// One test per example, named by its rule page and line (`cargo test lost-update` runs that
/// rule's), and one that every rule over the model has both kinds of example.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let mut trials = Vec::new();
    for rule in ALL {
        for b in blocks(rule.doc) {
            let name = format!("{}.md:{}", rule.name, b.line);
            trials.push(libtest_mimic::Trial::test(name, move || {
                example(rule, &b).map_err(Into::into)
            }));
        }
    }
    assert!(trials.len() > 10, "only {} examples found", trials.len());
    trials.push(libtest_mimic::Trial::test(
        "every_rule_over_the_model_has_both_kinds_of_example",
        || {
            every_rule_over_the_model_has_both_kinds_of_example();
            Ok(())
        },
    ));
    libtest_mimic::run(&args, trials).exit();
}

/// An `expect_diagnostic` block gives exactly one diagnostic, of its page's rule; any other
/// block gives none.
fn example(rule: &txlint::registry::Rule, b: &Block) -> Result<(), String> {
    let config = Config::parse(&b.config).map_err(|e| format!("example config: {e:?}"))?;
    let name = if b.lang == "rust" {
        "example.rs"
    } else {
        "example.sql"
    };
    let run = txlint::check_source(name, &b.code, &config);
    let got: Vec<_> = run
        .diagnostics
        .iter()
        .map(|d| (d.rule, d.message.clone()))
        .collect();
    let ok = if b.expect {
        got.len() == 1 && got[0].0 == rule.name
    } else {
        got.is_empty()
    };
    match ok {
        true => Ok(()),
        false => Err(format!(
            "rules/{}.md:{}: expected {}, got {:#?}",
            rule.name,
            b.line,
            if b.expect {
                "exactly one diagnostic of this rule"
            } else {
                "no diagnostic"
            },
            got
        )),
    }
}

fn every_rule_over_the_model_has_both_kinds_of_example() {
    for rule in ALL.iter().filter(|r| r.core) {
        let b = blocks(rule.doc);
        assert!(
            b.iter().any(|b| b.expect),
            "{}: no expect_diagnostic example",
            rule.name
        );
        assert!(
            b.iter().any(|b| !b.expect),
            "{}: no example without a finding",
            rule.name
        );
    }
}
