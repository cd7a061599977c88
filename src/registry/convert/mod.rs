//! Between the catalog index and the registry wire messages, both ways:
//! `to_api` projects an indexed FBC bundle onto `api.Bundle` as `opm serve` does
//! (docs/catalog.md §5.3); `from_api` rebuilds a declarative config from what a registry sent,
//! so remote catalogs land in the same `CatalogIndex` as local ones.

pub mod from_api;
pub mod to_api;
