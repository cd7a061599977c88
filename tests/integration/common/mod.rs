//! Helpers shared by the integration tests.

#![allow(dead_code)] // the copied-CSV bench includes this file too and uses a subset

pub mod roundtrip;

// The one place that finds the shared reference data (`$OLM_RS_SHARED`, else `../shared`), and
// how a test that cannot run here says so.
#[path = "../../real_control_plane/shared_data.rs"]
mod shared_data;
#[path = "../../real_control_plane/skip.rs"]
pub mod skip;

#[allow(unused_imports)] // each test binary or bench that includes this uses a subset
pub use shared_data::{fbc_v420, operators_dir, shared_dir};
#[allow(unused_imports)]
pub use skip::skip;
