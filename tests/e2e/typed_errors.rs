//! No product code answers with a bare string for an error (ARCHITECTURE.md, "Errors"):
//! every library and binary of the workspace but the benchmark's, read with `syn` as the
//! compiler builds it (its `#[cfg(test)]` items and modules left out), names no `Result`
//! whose error is a `String` or a `&str`, or a tuple with one in it: not in a return type,
//! nor a field, a parameter or a task's handle, where it comes back as one.

use crate::imports::{is_test, item_attrs, path_attr};
use crate::rebuilds::workspace_metadata;
use crate::util::repo_root;
use std::path::{Path, PathBuf};
use syn::visit_mut::{self, VisitMut};

/// Walks one module tree, following `mod name;` into its files.
struct Finder<'a> {
    /// The file being read.
    file: PathBuf,
    /// Where the files of its `mod child;` declarations are.
    child_dir: PathBuf,
    /// The named items (functions, types) the walk is inside, innermost last.
    within: Vec<String>,
    /// `file: item` for each string error found.
    hits: &'a mut Vec<String>,
}

impl Finder<'_> {
    fn read(&mut self) {
        let text = std::fs::read_to_string(&self.file)
            .unwrap_or_else(|e| panic!("{}: {e}", self.file.display()));
        let mut parsed =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", self.file.display()));
        self.visit_file_mut(&mut parsed);
    }

    fn hit(&mut self) {
        let shown = self.file.strip_prefix(repo_root()).unwrap_or(&self.file);
        let item = self.within.last().map_or("(file)", String::as_str);
        self.hits.push(format!("{}: {item}", shown.display()));
    }
}

impl VisitMut for Finder<'_> {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        if is_test(item_attrs(item)) {
            return;
        }
        let name = match item {
            syn::Item::Struct(s) => Some(format!("struct {}", s.ident)),
            syn::Item::Enum(e) => Some(format!("enum {}", e.ident)),
            syn::Item::Type(t) => Some(format!("type {}", t.ident)),
            _ => None,
        };
        let named = name.is_some();
        self.within.extend(name);
        visit_mut::visit_item_mut(self, item);
        if named {
            self.within.pop();
        }
    }

    fn visit_impl_item_mut(&mut self, item: &mut syn::ImplItem) {
        let test = match item {
            syn::ImplItem::Fn(f) => is_test(&f.attrs),
            syn::ImplItem::Const(c) => is_test(&c.attrs),
            _ => false,
        };
        if !test {
            visit_mut::visit_impl_item_mut(self, item);
        }
    }

    fn visit_trait_item_mut(&mut self, item: &mut syn::TraitItem) {
        if !matches!(item, syn::TraitItem::Fn(f) if is_test(&f.attrs)) {
            visit_mut::visit_trait_item_mut(self, item);
        }
    }

    fn visit_signature_mut(&mut self, sig: &mut syn::Signature) {
        self.within.push(format!("fn {}", sig.ident));
        visit_mut::visit_signature_mut(self, sig);
        self.within.pop();
    }

    fn visit_type_path_mut(&mut self, path: &mut syn::TypePath) {
        if string_error(path) {
            self.hit();
        }
        visit_mut::visit_type_path_mut(self, path);
    }

    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        let name = m.ident.to_string();
        let inner_dir = self.child_dir.join(&name);
        if let Some((_, items)) = &mut m.content {
            let outer = std::mem::replace(&mut self.child_dir, inner_dir);
            for item in items {
                self.visit_item_mut(item);
            }
            self.child_dir = outer;
            return;
        }
        let (file, child_dir) = match path_attr(&m.attrs) {
            Some(path) => {
                let file = self.child_dir.join(path);
                let dir = file.parent().unwrap().to_path_buf();
                (file, dir)
            }
            None => {
                let flat = self.child_dir.join(format!("{name}.rs"));
                if flat.exists() {
                    (flat, inner_dir)
                } else {
                    (inner_dir.join("mod.rs"), inner_dir)
                }
            }
        };
        Finder {
            file,
            child_dir,
            within: Vec::new(),
            hits: self.hits,
        }
        .read();
    }
}

/// Whether `path` is a `Result<_, String>`, `Result<_, &str>`, or a `Result` whose error
/// is a tuple with either in it.
fn string_error(path: &syn::TypePath) -> bool {
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    last.ident == "Result"
        && args
            .args
            .iter()
            .filter_map(|a| match a {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .nth(1)
            .is_some_and(stringy)
}

/// A `String`, a `&str`, or a tuple with one in it.
fn stringy(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "String"),
        syn::Type::Reference(r) => matches!(&*r.elem, syn::Type::Path(p) if p.path.is_ident("str")),
        syn::Type::Tuple(t) => t.elems.iter().any(stringy),
        syn::Type::Paren(p) => stringy(&p.elem),
        syn::Type::Group(g) => stringy(&g.elem),
        _ => false,
    }
}

/// The string errors in the crate whose root is `root`.
fn string_errors(root: &Path, hits: &mut Vec<String>) {
    Finder {
        file: root.to_path_buf(),
        child_dir: root.parent().unwrap().to_path_buf(),
        within: Vec::new(),
        hits,
    }
    .read();
}

#[test]
fn no_product_code_has_a_string_error() {
    let root = repo_root();
    let bench = [root.join("bench"), root.join("bench-bin")];
    let metadata = workspace_metadata();
    let mut hits = Vec::new();
    let mut crates = 0;
    for package in metadata["packages"].as_array().unwrap() {
        for target in package["targets"].as_array().unwrap() {
            let kinds = target["kind"].as_array().unwrap();
            if !kinds.iter().any(|k| k == "lib" || k == "bin") {
                continue;
            }
            let src = Path::new(target["src_path"].as_str().unwrap());
            if bench.iter().any(|b| src.starts_with(b)) {
                continue;
            }
            crates += 1;
            string_errors(src, &mut hits);
        }
    }
    assert!(crates >= 10, "read only {crates} libraries and binaries");
    assert!(
        hits.is_empty(),
        "string errors in product code (give them a typed error, ARCHITECTURE.md \"Errors\"):\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_finder_sees_string_errors_in_any_type_and_skips_test_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        r#"
        mod sub;
        pub fn plain() -> Result<(), String> { Ok(()) }
        pub fn typed() -> Result<(), std::io::Error> { Ok(()) }
        pub fn text() -> Result<u8, &'static str> { Ok(1) }
        pub fn tuple() -> Result<u8, (&'static str, String)> { Ok(1) }
        pub fn nested() -> Option<std::result::Result<u8, String>> { None }
        pub fn ok_text() -> Result<String, std::fmt::Error> { Ok(String::new()) }
        pub struct S;
        impl S {
            pub async fn method(&self) -> Result<(), String> { Ok(()) }
            #[cfg(test)]
            fn test_only(&self) -> Result<(), String> { Ok(()) }
        }
        pub trait T { fn required(&self) -> Result<(), String>; }
        pub struct Task { handle: Option<Box<Result<(), String>>> }
        pub fn takes(done: Vec<Result<(), &str>>) -> usize { done.len() }
        #[cfg(test)]
        mod tests { fn helper() -> Result<(), String> { Ok(()) } }
        #[cfg(test)]
        mod file_tests;
        "#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("sub.rs"),
        "pub fn in_sub() -> Result<(), String> { Ok(()) }\n",
    )
    .unwrap();
    let mut hits = Vec::new();
    string_errors(&dir.path().join("lib.rs"), &mut hits);
    let items: Vec<&str> = hits
        .iter()
        .map(|h| h.rsplit(": ").next().unwrap())
        .collect();
    assert_eq!(
        items,
        [
            "fn in_sub",
            "fn plain",
            "fn text",
            "fn tuple",
            "fn nested",
            "fn method",
            "fn required",
            "struct Task",
            "fn takes"
        ],
        "{hits:?}"
    );
}
