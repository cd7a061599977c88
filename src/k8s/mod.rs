//! The thin layer every reconciler writes through: one field manager, server-side apply,
//! an injectable clock and best-effort events.

pub mod apply;
pub mod clock;
pub mod events;
pub mod warnings;

/// The one field manager of every olm-rs write (STYLE rule 2).
pub const MANAGER: &str = "olm-rs";
