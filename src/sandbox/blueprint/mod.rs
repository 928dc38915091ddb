//! What a container is to be, as pure functions of the options and the engine's facts: the
//! container spec, its labels and the posture an adopted container must show ([`spec`]), run
//! flags ([`run_flags`]), what the engine mode changes ([`engine_mode`]), and the egress modes
//! with each namespace's nft ruleset ([`firewall`]). Nothing here does I/O.

pub(in crate::sandbox) mod engine_mode;
pub(in crate::sandbox) mod firewall;
pub(in crate::sandbox) mod run_flags;
pub(in crate::sandbox) mod spec;

pub(crate) use engine_mode::{
    EngineMode, ROUTE_VAR, RouteChoice, UNENFORCED_LIMITS, limits_enforceable,
};
pub(crate) use firewall::{MODES, NetworkMode};
#[cfg(test)]
pub(crate) use run_flags::parse as parse_run_flags;
pub(crate) use run_flags::{
    RUN_FLAGS_VAR, RunFlags, bytes as decode_bytes, nano_cpus as decode_nano_cpus,
    refuse_on_podman as refuse_run_flags_on_podman, resolve as resolve_run_flags,
};
pub(crate) use spec::{
    ContainerSettings, DEFAULT_HEALTH_INTERVAL_MS, DEFAULT_PIDS_LIMIT, LABEL_IMAGE_BASE,
    LABEL_IMAGE_VARIANT, LABEL_RUN_FLAGS, Limits, SEED_FILES, container_name, proxy_notes,
};
