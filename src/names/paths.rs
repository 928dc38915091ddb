//! Where the layer puts things inside a container, and what a command run there may be.

/// Where the container's home volume is mounted (world-writable in the image).
pub const HOME_DIR: &str = "/po-home";
/// Where the package-cache volume is mounted.
pub const RUNTIME_DIR: &str = "/po-runtime";
/// Where the git worktree volume is mounted.
pub const GIT_DIR: &str = "/po-git";
/// Where the container's own token file is mounted.
pub const TOKEN_PATH: &str = "/run/po-sandbox/token";
/// The token file's folder (a volume of its own on an engine on another machine).
pub const TOKEN_DIR: &str = "/run/po-sandbox";
/// Where a container's broker socket is mounted.
pub const BROKER_MOUNT: &str = "/run/po-broker";

/// The longest command line an exec in a container accepts (arguments and separators, in
/// bytes): the engine's exec takes it whole.
pub const MAX_COMMAND_BYTES: usize = 128 * 1024;
