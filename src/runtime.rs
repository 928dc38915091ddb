//! The Linux Po runtime bundle: where it lives, and whether its container-runtime.json is valid.
