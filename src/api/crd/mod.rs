//! The CustomResourceDefinitions olm-rs installs.
