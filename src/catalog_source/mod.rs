//! CatalogSource decisions (pure): what kind of catalog a spec describes and how often to poll
//! it (`spec`), how an image catalog is served — in-process or by a registry pod (`serving`) —,
//! what an in-process image catalog does next and the status that says so (`image`), and the
//! registry pod plan (`pod_plan`). No client, no clock reads, no async: the controller
//! (`reconcile::catalog_source`) observes, calls these, and carries out what they return.
//! docs/catalog-images.md.

pub mod events;
pub mod image;
pub mod pod_plan;
pub mod serving;
pub mod spec;
