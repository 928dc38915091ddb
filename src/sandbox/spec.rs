//! The container spec: everything one workspace's container is, as a pure function of its
//! inputs. Its names and paths, the builder, and the posture checks by which adoption compares
//! live inspect data against it ([`check_posture`]) are one file each; the engine-facing code
//! only translates the spec.

mod build;
mod names;
mod posture;
mod proxy;
pub mod seccomp;

pub use build::*;
pub use names::*;
pub use posture::*;
pub use proxy::*;

#[cfg(test)]
mod tests;
