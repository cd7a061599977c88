//! List (with `limit`/`continue` paging) and watch: newline-delimited `{"type","object"}` events
//! from the store's change log, `410 Gone` as an `ERROR` event for versions no longer kept,
//! bookmarks on request, and `timeoutSeconds`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use base64::Engine;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ctx::Ctx;
use super::response;
use super::route::Format;
use crate::error::ApiError;
use crate::meta;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::state::State;
use crate::store::{EventKind, ObjectKey, StoredEvent, TooOld};

/// Which objects a list or watch covers.
struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    name: Option<String>,
}

impl Filter {
    fn from(ctx: &Ctx, name: Option<String>) -> Result<Self, ApiError> {
        Ok(Filter {
            namespace: ctx.namespace.clone(),
            labels: LabelSelector::parse(ctx.query.get("labelSelector").unwrap_or_default())
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            fields: FieldSelector::parse(
                ctx.query.get("fieldSelector").unwrap_or_default(),
                &ctx.res,
            )
            .map_err(|e| ApiError::bad_request(e.to_string()))?,
            name,
        })
    }

    fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta::namespace(obj) == Some(ns))
            && self
                .name
                .as_deref()
                .is_none_or(|n| meta::name(obj) == Some(n))
            && self.labels.matches(obj)
            && self.fields.matches(obj)
    }
}

fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let raw = json!({"rv": rv, "ns": key.0, "name": key.1}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v["rv"].as_u64().ok_or_else(bad)?;
    let ns = v["ns"].as_str().ok_or_else(bad)?.to_string();
    let name = v["name"].as_str().ok_or_else(bad)?.to_string();
    Ok((rv, (ns, name)))
}

pub fn list(ctx: &Ctx) -> Result<Response, ApiError> {
    let filter = Filter::from(ctx, None)?;
    let limit = ctx
        .query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let cont = ctx.query.get("continue").map(decode_continue).transpose()?;
    let gr = ctx.res.group_resource();
    let (items, list_meta) = ctx.server.read(|s| {
        // Continued pages report the first page's version; later changes may show up in them
        // (the sandbox keeps no snapshots).
        let rv = cont
            .as_ref()
            .map(|(rv, _)| *rv)
            .unwrap_or_else(|| s.store.current_rv());
        let mut matching = s
            .store
            .list_from(&gr, filter.namespace.as_deref(), cont.map(|(_, k)| k))
            .filter(|(_, o)| filter.matches(o));
        let mut items: Vec<Arc<Value>> = Vec::new();
        let mut last_key = None;
        for (key, obj) in matching.by_ref() {
            items.push(obj.clone());
            last_key = Some(key.clone());
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let remaining = matching.count();
        let mut list_meta = json!({"resourceVersion": rv.to_string()});
        if remaining > 0
            && let Some(key) = last_key
        {
            list_meta["continue"] = json!(encode_continue(rv, &key));
            list_meta["remainingItemCount"] = json!(remaining);
        }
        (items, list_meta)
    });
    Ok(response::json(200, &ctx.render.list(&items, list_meta)))
}

/// Where a watch starts.
enum Start {
    /// Synthetic ADDED events for what exists now, then changes.
    CurrentState,
    /// Changes after this version.
    After(u64),
}

pub fn watch(ctx: Ctx, name: Option<String>) -> Result<Response, ApiError> {
    let filter = Filter::from(&ctx, name)?;
    let rv = ctx.query.get("resourceVersion");
    let send_initial = ctx.query.get("sendInitialEvents").map(|v| v == "true");
    let start = match (rv, send_initial) {
        (_, Some(true)) | (None | Some("0"), None) => Start::CurrentState,
        (None | Some("0"), Some(false)) => Start::After(ctx.server.read(|s| s.store.current_rv())),
        (Some(v), _) => Start::After(
            v.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v}")))?,
        ),
    };
    let bookmarks = ctx.query.flag("allowWatchBookmarks") && ctx.render.format != Format::Table;
    let timeout = ctx
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    let watcher = Watcher {
        ctx,
        filter,
        tx,
        columns_sent: false,
    };
    tokio::spawn(watcher.run(
        start,
        send_initial == Some(true) && bookmarks,
        bookmarks,
        timeout,
    ));
    let mut resp = Response::new(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(rx),
    ));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

struct Watcher {
    ctx: Ctx,
    filter: Filter,
    tx: mpsc::Sender<Result<Bytes, std::convert::Infallible>>,
    columns_sent: bool,
}

/// What a watch takes from the store under the server's lock: shared pointers only. Filtering
/// and rendering (a copy of every object sent) happen after the lock is released, so that
/// watchers do not hold up writes.
enum Taken {
    /// The objects that exist now, sent as ADDED.
    Current(Vec<Arc<Value>>, u64),
    /// The changes after the cursor.
    Changes(Vec<Arc<StoredEvent>>, u64),
    Gone(TooOld),
}

impl Watcher {
    /// The event line for `obj`, encoded straight from the stored object (no copy of it).
    fn event(&mut self, kind: &str, obj: &Value) -> Vec<u8> {
        let with_columns = !self.columns_sent;
        self.columns_sent = true;
        let object = self.ctx.render.object(obj, with_columns);
        line(&WatchEvent { kind, object })
    }

    async fn send(&self, event: &impl Serialize) -> bool {
        self.send_line(line(event)).await
    }

    async fn send_line(&self, bytes: Vec<u8>) -> bool {
        self.tx.send(Ok(Bytes::from(bytes))).await.is_ok()
    }

    fn take_initial(&self, state: &State) -> Taken {
        let gr = self.ctx.res.group_resource();
        let objs = state
            .store
            .list(&gr, self.filter.namespace.as_deref())
            .filter(|o| self.filter.matches(o))
            .cloned()
            .collect();
        Taken::Current(objs, state.store.current_rv())
    }

    fn take_changes(&self, state: &State, cursor: u64) -> Taken {
        let gr = self.ctx.res.group_resource();
        match state.store.events_after(&gr, cursor) {
            Ok(events) => Taken::Changes(events, state.store.current_rv()),
            Err(too_old) => Taken::Gone(too_old),
        }
    }

    /// Sends what was taken, rendering one line at a time (a batch can be thousands of large
    /// objects). A change that moves an object into (out of) the selection is sent as ADDED
    /// (DELETED), as the real server's watch cache does. Returns the new cursor, or `None` when
    /// the watch must end (its client left, or its version is gone).
    async fn deliver(&mut self, taken: Taken) -> Option<u64> {
        match taken {
            Taken::Current(objs, rv) => {
                for obj in objs {
                    let line = self.event("ADDED", &obj);
                    if !self.send_line(line).await {
                        return None;
                    }
                }
                Some(rv)
            }
            Taken::Changes(events, rv) => {
                for ev in events {
                    let now = self.filter.matches(&ev.object);
                    let before = ev
                        .previous
                        .as_deref()
                        .is_some_and(|p| self.filter.matches(p));
                    let kind = match ev.kind {
                        EventKind::Added if now => "ADDED",
                        EventKind::Modified if now && before => "MODIFIED",
                        EventKind::Modified if now => "ADDED",
                        EventKind::Modified if before => "DELETED",
                        EventKind::Deleted if before || now => "DELETED",
                        _ => continue,
                    };
                    let line = self.event(kind, &ev.object);
                    if !self.send_line(line).await {
                        return None;
                    }
                }
                Some(rv)
            }
            Taken::Gone(too_old) => {
                let err = ApiError::gone(format!(
                    "too old resource version: {} ({})",
                    too_old.requested, too_old.oldest_available
                ));
                self.send(&json!({"type": "ERROR", "object": err.to_status()}))
                    .await;
                None
            }
        }
    }

    async fn run(
        mut self,
        start: Start,
        mark_initial_end: bool,
        bookmarks: bool,
        timeout: Duration,
    ) {
        let server = self.ctx.server.clone();
        // Subscribe before reading so no change between the read and the wait is missed.
        let mut changes = server.subscribe();
        let mut epoch = server.watch_epoch();
        let taken = server.read(|s| match start {
            Start::CurrentState => self.take_initial(s),
            Start::After(rv) => self.take_changes(s, rv),
        });
        let Some(mut cursor) = self.deliver(taken).await else {
            return;
        };
        if mark_initial_end && !self.send(&bookmark_event(&self, cursor, true)).await {
            return;
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticks = tokio::time::interval(server.options().bookmark_interval);
        ticks.tick().await;
        loop {
            let bookmark_due = tokio::select! {
                _ = &mut deadline => break,
                _ = self.tx.closed() => return,
                _ = epoch.changed() => return,
                changed = changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    false
                }
                _ = ticks.tick(), if bookmarks => true,
            };
            let taken = server.read(|s| self.take_changes(s, cursor));
            let Some(next) = self.deliver(taken).await else {
                return;
            };
            cursor = next;
            if bookmark_due && !self.send(&bookmark_event(&self, cursor, false)).await {
                return;
            }
        }
        if bookmarks {
            self.send(&bookmark_event(&self, cursor, false)).await;
        }
    }
}

/// One watch event as sent.
#[derive(Serialize)]
struct WatchEvent<'a, T: Serialize> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: T,
}

/// `event` as one newline-terminated line.
fn line(event: &impl Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(event).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn bookmark_event(w: &Watcher, rv: u64, initial_events_end: bool) -> Value {
    json!({"type": "BOOKMARK", "object": w.ctx.render.bookmark(rv, initial_events_end)})
}
