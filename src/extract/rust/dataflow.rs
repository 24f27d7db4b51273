//! Which statements' results a host value is computed from, and through which fields of their
//! rows: `let start = usage.start` carries the read of `usage` through its `start` column only,
//! so a value computed from it writes back nothing of the row's other columns.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use syn::punctuated::Punctuated;
use syn::visit::Visit;

use super::Value;
use super::text::placeholders;

/// The steps (by sequence number) whose results a value carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Flow(BTreeMap<usize, Via>);

/// How a value reaches a step's rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Via {
    /// The whole row, or a way txlint does not name (a method, an index, a tuple position).
    Whole,
    /// Only these named fields (`row.start`, `row.get("start")`).
    Fields(BTreeSet<Rc<str>>),
}

impl Flow {
    pub(super) fn new() -> Flow {
        Flow::default()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The steps, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.keys().copied()
    }

    pub(super) fn first(&self) -> Option<usize> {
        self.0.keys().next().copied()
    }

    /// The named fields of `seq`'s rows the value is computed from; `None` when it may carry
    /// any of them.
    pub(super) fn fields(&self, seq: usize) -> Option<&BTreeSet<Rc<str>>> {
        match self.0.get(&seq)? {
            Via::Whole => None,
            Via::Fields(f) => Some(f),
        }
    }

    /// The step's whole rows are carried.
    pub(super) fn insert(&mut self, seq: usize) {
        self.0.insert(seq, Via::Whole);
    }

    /// What either value carries: a whole row absorbs fields of it.
    pub(super) fn extend(&mut self, other: Flow) {
        for (seq, via) in other.0 {
            match (self.0.get_mut(&seq), via) {
                (None, via) => {
                    self.0.insert(seq, via);
                }
                (Some(Via::Fields(mine)), Via::Fields(theirs)) => mine.extend(theirs),
                (Some(mine), _) => *mine = Via::Whole,
            }
        }
    }

    /// The value's field `name` (`row.start` of `row`): a whole row narrows to that field; a
    /// value already taken from named fields (`let d = row.data; d.x`) keeps them.
    pub(super) fn field(self, name: &str) -> Flow {
        self.only(&BTreeSet::from([Rc::from(name)]))
    }

    /// The value seen through these named fields only (what a method reads of `self`).
    pub(super) fn only(mut self, names: &Fields) -> Flow {
        for via in self.0.values_mut() {
            if *via == Via::Whole {
                *via = Via::Fields(names.clone());
            }
        }
        self
    }
}

/// Named fields of a row.
pub(super) type Fields = BTreeSet<Rc<str>>;

/// The fields of `self` a method's body reads, when it reads `self` only through named fields
/// (`fn app_name(&self) -> String { format!("m-{}", self.slug) }`): called on a row, it carries
/// only those columns. `None` when `self` is used otherwise (passed on, a method called on it,
/// a macro whose arguments are not expressions).
pub(super) fn self_fields(block: &syn::Block) -> Option<Fields> {
    let mut reads = SelfReads(Some(Fields::new()));
    reads.visit_block(block);
    reads.0
}

/// What [`self_fields`] collects; `None` once `self` is used whole.
struct SelfReads(Option<Fields>);

impl<'a> Visit<'a> for SelfReads {
    fn visit_expr_field(&mut self, f: &'a syn::ExprField) {
        match (&*f.base, &f.member) {
            (syn::Expr::Path(p), syn::Member::Named(n)) if p.path.is_ident("self") => {
                if let Some(fields) = &mut self.0 {
                    fields.insert(Rc::from(n.to_string()));
                }
            }
            _ => syn::visit::visit_expr_field(self, f),
        }
    }
    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        if p.path.is_ident("self") {
            self.0 = None;
        }
    }
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        let parse = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        match m.parse_body_with(parse) {
            Ok(args) => args.iter().for_each(|a| self.visit_expr(a)),
            // Tokens that are no expressions (`matches!(self, ..)`, `write!(f, ..)` aside)
            // may name `self` any way.
            Err(_) => {
                let text = m.tokens.to_string();
                let mut words = text.split(|c: char| !c.is_alphanumeric() && c != '_');
                if words.any(|w| w == "self") {
                    self.0 = None;
                }
            }
        }
    }
}

/// Methods that read one column of a row by its name (sqlx and tokio-postgres `Row`).
const ROW_GETTERS: &[&str] = &["get", "try_get", "get_opt", "try_get_unchecked"];

/// The column `row.get("start")` reads by name.
pub(super) fn row_column(m: &syn::ExprMethodCall) -> Option<String> {
    match m.args.first()? {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) if ROW_GETTERS.contains(&&*m.method.to_string()) => Some(s.value()),
        _ => None,
    }
}

/// The steps whose results the variables used in `e` carry, through the fields it names
/// (`row.start`, `row.get("start")`).
pub(super) fn of_expr(vars: &HashMap<String, Value>, methods: Methods, e: &syn::Expr) -> Flow {
    let mut names = Names(vars, methods, Flow::new());
    names.visit_expr(e);
    names.2
}

/// The same for a macro's arguments and the names its format string captures
/// (`format!("{}-{name}", row.slug)`).
pub(super) fn of_macro(vars: &HashMap<String, Value>, methods: Methods, m: &syn::Macro) -> Flow {
    let mut names = Names(vars, methods, Flow::new());
    names.visit_macro(m);
    names.2
}

/// The fields of `self` the run's methods of a name read (see [`self_fields`]).
pub(super) type Methods<'m> = &'m dyn Fn(&str) -> Option<Fields>;

/// The variables' flows, collected as the expression is visited.
struct Names<'v>(&'v HashMap<String, Value>, Methods<'v>, Flow);

impl Names<'_> {
    fn of(&self, e: &syn::Expr) -> Option<Flow> {
        let syn::Expr::Path(p) = e else { return None };
        match self.0.get(&p.path.get_ident()?.to_string()) {
            Some(Value::Data(f)) => Some(f.clone()),
            _ => None,
        }
    }
}
impl<'a> Visit<'a> for Names<'_> {
    fn visit_expr_path(&mut self, p: &'a syn::ExprPath) {
        if let Some(id) = p.path.get_ident()
            && let Some(Value::Data(f)) = self.0.get(&id.to_string())
        {
            self.2.extend(f.clone());
        }
    }
    fn visit_expr_field(&mut self, f: &'a syn::ExprField) {
        match (&f.member, self.of(&f.base)) {
            (syn::Member::Named(n), Some(flow)) => self.2.extend(flow.field(&n.to_string())),
            _ => syn::visit::visit_expr_field(self, f),
        }
    }
    // `format!("{}-{name}", row.slug)`: the arguments and the names the text captures.
    fn visit_macro(&mut self, m: &'a syn::Macro) {
        let parse = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        let Ok(args) = m.parse_body_with(parse) else {
            return;
        };
        if let Some(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        })) = args.first()
        {
            for (_, name) in placeholders(&s.value()) {
                if let Ok(name) = name
                    && let Some(Value::Data(f)) = self.0.get(&name)
                {
                    self.2.extend(f.clone());
                }
            }
        }
        for a in &args {
            self.visit_expr(a);
        }
    }
    fn visit_expr_method_call(&mut self, m: &'a syn::ExprMethodCall) {
        let flow = self.of(&m.receiver);
        // `host.app_name()`: a method of the run that reads only named fields of `self`.
        let methods = self.1;
        match (row_column(m), flow) {
            (Some(c), Some(flow)) => self.2.extend(flow.field(&c)),
            (None, Some(flow)) => match methods(&m.method.to_string()) {
                Some(fields) => {
                    self.2.extend(flow.only(&fields));
                    m.args.iter().for_each(|a| self.visit_expr(a));
                }
                None => syn::visit::visit_expr_method_call(self, m),
            },
            _ => syn::visit::visit_expr_method_call(self, m),
        }
    }
}

impl FromIterator<usize> for Flow {
    fn from_iter<I: IntoIterator<Item = usize>>(seqs: I) -> Flow {
        Flow(seqs.into_iter().map(|s| (s, Via::Whole)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: &Flow, seq: usize) -> Option<Vec<&str>> {
        f.fields(seq).map(|s| s.iter().map(|n| &**n).collect())
    }

    #[test]
    fn a_field_narrows_a_whole_row_once() {
        let row: Flow = [1, 2].into_iter().collect();
        let start = row.clone().field("start");
        assert_eq!(names(&start, 1), Some(vec!["start"]));
        assert_eq!(names(&start, 2), Some(vec!["start"]));
        // A field of a value already taken from `start` is still from `start`.
        assert_eq!(names(&start.field("x"), 1), Some(vec!["start"]));
        assert_eq!(names(&row, 1), None);
    }

    #[test]
    fn a_method_reads_self_through_named_fields_or_whole() {
        let read = |body: &str| {
            let block: syn::Block = syn::parse_str(body).ok()?;
            self_fields(&block).map(|f| f.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        };
        let named = "{ let n = self.count + 1; format!(\"{}-{}\", self.slug.trim(), n) }";
        assert_eq!(read(named), Some(vec!["count".into(), "slug".into()]));
        assert_eq!(read("{ 42 }"), Some(vec![]));
        // Handed on, a method called on it, named in tokens that are no expressions.
        assert_eq!(read("{ describe(self) }"), None);
        assert_eq!(read("{ self.total() + self.fee }"), None);
        assert_eq!(read("{ matches!(self, Self::A { .. }) }"), None);
    }

    #[test]
    fn merging_keeps_the_widest_way_in() {
        let row: Flow = [1].into_iter().collect();
        let mut a = row.clone().field("start");
        a.extend(row.clone().field("cost"));
        assert_eq!(names(&a, 1), Some(vec!["cost", "start"]));
        a.extend(row);
        assert_eq!(names(&a, 1), None);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![1]);
        let mut b = Flow::new();
        b.extend([3].into_iter().collect::<Flow>().field("x"));
        b.insert(4);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!((b.first(), b.len()), (Some(3), 2));
    }
}
