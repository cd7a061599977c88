//! API-server warnings: the `Warning: 299 - "<text>"` headers Kubernetes adds to a response, for
//! example when a request uses a deprecated API version. OLM reports the ones an InstallPlan step
//! draws as an `AppliedWithWarnings` event and in `installplan_warnings_total`
//! (docs/install-plans.md §7.3); kube's typed API hides response headers, so a client made
//! by [`recording`] keeps them in a [`WarningLog`].

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use http::{HeaderMap, Request};
use kube::Client;
use kube::client::Body;

/// Warnings seen by the clients made with [`recording`], oldest first.
#[derive(Clone, Debug, Default)]
pub struct WarningLog(Arc<Mutex<Vec<String>>>);

impl WarningLog {
    /// Every warning recorded since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn record(&self, headers: &HeaderMap) {
        let texts: Vec<String> = headers
            .get_all(http::header::WARNING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(parse_warnings)
            .collect();
        if !texts.is_empty() {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(texts);
        }
    }
}

/// `client`, recording the warnings of every response into `log`.
pub fn recording(client: &Client, log: &WarningLog) -> Client {
    let inner = client.clone();
    let log = log.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let (inner, log) = (inner.clone(), log.clone());
        async move {
            let response = inner.send(request).await?;
            log.record(response.headers());
            Ok::<_, kube::Error>(response)
        }
        .boxed()
    });
    Client::new(service, client.default_namespace().to_owned())
}

/// The texts of the `299` warnings in one header value. A value may hold several warnings,
/// comma-separated: `299 - "a", 299 - "b"` (RFC 7234 §5.5: code, agent, quoted text, optional
/// quoted date). Other codes are not Kubernetes warnings and are skipped, as client-go does.
pub fn parse_warnings(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value.trim_start();
    while !rest.is_empty() {
        let Some((code, after_code)) = rest.split_once(' ') else {
            break;
        };
        let Some((_agent, after_agent)) = after_code.trim_start().split_once(' ') else {
            break;
        };
        let Some((text, after_text)) = quoted(after_agent.trim_start()) else {
            break;
        };
        if code == "299" {
            out.push(text);
        }
        rest = after_text.trim_start();
        // An optional warn-date, itself quoted.
        if rest.starts_with('"') {
            rest = quoted(rest).map_or("", |(_, after)| after).trim_start();
        }
        rest = rest.strip_prefix(',').unwrap_or("").trim_start();
    }
    out
}

/// A leading quoted string (with `\` escapes): its text and what follows it.
fn quoted(input: &str) -> Option<(String, &str)> {
    let body = input.strip_prefix('"')?;
    let mut text = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((text, &body[i + 1..])),
            '\\' => text.push(chars.next()?.1),
            c => text.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_warning_headers_are_parsed() {
        assert_eq!(
            parse_warnings(r#"299 - "example.com/v1 Widget is deprecated""#),
            ["example.com/v1 Widget is deprecated"]
        );
        assert_eq!(
            parse_warnings(r#"299 - "say \"hi\" \\ there", 299 - "second""#),
            [r#"say "hi" \ there"#, "second"]
        );
        assert_eq!(
            parse_warnings(
                r#"299 kube-apiserver "dated" "Sat, 01 Jan 2000 00:00:00 GMT", 299 - "next""#
            ),
            ["dated", "next"]
        );
        assert_eq!(
            parse_warnings(r#"199 - "not ours", 299 - "ours""#),
            ["ours"]
        );
        assert!(parse_warnings("garbage").is_empty());
        assert!(parse_warnings(r#"299 - "unterminated"#).is_empty());
    }

    #[tokio::test]
    async fn a_recording_client_keeps_the_warnings_of_each_response() {
        let backend = tower::service_fn(|_request: Request<Body>| async {
            let body = r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            let mut response = http::Response::new(Body::from(body.as_bytes().to_vec()));
            response.headers_mut().append(
                http::header::WARNING,
                http::HeaderValue::from_static(r#"299 - "one""#),
            );
            response.headers_mut().append(
                http::header::WARNING,
                http::HeaderValue::from_static(r#"299 - "two""#),
            );
            Ok::<_, std::convert::Infallible>(response)
        });
        let log = WarningLog::default();
        let client = recording(&Client::new(backend, "default"), &log);
        client.apiserver_version().await.expect("answered");
        assert_eq!(log.take(), ["one", "two"]);
        assert!(log.take().is_empty(), "take empties the log");
    }
}
