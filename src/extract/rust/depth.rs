//! Rust text too deep for a recursive parser: syn and the walker recurse once per nesting level
//! and per operand of an operator chain, and a stack overflow aborts the whole run with no
//! output. The token stream (which proc-macro2 builds and drops without recursion) is measured
//! first; a file past a limit is read from its tokens only, with a note that says why.

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// Nesting of brackets, braces and parentheses.
pub const GROUPS: usize = 256;
/// Operators (or `.method(..)` calls) between two separators of one group.
pub const CHAIN: usize = 2_000;
/// Generic arguments nested in one another (`Vec<Vec<..>>`).
pub const GENERICS: usize = 256;

/// Why `ts` is too deep to parse, if it is.
pub fn too_deep(ts: &TokenStream) -> Option<String> {
    // Groups still to visit, with their depth.
    let mut stack = vec![(ts.clone(), 1usize)];
    while let Some((group, depth)) = stack.pop() {
        if depth > GROUPS {
            return Some(format!("brackets nested more than {GROUPS} deep"));
        }
        let (mut chain, mut generics) = (0usize, 0usize);
        let mut prev_ident = false;
        for t in group {
            let mut ident = false;
            match &t {
                TokenTree::Group(g) => {
                    if g.delimiter() == Delimiter::Brace {
                        chain = 0;
                        generics = 0;
                    }
                    stack.push((g.stream(), depth + 1));
                }
                TokenTree::Punct(p) => match p.as_char() {
                    ';' | ',' => {
                        chain = 0;
                        generics = 0;
                    }
                    '<' if prev_ident => {
                        generics += 1;
                        if generics > GENERICS {
                            return Some(format!(
                                "generic arguments nested more than {GENERICS} deep"
                            ));
                        }
                    }
                    '>' => generics = generics.saturating_sub(1),
                    '+' | '-' | '*' | '/' | '%' | '&' | '|' | '^' | '.' | '=' | '!' => {
                        chain += 1;
                        if chain > CHAIN {
                            return Some(format!(
                                "more than {CHAIN} operators or method calls in one expression"
                            ));
                        }
                    }
                    _ => {}
                },
                TokenTree::Ident(_) => ident = true,
                TokenTree::Literal(_) => {}
            }
            prev_ident = ident;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(src: &str) -> Option<String> {
        too_deep(&src.parse().unwrap())
    }

    #[test]
    fn limits() {
        assert_eq!(deep("fn f() { let x = a + b; g(x).h(); }"), None);
        let blocks = format!("fn f() {}{}", "{".repeat(300), "}".repeat(300));
        assert!(deep(&blocks).unwrap().contains("brackets"));
        let plus = format!("fn f() {{ let x = {}; }}", vec!["1"; 3000].join(" + "));
        assert!(deep(&plus).unwrap().contains("operators"));
        let binds = format!("fn f() {{ q{}; }}", ".bind(1)".repeat(2500));
        assert!(deep(&binds).unwrap().contains("method calls"));
        let generics = format!("type T = {}u8{};", "Vec<".repeat(300), ">".repeat(300));
        assert!(deep(&generics).unwrap().contains("generic"));
        // Many short statements are not one long chain.
        let many = format!("fn f() {{ {} }}", "a = b + c;".repeat(5000));
        assert_eq!(deep(&many), None);
    }
}
