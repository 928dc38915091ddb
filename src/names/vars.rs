//! The environment variables the layer reads or sets, by name: on the host (options a variable
//! may give) and inside a container (what the container learns of its sandbox).

// Host: the engine.

/// The variable that picks one engine instead of detecting.
pub const ENGINE_VAR: &str = "PO_SANDBOX_ENGINE";
/// `1` or `0`: the engine is on another machine, or sees this machine's paths, whatever its
/// identity says (the `engineRemote` option wins).
pub const REMOTE_VAR: &str = "PO_SANDBOX_ENGINE_REMOTE";
/// The variable that sets the per-step timeout in milliseconds.
pub const TIMEOUT_VAR: &str = "PO_SANDBOX_ENGINE_TIMEOUT_MS";
/// The variable that bounds every engine call that only reads (ping, version, info, list,
/// inspect, a log tail), in milliseconds.
pub const CALL_TIMEOUT_VAR: &str = "PO_SANDBOX_ENGINE_CALL_TIMEOUT_MS";
/// The variable that bounds every engine call that changes something (create, start, remove,
/// volumes, exec, the start of an image build), in milliseconds. A stop adds its grace.
pub const CHANGE_TIMEOUT_VAR: &str = "PO_SANDBOX_ENGINE_CHANGE_TIMEOUT_MS";
/// The variable that bounds the gap between two progress messages of an image build, in
/// milliseconds (a build is bounded by its progress, not by its length).
pub const BUILD_IDLE_VAR: &str = "PO_SANDBOX_IMAGE_BUILD_IDLE_TIMEOUT_MS";
/// `accept`: bind mode shares a folder on a case-insensitive file system anyway (its read-only
/// guards hold only for the case they name); unset, such a folder is refused in bind mode.
pub const CASE_INSENSITIVE_BIND_VAR: &str = "PO_SANDBOX_CASE_INSENSITIVE_BIND";
/// The variable that bounds the whole of a `diff` or `apply`'s reading of a copy (every exec
/// it runs inside the container, their output included), in milliseconds.
pub const CHANGES_TIMEOUT_VAR: &str = "PO_SANDBOX_CHANGES_TIMEOUT_MS";
/// The variable that names the docker CLI's context, over the config file's `currentContext`.
pub const CONTEXT_VAR: &str = "DOCKER_CONTEXT";
/// The variable that moves the docker CLI's config folder.
pub const CONFIG_VAR: &str = "DOCKER_CONFIG";

// Host: the image and the containers.

/// Overrides the base image.
pub const BASE_VAR: &str = "PO_SANDBOX_BASE_IMAGE";
/// `full` (default) or `minimal` (toolchain-free).
pub const VARIANT_VAR: &str = "PO_SANDBOX_IMAGE_VARIANT";
/// The host variable: a whitespace-separated list of run flags (the `runFlags` option wins).
pub const RUN_FLAGS_VAR: &str = "PO_SANDBOX_RUN_FLAGS";
/// The variable that sets the memory limit when the `memory` option does not.
pub const MEMORY_VAR: &str = "PO_SANDBOX_MEMORY";
/// The variable that sets the CPU limit when the `cpus` option does not.
pub const CPUS_VAR: &str = "PO_SANDBOX_CPUS";
/// The variable that changes the guarded paths: `+path` adds, `-path` removes, a plain list
/// replaces the defaults, empty means none. Inside a container: the comma-separated paths
/// mounted read-only over the workspace.
pub const GUARDED_PATHS_VAR: &str = "PO_SANDBOX_GUARDED_PATHS";
/// The variable that sets the egress mode when the `network` option does not; inside a
/// container, the mode its rules enforce.
pub const NETWORK_VAR: &str = "PO_SANDBOX_NETWORK";
/// The variable that sets the workspace mode when the `workspaceMode` option does not (`bind` or
/// `clone`); inside a container, set to `clone` when the workspace is a copy.
pub const WORKSPACE_MODE_VAR: &str = "PO_SANDBOX_WORKSPACE_MODE";
/// The variable that sets `networkAllow` when the option does not (comma-separated).
pub const NETWORK_ALLOW_VAR: &str = "PO_SANDBOX_NETWORK_ALLOW";
/// The variable that sets `networkResolve` when the option does not (comma-separated).
pub const NETWORK_RESOLVE_VAR: &str = "PO_SANDBOX_NETWORK_RESOLVE";

// Host: the broker and logging.

/// `PO_SANDBOX_BROKER=0` turns the broker off: grants carry no credentials and no route.
pub const DISABLE_VAR: &str = "PO_SANDBOX_BROKER";
/// The variable that forces the broker route when the `brokerTransport` option does not.
pub const ROUTE_VAR: &str = "PO_SANDBOX_BROKER_TRANSPORT";
/// Paths the broker forwards beyond each provider's model endpoints: `<provider>:<path>`, comma-separated.
pub const ALLOW_PATHS_VAR: &str = "PO_SANDBOX_BROKER_ALLOW_PATHS";
/// Providers whose request bodies the broker does not screen for URLs to fetch (`none`, `allowlist`).
pub const ALLOW_FETCH_VAR: &str = "PO_SANDBOX_BROKER_ALLOW_FETCH";
/// The variable holding the log filter (`tracing_subscriber::EnvFilter` syntax, e.g. `debug`).
pub const LOG_VAR: &str = "PO_SANDBOX_LOG";

// Inside a container.

/// Set to `1` in every sandbox container.
pub const SANDBOX_VAR: &str = "PO_SANDBOX";
/// The workspace id a container serves.
pub const WORKSPACE_VAR: &str = "PO_WORKSPACE";
/// Comma-separated providers whose calls go through the broker.
pub const PROVIDERS_VAR: &str = "PO_BROKER_PROVIDERS";
/// A Unix socket route to the broker (absolute path).
pub const SOCKET_VAR: &str = "PO_BROKER_SOCKET";
/// A TCP route to the broker (`host:port`).
pub const ADDRESS_VAR: &str = "PO_BROKER_ADDRESS";
/// The container's variable naming the egress proxy's Unix socket (allowlist mode), beside the
/// broker socket.
pub const EGRESS_SOCKET_VAR: &str = "PO_BROKER_EGRESS_SOCKET";
/// The container's variable with the egress proxy's URL on the TCP route: the broker's egress
/// port as the container reaches it, with the grant's egress credentials (`po:<token>`).
pub const EGRESS_PROXY_VAR: &str = "PO_BROKER_EGRESS_PROXY";

/// Which carriers a forwarded port may use: `namespace` (the default: the namespace, else the
/// socket, else the exec stream), `socket` (else the exec stream) or `exec`.
pub const FORWARD_CARRIER_VAR: &str = "PO_SANDBOX_FORWARD_CARRIER";

/// How young an unused per-hub network `prune` keeps, in ms (default 300000).
pub const PRUNE_GRACE_VAR: &str = "PO_SANDBOX_PRUNE_GRACE_MS";
