//! `.posandboxignore`: what a folder without git leaves out of its copy, gitignore-style
//! (`#` comments, `!` re-includes, a leading `/` anchors, a trailing `/` means folders only,
//! `*`, `?` and `**`). Without the file: `node_modules`, `target` and `.venv`.

use std::path::Path;

/// The file a folder's owner lists what its copy leaves out in.
pub const IGNORE_FILE: &str = ".posandboxignore";
/// What a copy leaves out when the folder has no [`IGNORE_FILE`].
pub const DEFAULT_IGNORED: [&str; 3] = ["node_modules/", "target/", ".venv/"];

/// One pattern line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    glob: String,
    negated: bool,
    dir_only: bool,
    /// Matched against the whole relative path (it had a `/` before its end), not a name.
    anchored: bool,
}

/// The rules of one folder.
#[derive(Debug, Clone, Default)]
pub struct IgnoreRules(Vec<Rule>);

impl IgnoreRules {
    /// The folder's [`IGNORE_FILE`], else [`DEFAULT_IGNORED`].
    #[cfg(test)]
    pub fn of_folder(root: &Path) -> IgnoreRules {
        IgnoreRules::parse(&IgnoreRules::text_of_folder(root))
    }

    /// The lines of the folder's [`IGNORE_FILE`], else [`DEFAULT_IGNORED`]'s.
    pub fn text_of_folder(root: &Path) -> String {
        std::fs::read_to_string(root.join(IGNORE_FILE))
            .unwrap_or_else(|_| DEFAULT_IGNORED.join("\n"))
    }

    /// The rules as JSON `[glob, negated, dirOnly, anchored]` arrays (for the copy's listing).
    pub fn to_json(&self) -> String {
        let rules: Vec<_> = self
            .0
            .iter()
            .map(|r| serde_json::json!([r.glob, r.negated, r.dir_only, r.anchored]))
            .collect();
        serde_json::Value::Array(rules).to_string()
    }

    /// Rules from gitignore-style lines.
    pub fn parse(text: &str) -> IgnoreRules {
        let rules = text
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|line| {
                let (negated, line) = match line.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, line.strip_prefix('\\').unwrap_or(line)),
                };
                let dir_only = line.ends_with('/');
                let body = line.trim_end_matches('/');
                let anchored = body.contains('/');
                Rule {
                    glob: body.trim_start_matches('/').to_string(),
                    negated,
                    dir_only,
                    anchored,
                }
            })
            .filter(|r| !r.glob.is_empty())
            .collect();
        IgnoreRules(rules)
    }

    /// Whether `rel` (relative, `/`-separated) is left out; the last matching rule decides.
    pub fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let mut out = false;
        for r in &self.0 {
            if r.dir_only && !is_dir {
                continue;
            }
            let hit = match r.anchored {
                true => glob(r.glob.as_bytes(), rel.as_bytes()),
                false => glob(r.glob.as_bytes(), name.as_bytes()),
            };
            if hit {
                out = !r.negated;
            }
        }
        out
    }
}

/// Glob match: `*` and `?` stop at `/`, `**` crosses it.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p {
        [] => s.is_empty(),
        [b'*', b'*', rest @ ..] => {
            let rest = rest.strip_prefix(b"/").unwrap_or(rest);
            (0..=s.len()).any(|i| glob(rest, &s[i..]))
        }
        [b'*', rest @ ..] => {
            let stop = s.iter().position(|&c| c == b'/').unwrap_or(s.len());
            (0..=stop).any(|i| glob(rest, &s[i..]))
        }
        [b'?', rest @ ..] => matches!(s, [c, tail @ ..] if *c != b'/' && glob(rest, tail)),
        [c, rest @ ..] => matches!(s, [d, tail @ ..] if d == c && glob(rest, tail)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_style_rules() {
        let r = IgnoreRules::parse("# c\nnode_modules/\n*.log\n!keep.log\n/build\ndocs/**/*.tmp\n");
        for (path, dir, out) in [
            ("node_modules", true, true),
            ("a/node_modules", true, true),
            ("node_modules", false, false),
            ("x.log", false, true),
            ("a/b/x.log", false, true),
            ("keep.log", false, false),
            ("build", true, true),
            ("a/build", true, false),
            ("docs/x.tmp", false, true),
            ("docs/a/b/x.tmp", false, true),
            ("src/main.rs", false, false),
        ] {
            assert_eq!(r.ignored(path, dir), out, "{path}");
        }
    }

    #[test]
    fn defaults_without_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = IgnoreRules::of_folder(dir.path());
        assert!(r.ignored("node_modules", true) && r.ignored("x/target", true));
        assert!(r.ignored(".venv", true) && !r.ignored("src", true));
        std::fs::write(dir.path().join(IGNORE_FILE), "*.bin\n").unwrap();
        let r = IgnoreRules::of_folder(dir.path());
        assert!(!r.ignored("node_modules", true) && r.ignored("a.bin", false));
    }
}
