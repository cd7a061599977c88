//! Resolvers that do not ask a registry: one for when the real one cannot be built, one for tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use http::StatusCode;

use super::super::image_ref::ImageReference;
use super::{DigestError, ImageDigestResolver, RegistryCredentials};

/// Stands in when the real resolver cannot be built (no CA certificates): every check fails
/// with the reason, and catalogs keep their current registry pods.
#[derive(Debug, Clone)]
pub struct UnavailableDigestResolver {
    reason: String,
}

impl UnavailableDigestResolver {
    pub fn new(reason: impl Into<String>) -> UnavailableDigestResolver {
        UnavailableDigestResolver {
            reason: reason.into(),
        }
    }
}

impl ImageDigestResolver for UnavailableDigestResolver {
    fn resolve<'a>(
        &'a self,
        image: &'a str,
        _credentials: &'a RegistryCredentials,
    ) -> BoxFuture<'a, Result<String, DigestError>> {
        let err = DigestError::Unreachable {
            image: image.to_owned(),
            host: ImageReference::parse(image)
                .map(|r| r.api_host().to_owned())
                .unwrap_or_default(),
            message: self.reason.clone(),
        };
        Box::pin(async move { Err(err) })
    }
}

/// A resolver for tests: answers from a table that tests change, and counts the questions.
#[derive(Debug, Clone, Default)]
pub struct FakeDigestResolver {
    state: Arc<Mutex<FakeState>>,
}

#[derive(Debug, Default)]
struct FakeState {
    digests: BTreeMap<String, Result<String, String>>,
    calls: usize,
}

impl FakeDigestResolver {
    pub fn new() -> FakeDigestResolver {
        FakeDigestResolver::default()
    }

    /// From now on `image` resolves to `digest`.
    pub fn set(&self, image: &str, digest: &str) {
        self.lock()
            .digests
            .insert(image.to_owned(), Ok(digest.to_owned()));
    }

    /// From now on resolving `image` fails with `message`.
    pub fn fail(&self, image: &str, message: &str) {
        self.lock()
            .digests
            .insert(image.to_owned(), Err(message.to_owned()));
    }

    /// How many times `resolve` was called.
    pub fn calls(&self) -> usize {
        self.lock().calls
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ImageDigestResolver for FakeDigestResolver {
    fn resolve<'a>(
        &'a self,
        image: &'a str,
        _credentials: &'a RegistryCredentials,
    ) -> BoxFuture<'a, Result<String, DigestError>> {
        let answer = {
            let mut state = self.lock();
            state.calls += 1;
            state.digests.get(image).cloned()
        };
        Box::pin(async move {
            match answer {
                Some(Ok(digest)) => Ok(digest),
                Some(Err(message)) => Err(DigestError::Unreachable {
                    image: image.to_owned(),
                    host: "fake".to_owned(),
                    message,
                }),
                None => Err(DigestError::Status {
                    image: image.to_owned(),
                    host: "fake".to_owned(),
                    status: StatusCode::NOT_FOUND,
                }),
            }
        })
    }
}
