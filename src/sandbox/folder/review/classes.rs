//! Which workspace files the host may execute (or read as instructions) although they are the
//! agent's legitimate work, and why: the classes `review` reports.

use napi_derive::napi;

/// A class of host-executed file.
#[napi(string_enum = "kebab-case")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewClass {
    /// `package.json`: its `scripts`.
    PackageScripts,
    /// `Makefile`, `makefile`, `GNUmakefile`.
    Makefile,
    /// `.cargo/config.toml`, `.cargo/config`.
    CargoConfig,
    /// `build.rs`.
    BuildScript,
    /// `.npmrc`.
    Npmrc,
    /// `.yarnrc.yml`, `.yarnrc`.
    YarnConfig,
    /// A file under `.yarn/releases`.
    YarnRelease,
    /// `mise.toml`, `.mise.toml`, `.tool-versions`.
    ToolVersions,
    /// A file under `.github/workflows`.
    Workflow,
    /// `AGENTS.md`, `CLAUDE.md`.
    AgentInstructions,
    /// A `.git` folder or file below the top level.
    NestedGit,
    /// `.envrc`.
    Direnv,
    /// A gitlink in a repository's index (a folder host git status enters as a submodule).
    Gitlink,
    /// A folder shaped like a bare repository (`HEAD`, `objects/`, `refs/`).
    BareRepository,
    /// `justfile` (any case, or `.justfile`), `Taskfile.yml` / `.yaml` (and their `taskfile`,
    /// `.dist` forms).
    TaskRunner,
}

impl ReviewClass {
    /// Why the host may run (or heed) a file of this class.
    pub fn reason(self) -> &'static str {
        match self {
            ReviewClass::PackageScripts => {
                "npm, yarn and pnpm run its scripts on the host (install runs its lifecycle scripts)"
            }
            ReviewClass::Makefile => "make on the host runs its recipes",
            ReviewClass::CargoConfig => {
                "cargo on the host runs the runners, linkers, aliases and flags it names"
            }
            ReviewClass::BuildScript => "cargo compiles and runs it on the host at every build",
            ReviewClass::Npmrc => {
                "npm on the host uses the registry, script shell and node options it names"
            }
            ReviewClass::YarnConfig => {
                "yarn on the host runs the yarnPath and loads the plugins it names"
            }
            ReviewClass::YarnRelease => "yarn on the host runs it when .yarnrc.yml points at it",
            ReviewClass::ToolVersions => {
                "mise or asdf on the host installs the tools and runs the tasks and hooks it names"
            }
            ReviewClass::Workflow => {
                "CI runs it with the repository's secrets once pushed (act runs it on the host)"
            }
            ReviewClass::AgentInstructions => {
                "the next agent session on the host reads it as instructions"
            }
            ReviewClass::NestedGit => {
                "host git, IDEs and shell prompts there run the hooks and fsmonitor its config names"
            }
            ReviewClass::Direnv => {
                "direnv on the host runs it on cd once allowed (direnv allow); a new one waits for that"
            }
            ReviewClass::TaskRunner => "just or task on the host runs its recipes",
            ReviewClass::Gitlink => {
                "host git status enters its folder as a submodule's and runs the fsmonitor of the git folder it names (the layer's diff.ignoreSubmodules stops that while set)"
            }
            ReviewClass::BareRepository => {
                "host git run in it takes it as a repository and runs what its config names, unless safe.bareRepository is explicit"
            }
        }
    }
}

/// A name as a case-insensitive file system compares it: each character's full upper case,
/// then its lower case (so `MAKEFILE`, `Makefile`, the Kelvin sign's `MA\u{212A}EFILE` and
/// `ma\u{17F}e` for `mase` all meet). Names are compared folded everywhere: on a case-sensitive
/// host a folded match only makes the check more careful, and on a case-insensitive one (macOS
/// by default, Windows) a host tool opens `.Claude/settings.json` as `.claude/settings.json`.
pub fn fold(name: &str) -> String {
    name.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect()
}

/// The class of a file at `parts` (its path below the workspace, one name each), if any, its
/// names compared folded ([`fold`]). A `.git` entry is classed by the walk, which alone knows
/// whether it is the top one.
pub fn class_of(parts: &[&str]) -> Option<ReviewClass> {
    let folded: Vec<String> = parts.iter().map(|p| fold(p)).collect();
    let (name, dirs) = folded.split_last()?;
    let under = |a: &str, b: &str| dirs.windows(2).any(|w| w[0] == a && w[1] == b);
    let class = match name.as_str() {
        "package.json" => ReviewClass::PackageScripts,
        "makefile" | "gnumakefile" => ReviewClass::Makefile,
        "config.toml" | "config" if dirs.last().map(String::as_str) == Some(".cargo") => {
            ReviewClass::CargoConfig
        }
        "build.rs" => ReviewClass::BuildScript,
        ".npmrc" => ReviewClass::Npmrc,
        ".yarnrc.yml" | ".yarnrc" => ReviewClass::YarnConfig,
        "mise.toml" | ".mise.toml" | ".tool-versions" => ReviewClass::ToolVersions,
        "agents.md" | "claude.md" => ReviewClass::AgentInstructions,
        ".envrc" => ReviewClass::Direnv,
        "justfile" | ".justfile" => ReviewClass::TaskRunner,
        "taskfile.yml" | "taskfile.yaml" | "taskfile.dist.yml" | "taskfile.dist.yaml" => {
            ReviewClass::TaskRunner
        }
        _ if under(".yarn", "releases") => ReviewClass::YarnRelease,
        _ if under(".github", "workflows") => ReviewClass::Workflow,
        _ => return None,
    };
    Some(class)
}
