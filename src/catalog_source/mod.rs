//! CatalogSource decisions (pure): what kind of catalog a spec describes and how often to poll
//! it (`spec`), how an image catalog is served — in-process or by a registry pod (`serving`) —,
//! one sync of any catalog (`decision`; an image served in-process in `decision/image.rs`), its
//! registry objects (`registry`) and pods (`pod_plan`), what an in-process image catalog does
//! next and the status that says so (`in_process`), and when an image the controller cannot
//! pull is served by a registry pod instead (`fallback`). What the controller remembers of a catalog between syncs
//! is a plain value (`memo`), observed with the rest and returned by the decision. No client,
//! no clock reads, no async: the controller (`reconcile::catalog_source`) observes, calls
//! `decision::decide` once per sync, and carries out what it returns.
//! docs/catalog-images.md.

pub mod cache_update;
pub mod decision;
pub mod events;
pub mod fallback;
pub mod in_process;
pub mod memo;
pub mod pod_plan;
pub mod registry;
pub mod registry_objects;
pub mod serving;
pub mod spec;

use crate::api::event::ObjectEvent;
use crate::api::{CatalogSource, CatalogSourceStatus};
use crate::k8s::effects::{Effects, Write};

/// The status write (when `status` differs from the observed one, guarded by the version
/// observed) and the events — `notes` and those of the status transition — of a sync.
pub fn effects_of(
    cs: &CatalogSource,
    status: CatalogSourceStatus,
    mut notes: Vec<ObjectEvent>,
) -> Effects {
    let observed = cs.status.clone().unwrap_or_default();
    let mut effects = Effects::default();
    if status != observed {
        if let Some(write) = Write::status(cs, status.clone()) {
            effects.write(write);
        }
        notes.extend(events::transitions(&observed, &status));
    }
    for note in notes {
        effects.event_on(cs, note);
    }
    effects
}
