//! The container spec: everything one workspace's container is, as a pure function of its
//! inputs. Its names and paths, the builder, and the posture checks by which adoption compares
//! live inspect data against it ([`check_posture`]) are one file each; the engine-facing code
//! only translates the spec.

mod build;
mod exec_route;
mod names;
mod posture;
mod proxy;
pub mod seccomp;

pub use build::{
    ContainerSettings, ContainerSpec, DEFAULT_HEALTH_INTERVAL_MS, DEFAULT_PIDS_LIMIT, Limits,
    SpecInput, build, exec_gated,
};
#[cfg(test)]
pub use build::{DEFAULT_CPU_SHARES, EXEC_GATE, FALLBACK_MEMORY, GATE, HealthProbe, health_probe};
pub use exec_route::{exec_route_command, exec_route_env};
#[cfg(all(test, unix))]
pub use names::carried_volumes;
pub use names::{
    Bind, CARRIED_BUNDLE, CARRIED_P, CARRIED_TOKEN, LABEL_HOLDER_OF, LABEL_IMAGE_BASE,
    LABEL_IMAGE_VARIANT, LABEL_NET_MODE, LABEL_NET_RULES, LABEL_NET_SHAPE, LABEL_NETWORK,
    LABEL_OWNER, LABEL_RUN_FLAGS, LABEL_SANDBOX, LABEL_SPEC_HASH, LABEL_WORKSPACE,
    LABEL_WORKSPACE_PATH, SEED_FILES, VolumeMount, container_name, guard_copies, network_name,
    token_file, tokens_dir, tokens_root,
};
#[cfg(test)]
pub use names::{LABEL_IMAGE_DIGEST, WRITABLE_TMPFS};
#[cfg(test)]
pub use posture::PostureCheckKind;
pub use posture::{ContainerPosture, HolderPosture, LivePosture, brokered_of, check_posture};
pub use proxy::proxy_notes;

#[cfg(test)]
mod tests;
