//! Changes to the policy file that keep the rest of it as written (comments, order, other
//! keys): one entry added to or removed from an allow list, a new file from a preset. An edit
//! is checked as a whole file before it is written, and written whole (write-aside, rename).

use std::path::Path;

use super::{Problem, parse};
use crate::broker::egress::rules::{self, AllowEntry};

/// Whose allow list: every workspace's, or one workspace's additions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOf<'a> {
    Every,
    Workspace(&'a str),
}

/// What an edit did: the new text, whether it changed, and what to tell the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    pub text: String,
    pub changed: bool,
    pub note: String,
}

/// The presets of `policy init`.
pub const PRESETS: &str = "'open', 'balanced' or 'closed'";

/// A new file's text for a preset.
pub fn preset(name: &str) -> Option<String> {
    let head = "# The sandbox policy of this Po home (docs/configuration.md#the-policy-file).\n# `po-sandbox policy show` says what is in force and where each value comes from;\n# `po-sandbox allow <host:port>` and `deny` change the allow list, keeping these comments.\n";
    let body = match name {
        "open" => "# Preset \"open\": containers reach the public internet (never this machine, its\n# networks or the cloud's metadata address).\nnetwork: open\n".to_string(),
        "balanced" => format!(
            "# Preset \"balanced\": containers reach only the hosts listed here, through the host's\n# egress proxy (package registries and git hosts to start with).\nnetwork: allowlist\nallow:\n{}",
            block_items(&rules::DEFAULT_ALLOW.iter().map(|e| e.to_string()).collect::<Vec<_>>(), "  ")
        ),
        "closed" => "# Preset \"closed\": containers reach nothing but the credential broker.\nnetwork: none\n".to_string(),
        _ => return None,
    };
    Some(format!("{head}{body}"))
}

/// An entry as the person typed it (`host`, `host:port`, `*.suffix:port`): checked, port 443
/// when none is given.
pub fn entry(raw: &str) -> Result<AllowEntry, String> {
    let raw = raw.trim();
    let has_port = match raw.strip_prefix('[') {
        Some(rest) => rest
            .split_once(']')
            .is_some_and(|(_, after)| after.starts_with(':')),
        None => raw.contains(':'),
    };
    let full = match has_port {
        true => raw.to_string(),
        false => format!("{raw}:443"),
    };
    rules::parse_allow(&full)
}

/// `text` with `entry` in the list of `of` (the default list written out first when the file
/// has no list of every workspace: one entry added must not take the others away).
pub fn allow(text: &str, of: ListOf<'_>, entry: &AllowEntry) -> Result<Edited, Problem> {
    let file = parse(text)?;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let (items, line) = match of {
        ListOf::Every => (
            file.allow.as_ref().map(|a| &a.value),
            file.allow.as_ref().map(|a| a.line),
        ),
        ListOf::Workspace(id) => {
            let at = file.workspaces.get(id);
            (at.map(|a| &a.value), at.map(|a| a.line))
        }
    };
    if let (Some(items), Some(line)) = (items, line)
        && items.contains(entry)
    {
        return Ok(unchanged(
            text,
            format!("{entry} is already in the list at line {line}"),
        ));
    }
    if of == ListOf::Every && items.is_none() && rules::default_allow().contains(entry) {
        let note = format!("{entry} is already allowed by the default list");
        return Ok(unchanged(text, note));
    }
    let shown = entry.to_string();
    match (of, items) {
        (ListOf::Every, None) => {
            let mut all: Vec<String> = rules::DEFAULT_ALLOW.iter().map(|e| e.to_string()).collect();
            all.push(shown.clone());
            push_block(
                &mut lines,
                "allow:",
                "# The default list, and what `po-sandbox allow` added.",
                &all,
                "  ",
            );
        }
        (ListOf::Workspace(id), None) => match find_key(&lines, &path_of(of)) {
            // `allow:` with nothing under it (null).
            Some(key) => insert_item(&mut lines, key, &shown)?,
            None => add_workspace_list(&mut lines, id, &shown)?,
        },
        (_, Some(_)) => {
            let path = path_of(of);
            let key = find_key(&lines, &path).ok_or_else(|| flow_problem(&path))?;
            insert_item(&mut lines, key, &shown)?;
        }
    }
    finish(lines, format!("{shown} added to {}", list_name(of)))
}

/// `text` without `entry` in the list of `of`. An entry the default list holds is taken out of
/// it (the list then written out); one a wildcard allows is refused, naming the wildcard.
pub fn deny(text: &str, of: ListOf<'_>, entry: &AllowEntry) -> Result<Edited, Problem> {
    let file = parse(text)?;
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let items = match of {
        ListOf::Every => file.allow.as_ref().map(|a| a.value.clone()),
        ListOf::Workspace(id) => file.workspaces.get(id).map(|a| a.value.clone()),
    };
    let shown = entry.to_string();
    let target = match entry {
        AllowEntry::Exact(t) => Some(t.clone()),
        AllowEntry::Suffix { .. } => None,
    };
    match items {
        None if of == ListOf::Every && rules::default_allow().contains(entry) => {
            let rest: Vec<String> = rules::DEFAULT_ALLOW
                .iter()
                .filter(|e| rules::parse_allow(e).ok().as_ref() != Some(entry))
                .map(|e| e.to_string())
                .collect();
            push_block(
                &mut lines,
                "allow:",
                &format!("# The default list without {shown}."),
                &rest,
                "  ",
            );
            finish(lines, format!("{shown} taken out of the default list"))
        }
        Some(items) if items.contains(entry) => {
            let path = path_of(of);
            let key = find_key(&lines, &path).ok_or_else(|| flow_problem(&path))?;
            remove_item(&mut lines, key, entry)?;
            finish(lines, format!("{shown} removed from {}", list_name(of)))
        }
        items => {
            let list = items.unwrap_or_else(rules::default_allow);
            let wildcard = target.and_then(|t| {
                list.iter().find(|e| {
                    matches!(e, AllowEntry::Suffix { .. })
                        && rules::allowed(std::slice::from_ref(e), &t)
                })
            });
            match wildcard {
                Some(w) => Err(Problem {
                    line: None,
                    field: path_of(of).join("."),
                    reason: format!(
                        "{shown} is allowed by the wildcard {w}, which cannot leave one name out: deny {w} and allow the names that should stay"
                    ),
                }),
                None => Ok(unchanged(
                    text,
                    format!("{shown} is not in {}: nothing to deny", list_name(of)),
                )),
            }
        }
    }
}

/// Writes `text` as the policy file of `po_home` (made when missing), whole.
pub fn write(po_home: &Path, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(po_home)?;
    crate::write_aside::write_whole(&super::path_in(po_home), text.as_bytes(), false)
}

fn unchanged(text: &str, note: String) -> Edited {
    Edited {
        text: text.to_string(),
        changed: false,
        note,
    }
}

/// The edited lines, checked as a whole file.
fn finish(lines: Vec<String>, note: String) -> Result<Edited, Problem> {
    let mut text = lines.join("\n");
    text.push('\n');
    parse(&text).map_err(|p| Problem {
        line: None,
        field: p.field,
        reason: format!(
            "this change would leave the file not good ({}): make it by hand",
            p.reason
        ),
    })?;
    Ok(Edited {
        text,
        changed: true,
        note,
    })
}

fn path_of(of: ListOf<'_>) -> Vec<String> {
    match of {
        ListOf::Every => vec!["allow".into()],
        ListOf::Workspace(id) => vec!["workspaces".into(), id.into(), "allow".into()],
    }
}

fn list_name(of: ListOf<'_>) -> String {
    match of {
        ListOf::Every => "the allow list of every workspace".into(),
        ListOf::Workspace(id) => format!("the allow list of workspace {id}"),
    }
}

fn flow_problem(path: &[String]) -> Problem {
    Problem {
        line: None,
        field: path.join("."),
        reason: "it is not written as a block (one key per line): edit this part by hand".into(),
    }
}

/// An entry as a list item: quoted when YAML would read it otherwise (`*` starts an alias).
fn item(entry: &str) -> String {
    match entry.starts_with('*') || entry.starts_with('[') {
        true => format!("\"{entry}\""),
        false => entry.to_string(),
    }
}

fn block_items(entries: &[String], indent: &str) -> String {
    entries
        .iter()
        .map(|e| format!("{indent}- {}\n", item(e)))
        .collect()
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_blank(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The index of the line of the key at `path`, each key inside the one before.
fn find_key(lines: &[String], path: &[String]) -> Option<usize> {
    let (mut from, mut to, mut parent): (usize, usize, Option<usize>) = (0, lines.len(), None);
    let mut found = None;
    for key in path {
        let at = (from..to).find(|&i| {
            let l = &lines[i];
            !is_blank(l)
                && parent.is_none_or(|p| indent_of(l) > p)
                && (parent.is_some() || indent_of(l) == 0)
                && l.trim_start().starts_with(&format!("{key}:"))
        })?;
        let own = indent_of(&lines[at]);
        let end = (at + 1..to)
            .find(|&i| {
                !is_blank(&lines[i])
                    && indent_of(&lines[i]) <= own
                    && !lines[i].trim_start().starts_with("- ")
            })
            .unwrap_or(to);
        (from, to, parent, found) = (at + 1, end, Some(own), Some(at));
    }
    found
}

/// The value written after a key on its own line (comment dropped).
fn inline_value(line: &str) -> &str {
    let after = line.split_once(':').map_or("", |(_, v)| v);
    after.split(" #").next().unwrap_or("").trim()
}

/// The item lines of the block list whose key is at `key`: their indexes.
fn items_of(lines: &[String], key: usize) -> Vec<usize> {
    let own = indent_of(&lines[key]);
    let mut items = Vec::new();
    for (i, l) in lines.iter().enumerate().skip(key + 1) {
        if is_blank(l) {
            continue;
        }
        if indent_of(l) < own || (indent_of(l) == own && !l.trim_start().starts_with("- ")) {
            break;
        }
        if l.trim_start().starts_with("- ") {
            items.push(i);
        }
    }
    items
}

/// A flow list (`[]`, `[a, b]`) or nothing after the key becomes a block list.
fn as_block(lines: &mut Vec<String>, key: usize) -> Result<(), Problem> {
    let value = inline_value(&lines[key]).to_string();
    if value.is_empty() {
        return Ok(());
    }
    let inside = match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        Some(inside) => inside,
        None if value == "~" || value == "null" => "",
        None => return Err(flow_problem(&[lines[key].trim().to_string()])),
    };
    let entries: Vec<String> = inside
        .split(',')
        .map(|e| e.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        .filter(|e| !e.is_empty())
        .collect();
    let indent = " ".repeat(indent_of(&lines[key]));
    let comment = comment_of(&lines[key]);
    let key_text = lines[key]
        .trim_start()
        .split(':')
        .next()
        .unwrap_or("allow")
        .to_string();
    lines[key] = format!("{indent}{key_text}:{comment}");
    let items = block_items(&entries, &format!("{indent}  "));
    for (n, l) in items.lines().enumerate() {
        lines.insert(key + 1 + n, l.to_string());
    }
    Ok(())
}

fn insert_item(lines: &mut Vec<String>, key: usize, entry: &str) -> Result<(), Problem> {
    as_block(lines, key)?;
    let items = items_of(lines, key);
    let (after, indent) = match items.last() {
        Some(&last) => (last, " ".repeat(indent_of(&lines[last]))),
        None => (key, " ".repeat(indent_of(&lines[key]) + 2)),
    };
    lines.insert(after + 1, format!("{indent}- {}", item(entry)));
    Ok(())
}

fn remove_item(lines: &mut Vec<String>, key: usize, entry: &AllowEntry) -> Result<(), Problem> {
    as_block(lines, key)?;
    let gone: Vec<usize> = items_of(lines, key)
        .into_iter()
        .filter(|&i| {
            let value = lines[i].trim_start()[2..]
                .split(" #")
                .next()
                .unwrap_or("")
                .trim();
            let value = value.trim_matches(|c| c == '"' || c == '\'');
            rules::parse_allow(value).ok().as_ref() == Some(entry)
        })
        .collect();
    for i in gone.into_iter().rev() {
        lines.remove(i);
    }
    // An empty list is written `[]`: an `allow:` with nothing would read as no list at all,
    // which for every workspace is the default list.
    if items_of(lines, key).is_empty() {
        let indent = " ".repeat(indent_of(&lines[key]));
        let name = lines[key]
            .trim_start()
            .split(':')
            .next()
            .unwrap_or("allow")
            .to_string();
        lines[key] = format!("{indent}{name}: []{}", comment_of(&lines[key]));
    }
    Ok(())
}

/// The comment at the end of a line (with its ` #`), or nothing.
fn comment_of(line: &str) -> String {
    line.split_once(" #")
        .map(|(_, c)| format!(" #{c}"))
        .unwrap_or_default()
}

/// A top-level key with a block list, appended at the end of the file.
fn push_block(lines: &mut Vec<String>, key: &str, comment: &str, entries: &[String], indent: &str) {
    if let Some(at) = lines
        .iter()
        .position(|l| indent_of(l) == 0 && l.starts_with(key))
    {
        // `allow:` with nothing (null, `~`): the list goes under it.
        lines[at] = format!("{key}{}", comment_of(&lines[at]));
        let items = block_items(entries, indent);
        for (n, l) in items.lines().enumerate() {
            lines.insert(at + 1 + n, l.to_string());
        }
        return;
    }
    if lines.last().is_some_and(|l| !l.trim().is_empty()) {
        lines.push(String::new());
    }
    lines.push(comment.to_string());
    lines.push(key.to_string());
    lines.extend(block_items(entries, indent).lines().map(str::to_string));
}

/// `workspaces.<id>.allow` with one entry, made where it is missing.
fn add_workspace_list(lines: &mut Vec<String>, id: &str, entry: &str) -> Result<(), Problem> {
    let top = vec!["workspaces".to_string()];
    let Some(ws) = find_key(lines, &top) else {
        if lines.last().is_some_and(|l| !l.trim().is_empty()) {
            lines.push(String::new());
        }
        lines.push("workspaces:".into());
        lines.push(format!("  {id}:"));
        lines.push("    allow:".into());
        lines.push(format!("      - {}", item(entry)));
        return Ok(());
    };
    if !matches!(inline_value(&lines[ws]), "" | "{}") {
        return Err(flow_problem(&top));
    }
    lines[ws] = "workspaces:".into();
    let own = vec!["workspaces".to_string(), id.to_string()];
    match find_key(lines, &own) {
        Some(at) => {
            if !matches!(inline_value(&lines[at]), "" | "{}") {
                return Err(flow_problem(&own));
            }
            let indent = " ".repeat(indent_of(&lines[at]));
            lines[at] = format!("{indent}{id}:");
            lines.insert(at + 1, format!("{indent}  allow:"));
            lines.insert(at + 2, format!("{indent}    - {}", item(entry)));
        }
        None => {
            lines.insert(ws + 1, format!("  {id}:"));
            lines.insert(ws + 2, "    allow:".into());
            lines.insert(ws + 3, format!("      - {}", item(entry)));
        }
    }
    Ok(())
}
