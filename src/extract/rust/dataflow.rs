//! Which statements' results a host value is computed from, and through which fields of their
//! rows: `let start = usage.start` carries the read of `usage` through its `start` column only,
//! so a value computed from it writes back nothing of the row's other columns.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use syn::punctuated::Punctuated;
use syn::visit::Visit;

use super::Value;
use super::collect::words;
use super::text::placeholders;

/// The steps (by sequence number) whose results a value carries; for a struct literal, also
/// what each of its fields carries (`Detail { job, failures }`: `detail.job` carries the job's
/// read, not the count's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Flow(BTreeMap<usize, Via>, Option<Rc<Record>>);

/// What each named field of a struct literal carries.
pub(super) type Record = BTreeMap<Rc<str>, Flow>;

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

    /// A struct literal's value: what its fields carry, together and one by one.
    pub(super) fn record(fields: Record) -> Flow {
        let mut all = Flow::new();
        fields.values().for_each(|f| all.extend(f.clone()));
        all.1 = Some(Rc::new(fields));
        all
    }

    /// The step's whole rows are carried.
    pub(super) fn insert(&mut self, seq: usize) {
        self.1 = None;
        self.0.insert(seq, Via::Whole);
    }

    /// What either value carries: a whole row absorbs fields of it.
    pub(super) fn extend(&mut self, other: Flow) {
        if other.0.is_empty() && other.1.is_none() {
            return;
        }
        if self.0.is_empty() && self.1.is_none() {
            *self = other;
            return;
        }
        // A struct literal merged with other data (a call's arguments, with the struct it
        // returned): each field may carry that data too, and no field carries another's. Two
        // struct literals merged are no one of them.
        let plain = |f: &Flow| Flow(f.0.clone(), None);
        self.1 = match (self.1.take(), &other.1) {
            (Some(mine), None) => Some(Rc::new(spread(&mine, &plain(&other)))),
            (None, Some(theirs)) => Some(Rc::new(spread(theirs, &plain(self)))),
            _ => None,
        };
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

    /// The value seen through these named fields only (what a method reads of `self`): of a
    /// struct literal, what those fields carry.
    pub(super) fn only(mut self, names: &Fields) -> Flow {
        // A field given no data (`Counter { id, n }` with `id` a parameter) keeps standing for
        // the rows' field of its name, as for any value: `c.id` names the row `n` was read from.
        if let Some(record) = self.1.take()
            && names
                .iter()
                .all(|n| record.get(n).is_some_and(|f| !f.is_empty()))
        {
            let mut out = Flow::new();
            names.iter().for_each(|n| out.extend(record[n].clone()));
            return out;
        }
        for via in self.0.values_mut() {
            if *via == Via::Whole {
                *via = Via::Fields(names.clone());
            }
        }
        self
    }
}

/// `record` with what `more` carries added to each field that carries data (one given none
/// keeps standing for the rows' field of its name, see [`Flow::only`]).
fn spread(record: &Record, more: &Flow) -> Record {
    let add = |f: &Flow| {
        let mut f = f.clone();
        if !f.is_empty() {
            f.extend(more.clone());
        }
        f
    };
    record.iter().map(|(n, f)| (n.clone(), add(f))).collect()
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
            Err(_) if words(&m.tokens.to_string(), "self") > 0 => self.0 = None,
            Err(_) => {}
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
        Flow(seqs.into_iter().map(|s| (s, Via::Whole)).collect(), None)
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
    fn a_struct_literal_keeps_what_each_field_carries() {
        let job: Flow = [1].into_iter().collect();
        let count: Flow = [2].into_iter().collect();
        let fields = Record::from([("job".into(), job.clone()), ("failures".into(), count)]);
        let detail = Flow::record(fields);
        assert_eq!(detail.iter().collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(detail.clone().field("job"), job);
        assert_eq!(
            names(&detail.clone().field("job").field("attempts"), 1),
            Some(vec!["attempts"])
        );
        // A field the literal did not name or gave no data, and the literal merged with another
        // value: the fields of the rows, as for any value.
        assert_eq!(
            names(&detail.clone().field("other"), 2),
            Some(vec!["other"])
        );
        let fields = Record::from([
            ("id".into(), Flow::new()),
            ("n".into(), [1].into_iter().collect()),
        ]);
        assert_eq!(
            names(&Flow::record(fields).field("id"), 1),
            Some(vec!["id"])
        );
        // Merged with other data, each field may carry it too; two literals merged are none.
        let mut args = detail.clone();
        args.extend([3].into_iter().collect());
        assert_eq!(
            args.clone().field("job").iter().collect::<Vec<_>>(),
            vec![1, 3]
        );
        let mut merged = detail.clone();
        merged.extend(args);
        assert_eq!(names(&merged.field("job"), 2), Some(vec!["job"]));
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
