//! No import circles between the files of a crate (ARCHITECTURE.md, "Code map"): for every
//! crate of the workspace, the file-level graph of the names one file takes from another,
//! and every circle in it with its files.
//!
//! The graph is read with `syn` from the sources the compiler builds (test code, that is
//! `#[cfg(test)]` items, left out). A file takes a name from another when it names it
//! through a `use` or a path (`crate::…`, `super::…`, `self::…`, or a name a `use` or a
//! `mod` brought into scope), in code or in a macro's tokens; the name is followed through
//! `use` and `pub use` to the file that defines it. A module's submodules are part of it:
//! a `mod` declaration is the module tree, not an edge, and a file taking a name from a
//! module it sits inside (its parent module's file, the crate root) is none either, so a
//! crate root or a folder's `mod.rs` may define what its submodules share and re-export
//! what they define. Every other taking is an edge: two sibling files, or a parent and a
//! file outside it, that take from each other are a circle.

use crate::rebuilds::workspace_metadata;
use crate::util::repo_root;
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit_mut::{self, VisitMut};

/// One module of a crate.
#[derive(Default)]
struct Module {
    /// The file its items are written in (an inline `mod m { … }` shares its parent's).
    file: PathBuf,
    /// Where the files of its `mod child;` declarations are.
    child_dir: PathBuf,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// The names of the items it defines (functions, types, constants, macros…).
    items: BTreeSet<String>,
    /// The names its `use` items bring in, with the path each stands for, as written.
    uses: BTreeMap<String, Vec<String>>,
    /// Its `use …::*` imports, as written.
    globs: Vec<Vec<String>>,
}

/// A crate's modules (index 0 is the root) and its files' syntax trees.
#[derive(Default)]
struct Crate {
    modules: Vec<Module>,
    /// Each file read, with the module it is.
    files: Vec<(usize, syn::File)>,
}

/// Whether `attrs` hold `#[cfg(test)]` or a `cfg` that needs `test`.
pub(crate) fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(list) if list.tokens.clone().into_iter().any(
                |t| matches!(t, TokenTree::Ident(i) if i == "test")))
    })
}

/// A `#[path = "…"]` attribute's value.
pub(crate) fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// An item's attributes.
pub(crate) fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The name an item defines in its module's namespace, if any.
fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Every (local name, path as written) a use tree brings in; a glob's name is `*`.
fn use_pairs(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_pairs(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => {
            out.push((prefix.last().cloned().unwrap_or_default(), prefix.clone()));
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((n.ident.to_string(), path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => out.push(("*".to_string(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                use_pairs(tree, prefix, out);
            }
        }
    }
}

/// The paths in a macro's tokens: runs of identifiers joined by `::`.
fn token_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let colon =
        |t: Option<&TokenTree>| matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == ':');
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => token_paths(g.stream(), out),
            TokenTree::Ident(first) => {
                let mut path = vec![first.to_string()];
                while colon(tokens.get(i + 1)) && colon(tokens.get(i + 2)) {
                    let Some(TokenTree::Ident(next)) = tokens.get(i + 3) else {
                        break;
                    };
                    path.push(next.to_string());
                    i += 3;
                }
                if path.len() > 1 {
                    out.push(path);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

impl Crate {
    /// The crate whose root file is `root`, every module it declares read.
    fn read(root: &Path) -> Crate {
        let mut krate = Crate::default();
        krate.modules.push(Module {
            file: root.to_path_buf(),
            child_dir: root.parent().unwrap().to_path_buf(),
            ..Module::default()
        });
        krate.read_file(0);
        krate
    }

    /// Parses module `at`'s file and declares its items.
    fn read_file(&mut self, at: usize) {
        let file = &self.modules[at].file;
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        self.declare(at, &parsed.items);
        self.files.push((at, parsed));
    }

    /// Declares `items` in module `at`: names, uses, and child modules (read in turn).
    fn declare(&mut self, at: usize, items: &[syn::Item]) {
        for item in items.iter().filter(|i| !is_test(item_attrs(i))) {
            if let Some(name) = item_name(item) {
                self.modules[at].items.insert(name);
            }
            match item {
                syn::Item::Use(u) => {
                    let mut pairs = Vec::new();
                    use_pairs(&u.tree, &mut Vec::new(), &mut pairs);
                    for (name, path) in pairs {
                        if name == "*" {
                            self.modules[at].globs.push(path);
                        } else {
                            self.modules[at].uses.insert(name, path);
                        }
                    }
                }
                syn::Item::Mod(m) => self.declare_mod(at, m),
                _ => {}
            }
        }
    }

    /// Module `at`'s child `m`, inline or in a file of its own.
    fn declare_mod(&mut self, at: usize, m: &syn::ItemMod) {
        let name = m.ident.to_string();
        let dir = self.modules[at].child_dir.clone();
        let (file, child_dir) = match (&m.content, path_attr(&m.attrs)) {
            (Some(_), _) => (self.modules[at].file.clone(), dir.join(&name)),
            (None, Some(path)) => {
                let file = dir.join(path);
                let child_dir = file.parent().unwrap().to_path_buf();
                (file, child_dir)
            }
            (None, None) => {
                let flat = dir.join(format!("{name}.rs"));
                if flat.exists() {
                    (flat, dir.join(&name))
                } else {
                    (dir.join(&name).join("mod.rs"), dir.join(&name))
                }
            }
        };
        let index = self.modules.len();
        self.modules.push(Module {
            file,
            child_dir,
            parent: Some(at),
            ..Module::default()
        });
        self.modules[at].children.insert(name, index);
        match &m.content {
            Some((_, inner)) => self.declare(index, inner),
            None => self.read_file(index),
        }
    }

    /// Module `at`'s path from the root.
    fn module_path(&self, mut at: usize) -> Vec<String> {
        let mut path = Vec::new();
        while let Some(parent) = self.modules[at].parent {
            let (name, _) = self.modules[parent]
                .children
                .iter()
                .find(|(_, i)| **i == at)
                .unwrap();
            path.push(name.clone());
            at = parent;
        }
        path.reverse();
        path
    }

    /// `path`, as written in module `at`, made absolute from the crate root; `None` for
    /// another crate's or a name this reader does not follow (a local, `Self`).
    fn absolute(&self, at: usize, path: &[String]) -> Option<Vec<String>> {
        let (mut module, mut rest) = (at, path);
        match rest.first().map(String::as_str) {
            Some("crate") => (module, rest) = (0, &rest[1..]),
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    module = self.modules[module].parent?;
                    rest = &rest[1..];
                }
            }
            Some(first)
                if self.modules[module].children.contains_key(first)
                    || self.modules[module].items.contains(first)
                    || self.modules[module].uses.contains_key(first) => {}
            _ => return None,
        }
        let mut absolute = self.module_path(module);
        absolute.extend(rest.iter().cloned());
        Some(absolute)
    }

    /// Whether module `at` sits inside the module whose file is `file` (its parent, its
    /// parent's parent… the crate root): a module's own submodules are part of it.
    fn inside(&self, at: usize, file: &Path) -> bool {
        let mut module = self.modules[at].parent;
        while let Some(up) = module {
            if self.modules[up].file == file {
                return true;
            }
            module = self.modules[up].parent;
        }
        false
    }

    /// The file defining what the absolute `path` names, through `use` and `pub use`.
    fn resolve(&self, path: &[String], depth: usize) -> Option<&Path> {
        if depth > 16 {
            return None;
        }
        let mut module = 0;
        for (i, segment) in path.iter().enumerate() {
            let here = &self.modules[module];
            if let Some(child) = here.children.get(segment) {
                module = *child;
                continue;
            }
            if here.items.contains(segment) {
                return Some(&here.file);
            }
            if let Some(written) = here.uses.get(segment) {
                let mut target = self.absolute(module, written)?;
                target.extend(path[i + 1..].iter().cloned());
                return self.resolve(&target, depth + 1);
            }
            return here.globs.iter().find_map(|glob| {
                let mut target = self.absolute(module, glob)?;
                target.extend(path[i..].iter().cloned());
                self.resolve(&target, depth + 1)
            });
        }
        Some(&self.modules[module].file)
    }

    /// The file-level edges: (a file, a file it takes a name from).
    fn edges(&mut self) -> BTreeSet<(PathBuf, PathBuf)> {
        let files = std::mem::take(&mut self.files);
        let mut found = Vec::new();
        for (at, mut file) in files {
            let mut paths = Paths {
                krate: self,
                at,
                found: Vec::new(),
            };
            paths.visit_file_mut(&mut file);
            found.extend(paths.found);
        }
        found
            .into_iter()
            .filter_map(|(at, written)| {
                let from = &self.modules[at].file;
                let to = self.resolve(&self.absolute(at, &written)?, 0)?;
                (from != to && !self.inside(at, to)).then(|| (from.clone(), to.to_path_buf()))
            })
            .collect()
    }
}

/// Collects the paths one file's code names (its `use`s, paths, macro tokens), test
/// items left out, inline modules followed.
struct Paths<'a> {
    krate: &'a Crate,
    /// The module being read.
    at: usize,
    /// (module, path as written).
    found: Vec<(usize, Vec<String>)>,
}

impl VisitMut for Paths<'_> {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if !is_test(item_attrs(item)) {
            visit_mut::visit_item_mut(self, item);
        }
    }

    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        let child = self.krate.modules[self.at]
            .children
            .get(&m.ident.to_string());
        if let (Some(child), Some(_)) = (child.copied(), &m.content) {
            let outer = std::mem::replace(&mut self.at, child);
            visit_mut::visit_item_mod_mut(self, m);
            self.at = outer;
        }
    }

    fn visit_item_use_mut(&mut self, u: &mut syn::ItemUse) {
        let mut pairs = Vec::new();
        use_pairs(&u.tree, &mut Vec::new(), &mut pairs);
        self.found
            .extend(pairs.into_iter().map(|(_, path)| (self.at, path)));
    }

    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        // A lone name counts when a `use` brought it in (a local of the same name as a
        // child module is no import).
        if segments.len() > 1 || self.krate.modules[self.at].uses.contains_key(&segments[0]) {
            self.found.push((self.at, segments));
        }
        visit_mut::visit_path_mut(self, path);
    }

    fn visit_macro_mut(&mut self, mac: &mut syn::Macro) {
        let mut paths = Vec::new();
        token_paths(mac.tokens.clone(), &mut paths);
        self.found.extend(paths.into_iter().map(|p| (self.at, p)));
        visit_mut::visit_macro_mut(self, mac);
    }
}

/// The circles of a graph: its strongly connected parts of more than one file, each
/// sorted, in order.
fn circles(edges: &BTreeSet<(PathBuf, PathBuf)>) -> Vec<Vec<PathBuf>> {
    let mut next: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start];
        while let Some(at) = todo.pop() {
            for to in next.get(at).into_iter().flatten() {
                if seen.insert(*to) {
                    todo.push(to);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&PathBuf, BTreeSet<&PathBuf>> =
        next.keys().map(|node| (*node, reach(node))).collect();
    let mut found = BTreeSet::new();
    for (node, reached) in &reaches {
        let circle: Vec<PathBuf> = reached
            .iter()
            .filter(|other| reaches.get(*other).is_some_and(|r| r.contains(node)))
            .map(|p| (*p).clone())
            .collect();
        if circle.len() > 1 {
            found.insert(circle);
        }
    }
    found.into_iter().collect()
}

/// A crate's circles, as paths from the repository's root, and the edges inside them.
struct Circles {
    circles: Vec<Vec<String>>,
    /// "a -> b" for every edge between two files of one circle.
    ties: Vec<String>,
}

/// Every crate of the workspace (each library and binary target), by target name.
fn workspace_circles() -> BTreeMap<String, Circles> {
    let root = repo_root();
    let shown = |f: &PathBuf| f.strip_prefix(&root).unwrap_or(f).display().to_string();
    let metadata = workspace_metadata();
    let mut all = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            let kinds = target["kind"].as_array().unwrap();
            if !kinds.iter().any(|k| k == "lib" || k == "bin") {
                continue;
            }
            let mut krate = Crate::read(Path::new(target["src_path"].as_str().unwrap()));
            let edges = krate.edges();
            let circles = circles(&edges);
            let ties = edges
                .iter()
                .filter(|(a, b)| circles.iter().any(|c| c.contains(a) && c.contains(b)))
                .map(|(a, b)| format!("{} -> {}", shown(a), shown(b)))
                .collect();
            let circles = circles
                .iter()
                .map(|circle| circle.iter().map(shown).collect())
                .collect();
            let name = target["name"].as_str().unwrap().to_string();
            all.insert(name, Circles { circles, ties });
        }
    }
    all
}

#[test]
fn no_crate_has_an_import_circle() {
    let found = workspace_circles();
    assert!(
        found.len() >= 14,
        "only {} crates read: is the scan broken?",
        found.len()
    );
    let circular: BTreeMap<&String, &Vec<Vec<String>>> = found
        .iter()
        .filter(|(_, c)| !c.circles.is_empty())
        .map(|(name, c)| (name, &c.circles))
        .collect();
    let ties: Vec<&String> = found.values().flat_map(|c| &c.ties).collect();
    assert!(
        circular.is_empty(),
        "import circles (crate: files): {circular:#?}\ntied by: {ties:#?}"
    );
}

/// The circles the reader finds in a crate of `files` (path, text), rooted at `lib.rs`.
fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut krate = Crate::read(&dir.path().join("lib.rs"));
    circles(&krate.edges())
        .into_iter()
        .map(|c| {
            c.iter()
                .map(|f| f.strip_prefix(dir.path()).unwrap().display().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn the_reader_finds_a_circle_through_uses_paths_macros_and_re_exports() {
    let root = "mod a; mod b; mod c; pub use c::Shared;";
    // Through a `use` one way and a path in a macro's tokens the other.
    let found = circles_of(&[
        ("lib.rs", root),
        ("a.rs", "use crate::b::B; pub struct A;"),
        (
            "b.rs",
            "pub struct B; fn f() { println!(\"{:?}\", super::a::A); }",
        ),
        ("c.rs", "pub struct Shared;"),
    ]);
    assert_eq!(found, [["a.rs", "b.rs"]]);
    // Through a re-export at the root: the name is taken from the file defining it.
    let found = circles_of(&[
        ("lib.rs", root),
        ("a.rs", "pub struct A; fn f(_: crate::Shared) {}"),
        ("b.rs", ""),
        ("c.rs", "pub struct Shared; fn g(_: crate::a::A) {}"),
    ]);
    assert_eq!(found, [["a.rs", "c.rs"]]);
    // Test code is left out.
    let found = circles_of(&[
        ("lib.rs", root),
        (
            "a.rs",
            "pub struct A; #[cfg(test)] mod tests { use crate::b::B; }",
        ),
        ("b.rs", "pub struct B; type T = crate::a::A;"),
        ("c.rs", ""),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_module_taking_from_the_module_it_sits_in_is_no_circle() {
    let found = circles_of(&[
        ("lib.rs", "pub struct Error; mod m; pub use m::Thing;"),
        (
            "m/mod.rs",
            "mod inner; pub use inner::Thing; pub struct Config;",
        ),
        (
            "m/inner.rs",
            "use super::Config; pub struct Thing(crate::Error, Config);",
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
}
