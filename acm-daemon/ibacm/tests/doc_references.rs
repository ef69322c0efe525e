//! Every citation of the repository's notes (`docs/...md`, optionally with `§` section
//! numbers) names a page that exists and sections that are headings of it; every
//! relative link in a Markdown file leads to a file; and no citation of the reference
//! specification those notes replaced is left (see `docs/README.md`, "Citing these
//! pages").
//!
//! A citation is a path starting with `docs/` and ending in `.md`, then optionally a
//! section list: `§N` (or `§N.M`), further numbers each after `,`, `and`, `or`, `to`,
//! `–` or `-` and each with its own `§`. A section exists when the page has a heading
//! (`#`s) that starts with its number. Inside `docs/`, a `§` that follows no path names
//! a section of the same page; elsewhere it is an error, unless the line cites the
//! InfiniBand Architecture Specification ("IBTA Vol 1 §...").

#[path = "support/workspace.rs"]
mod workspace;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's text files worth checking: sources, manifests, scripts, documents.
fn files(root: &Path) -> Vec<PathBuf> {
    const SKIP_DIRS: &[&str] = &["target", "corpus", "artifacts", "node_modules"];
    const EXTENSIONS: &[&str] = &["rs", "md", "toml", "sh", "py", "txt", "yml", "yaml"];
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                // Hidden directories hold tools' state, except CI's scripts.
                if (name.starts_with('.') && name != ".ci") || SKIP_DIRS.contains(&name.as_str()) {
                    continue;
                }
                stack.push(path);
            } else if kind.is_file() {
                let in_ci = dir.file_name().is_some_and(|d| d == ".ci");
                let ext_ok = path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| EXTENSIONS.contains(&e));
                if ext_ok || in_ci {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    out
}

/// The section numbers of a Markdown page: headings that start with a number.
fn headings(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('#')?.trim_start_matches('#');
            let rest = rest.strip_prefix(' ')?.trim_start();
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let number = number.trim_end_matches('.');
            (!number.is_empty()).then(|| number.to_owned())
        })
        .collect()
}

/// A `§` at byte `at` of `line`: its section number and the byte after it.
fn section_at(line: &str, at: usize) -> Option<(String, usize)> {
    let rest = line.get(at..)?.strip_prefix('§')?;
    let skipped = rest.len() - rest.trim_start().len();
    let rest = rest.trim_start();
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let number = number.trim_end_matches('.');
    if number.is_empty() || !number.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    Some((
        number.to_owned(),
        at + '§'.len_utf8() + skipped + number.len(),
    ))
}

/// After a citation's path (or section) ending at `at`: the next `§` of its list, if
/// any, as the byte where it starts.
fn next_in_list(line: &str, at: usize, first: bool) -> Option<usize> {
    let rest = &line[at..];
    let trimmed = rest.trim_start_matches([' ', '`']);
    let mut pos = at + (rest.len() - trimmed.len());
    if !first {
        let sep = ["and ", "or ", "to ", ",", "–", "-", "&"]
            .iter()
            .find(|s| trimmed.starts_with(**s))?;
        let after = &trimmed[sep.len()..];
        let after_trim = after.trim_start_matches([' ', '`']);
        pos += sep.len() + (after.len() - after_trim.len());
    }
    line[pos..].starts_with('§').then_some(pos)
}

/// One citation found: the page (from the repository root) and its sections.
#[derive(Debug)]
struct Citation {
    line: usize,
    page: String,
    sections: Vec<String>,
}

/// The citations in `text`, and the byte ranges of each line's `§`s they account for.
fn citations(text: &str) -> (Vec<Citation>, Vec<(usize, usize)>) {
    let mut found = Vec::new();
    let mut used = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(i) = line[from..].find("docs/").map(|i| i + from) {
            from = i + 1;
            let before = line[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || "/.-_".contains(c)) {
                continue;
            }
            let path_len = line[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                .unwrap_or(line.len() - i);
            let path = line[i..i + path_len].trim_end_matches('.');
            let Some(stem) = path.strip_suffix(".md") else {
                continue;
            };
            if stem.ends_with('/') {
                continue;
            }
            let mut sections = Vec::new();
            let mut at = i + path.len();
            let mut first = true;
            while let Some(pos) = next_in_list(line, at, first) {
                let Some((number, end)) = section_at(line, pos) else {
                    break;
                };
                used.push((n, pos));
                sections.push(number);
                at = end;
                first = false;
            }
            found.push(Citation {
                line: n + 1,
                page: path.to_owned(),
                sections,
            });
        }
    }
    (found, used)
}

/// Whether `text` cites the old specification: "spec" (any case, as a word) followed
/// by a section number, `§`, or "section N"; or the name of its file.
fn old_spec_citations(text: &str) -> Vec<(usize, String)> {
    let old_name = ["ibacm", "-spec"].concat();
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        if lower.contains(&old_name) {
            out.push((n + 1, line.trim().to_owned()));
            continue;
        }
        let mut from = 0;
        while let Some(i) = lower[from..].find("spec").map(|i| i + from) {
            from = i + 4;
            if lower[..i]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
            {
                continue;
            }
            let rest = lower[i + 4..].trim_start();
            let rest = rest.strip_prefix("section").unwrap_or(rest).trim_start();
            let rest = rest.strip_prefix('§').unwrap_or(rest).trim_start();
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                out.push((n + 1, line.trim().to_owned()));
                break;
            }
        }
    }
    out
}

/// Relative link targets of a Markdown text: `](target)`, without anchors.
fn markdown_links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(i) = line[from..].find("](").map(|i| i + from) {
            from = i + 2;
            let Some(end) = line[i + 2..].find(')') else {
                continue;
            };
            let target = &line[i + 2..i + 2 + end];
            let target = target.split('#').next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            out.push((n + 1, target.to_owned()));
        }
    }
    out
}

#[test]
fn every_docs_reference_resolves() {
    let root = workspace::root();
    let this_file = Path::new(file!())
        .file_name()
        .expect("this file's name")
        .to_owned();
    let mut problems = Vec::new();
    let mut count = 0usize;
    for file in files(&root) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        // This file's own examples are not citations.
        if file.file_name() == Some(this_file.as_os_str()) {
            continue;
        }
        let rel = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let in_docs = rel.starts_with("docs/");
        let (cites, used) = citations(&text);
        for c in &cites {
            count += 1;
            let page = root.join(&c.page);
            let Ok(page_text) = std::fs::read_to_string(&page) else {
                problems.push(format!("{rel}:{}: {} does not exist", c.line, c.page));
                continue;
            };
            let have = headings(&page_text);
            for s in &c.sections {
                if !have.contains(s) {
                    problems.push(format!(
                        "{rel}:{}: {} has no section §{s} (a heading starting with {s})",
                        c.line, c.page
                    ));
                }
            }
        }
        // `§`s that belong to no citation.
        let own = headings(&text);
        for (n, line) in text.lines().enumerate() {
            for (pos, _) in line.match_indices('§') {
                if used.contains(&(n, pos)) {
                    continue;
                }
                let Some((number, _)) = section_at(line, pos) else {
                    continue;
                };
                if in_docs {
                    if !own.contains(&number) {
                        problems.push(format!(
                            "{rel}:{}: §{number} is not a section of this page",
                            n + 1
                        ));
                    }
                } else if !line.contains("IBTA") {
                    problems.push(format!(
                        "{rel}:{}: §{number} names no page: cite it as docs/<page>.md §{number}",
                        n + 1
                    ));
                }
            }
        }
        for (line, text) in old_spec_citations(&text) {
            problems.push(format!(
                "{rel}:{line}: cites the reference specification, which is not in the repository; cite docs/ instead: {text}"
            ));
        }
        if rel.ends_with(".md") {
            let dir = file.parent().unwrap_or(&root);
            for (line, target) in markdown_links(&text) {
                if !dir.join(&target).exists() {
                    problems.push(format!("{rel}:{line}: link target {target} does not exist"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} broken documentation reference(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
    assert!(count > 0, "no docs/ citation found: is the walk broken?");
}

#[test]
fn the_scanners_read_what_they_should() {
    let text = "see docs/a.md §2.1, §3 and §4–§5 or `docs/b.md` §7; docs/c.md. x §9";
    let (cites, used) = citations(text);
    let got: Vec<_> = cites
        .iter()
        .map(|c| (c.page.as_str(), c.sections.clone()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "docs/a.md",
                vec!["2.1".into(), "3".into(), "4".into(), "5".into()]
            ),
            ("docs/b.md", vec!["7".into()]),
            ("docs/c.md", vec![]),
        ]
    );
    // The last `§9` belongs to no citation.
    assert_eq!(used.len(), 5);
    assert!(citations("mydocs/a.md §1").0.is_empty());
    assert_eq!(
        headings("# T\n## 1. A\n### 1.2 B\n## Notes\n#### 10.3. C\n"),
        ["1", "1.2", "10.3"].map(String::from).into_iter().collect()
    );
    let old = ["spec ", "1.7"].concat();
    assert_eq!(old_spec_citations(&format!("x ({old})")).len(), 1);
    assert_eq!(old_spec_citations("Spec §8 vector").len(), 1);
    assert!(old_spec_citations("FabricSpec 1 and a spec file").is_empty());
    assert_eq!(
        markdown_links("[a](b.md#x) [c](https://e) [d](#y)"),
        [(1, "b.md".to_owned())]
    );
}
