//! The operator-registry gRPC API (`api.Registry` + `grpc.health.v1.Health`) over the catalog
//! index: the server behind `olm-rs catalog serve`, the client and the connections the
//! CatalogSource controller keeps to registry pods, and the conversions between the API's
//! messages and the catalog model. docs/catalog.md §5.

pub mod client;
pub mod connection;
pub mod convert;
pub mod proto;
pub mod queries;
pub mod server;
