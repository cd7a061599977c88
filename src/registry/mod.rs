//! The operator-registry gRPC API (`api.Registry` + `grpc.health.v1.Health`) over the catalog
//! index: the server behind `olm-rs catalog serve`, the client the CatalogSource controller uses,
//! and the shared cache of loaded catalogs. docs/catalog.md §5.

pub mod cache;
pub mod client;
pub mod configmap_catalog;
pub mod connection;
pub mod convert;
pub mod image_catalogs;
pub mod proto;
pub mod queries;
pub mod serve;
pub mod server;
