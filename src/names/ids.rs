//! Workspace ids: single safe path segments, checked before any other I/O.

use crate::error::{Error, Result};

/// The longest workspace id accepted.
pub const MAX_ID_LEN: usize = 128;

/// Checks a workspace id: 1–128 of `[A-Za-z0-9._-]`, not starting with `.` (so never `.`,
/// `..` or a hidden name) — a single path segment that is also valid in container names.
pub fn check_id(id: &str) -> Result<()> {
    let invalid = |reason: String| {
        Err(Error::WorkspaceInvalid {
            what: format!("id {id:?}"),
            reason,
        })
    };
    if id.is_empty() {
        return invalid("it is empty; use a name like 'my-project'".into());
    }
    if id.len() > MAX_ID_LEN {
        return invalid(format!(
            "it is {} bytes long; the limit is {MAX_ID_LEN}",
            id.len()
        ));
    }
    if id.starts_with('.') {
        return invalid("it starts with '.'; ids are plain folder names like 'my-project'".into());
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return invalid(format!(
            "it contains {c:?}; ids are single path segments of letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}
