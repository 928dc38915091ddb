//! Host-side work on the person's folder, nothing on the engine: a workspace's id and path
//! ([`workspace`]), the host locks ([`locks`]), guarded paths and git's indirections
//! ([`guards`]), the review of the files the host may run ([`review`]), and the host side of
//! clone mode ([`clone`]: the copy's source, manifests, the agent's work brought back).

pub(in crate::sandbox) mod clone;
pub(in crate::sandbox) mod guards;
pub(in crate::sandbox) mod locks;
pub(crate) mod owner;
pub(in crate::sandbox) mod review;
pub(in crate::sandbox) mod workspace;

pub(crate) use clone::{
    CloneApplied, CloneApplyOptions, CloneDiff, WorkspaceMode, check_branch as check_clone_branch,
    default_branch as clone_branch,
};
pub(crate) use guards::git_safety::{
    Bare as SafeBare, check as check_safe_bare, ensure as ensure_safe_bare,
    opted_in as safe_bare_opted_in, warning as safe_bare_warning,
};
pub(crate) use guards::{
    DEFAULT_GUARDED_PATHS, GUARDED_PATHS_VAR, Resolved as GuardsResolved,
    from_option as guarded_from_option, from_var as guarded_from_var, resolve as resolve_guards,
};
pub(crate) use locks::HostLock;
pub(crate) use review::{WorkspaceReview, review_off_thread};
pub(crate) use workspace::{
    Workspace, check_id as check_workspace_id, for_folder as workspace_for_folder,
    resolve as resolve_workspace, resolve_po_home,
    resolve_with_mode as resolve_workspace_with_mode,
};
