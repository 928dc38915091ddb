//! The container spec: everything one workspace's container is, as a pure function of its
//! inputs. The engine-facing code only translates it; adoption compares live inspect data
//! against it ([`check_posture`]).

mod build;
mod names;
mod posture;

pub use build::*;
pub use names::*;
pub use posture::*;

#[cfg(test)]
mod tests;
