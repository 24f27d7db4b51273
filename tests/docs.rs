//! Every code block of every `rules/<name>.md` runs as a test (biome's habit): blocks tagged
//! `expect_diagnostic` must give exactly one diagnostic, of that rule, and nothing else; other
//! `sql` and `rust` blocks must give none at all. `mode=...`, `dialect=...` and `pool_mode=...`
//! in the tag set the config.

use txlint::config::Config;
use txlint::rules::ALL;

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

#[test]
fn rule_doc_examples() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for rule in ALL {
        for b in blocks(rule.doc) {
            ran += 1;
            let config = Config::parse(&b.config).expect("example config");
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
            if !ok {
                failures.push(format!(
                    "rules/{}.md:{}: expected {}, got {:#?}",
                    rule.name,
                    b.line,
                    if b.expect {
                        "exactly one diagnostic of this rule"
                    } else {
                        "no diagnostic"
                    },
                    got
                ));
            }
        }
    }
    assert!(ran > 10, "only {ran} examples found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_rule_over_the_model_has_both_kinds_of_example() {
    for rule in ALL.iter().filter(|r| r.check.is_some()) {
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
