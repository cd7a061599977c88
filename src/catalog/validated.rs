//! Loading a catalog directory for serving, as `opm serve` does (docs/catalog.md §6.4): the
//! content is read once, checked with every validation rule, indexed, and only then served.
//! A catalog with problems is never served — not even as an empty catalog — so clients see
//! "unreachable" with the reasons in the server's log instead of a registry that has nothing.

use std::path::Path;

use crate::catalog::{
    self, CatalogError, CatalogIndex, CatalogKind, CsvMetadataHold, LoadOptions, Problem,
};

#[derive(Debug, thiserror::Error)]
pub enum ServeLoadError {
    #[error(transparent)]
    Load(#[from] CatalogError),
    #[error("{path}: catalog has {} problem(s); not serving it:\n{}", problems.len(), list(problems))]
    Invalid {
        path: String,
        problems: Vec<Problem>,
    },
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What was loaded, for the startup log line.
#[derive(Debug)]
pub struct LoadedCatalog {
    pub kind: CatalogKind,
    pub index: CatalogIndex,
}

/// Loads an FBC directory (or a directory of bundle directories), validates it and indexes it.
pub fn load_for_serving(path: &Path) -> Result<LoadedCatalog, ServeLoadError> {
    // The server keeps the catalog for its lifetime but reads CSV metadata only for some
    // answers: keep it packed (peak and resident memory, README "Performance").
    let options = LoadOptions {
        csv_metadata: CsvMetadataHold::Packed,
    };
    let (kind, config, mut problems) = catalog::load_catalog_with(path, options)?;
    problems.extend(catalog::validate::validate(&config));
    if !problems.is_empty() {
        return Err(ServeLoadError::Invalid {
            path: path.display().to_string(),
            problems,
        });
    }
    Ok(LoadedCatalog {
        kind,
        index: CatalogIndex::new(config),
    })
}

/// How many problems a message lists before "and N more".
const PROBLEMS_SHOWN: usize = 5;

/// `catalog is invalid: <p1>; <p2>; … (and N more)`.
pub fn describe_problems(problems: &[Problem]) -> String {
    let mut text = String::from("catalog is invalid: ");
    let shown: Vec<String> = problems
        .iter()
        .take(PROBLEMS_SHOWN)
        .map(ToString::to_string)
        .collect();
    text.push_str(&shown.join("; "));
    if problems.len() > PROBLEMS_SHOWN {
        text.push_str(&format!(" (and {} more)", problems.len() - PROBLEMS_SHOWN));
    }
    text
}
