//! placeholder while olm_hash builds
