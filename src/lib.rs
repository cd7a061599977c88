//! olm-rs: Operator Lifecycle Manager (OLM v0) re-built in Rust.
//!
//! The pure core (`api`, `catalog`, `resolve`, `plan`, `csv`, `certs`) never talks to a
//! cluster; the thin shell (`reconcile`, `controller`, `sandbox`) reads, calls the core and
//! writes. See `STYLE` in the repository's shared notes and the README's architecture picture.
pub mod catalog;
