//! One request through the fake: ledger entry, login or route, bearer check, faults before the
//! call, then serving, dedup, effect, post-effect faults and ledger update in one locked step.

use crate::auth::{self, AuthFailure, LOGIN_PATH};
use crate::catalog::{Route, catalog};
use crate::faults::{CallView, FaultAction};
use crate::ledger::{AgentHeaders, Attempt, AttemptUser, Refusal, RefusalKind, Reply};
use crate::recorded::{self, AnswerStyle, DocRouting};
use crate::server::{ConnectionKill, Inner, Shared};
use crate::state::User;
use crate::world::{Call, Collection, Served, envelope_success};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mpa_protocol::Outcome;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const MAX_BODY: usize = 8 * 1024 * 1024;

/// Marks the attempt `not_sent` if the handler is dropped before it answered.
struct InFlight {
    shared: Arc<Shared>,
    index: usize,
    done: bool,
}

impl InFlight {
    fn begin(shared: &Arc<Shared>, mut attempt: Attempt) -> InFlight {
        let mut inner = shared.lock();
        let index = inner.ledger.len();
        attempt.sequence = index as u64 + 1;
        inner.ledger.push(attempt);
        InFlight {
            shared: shared.clone(),
            index,
            done: false,
        }
    }

    fn update(&self, f: impl FnOnce(&mut Attempt)) {
        if let Some(a) = self.shared.lock().ledger.get_mut(self.index) {
            f(a);
        }
    }

    /// Records the reply and builds it.
    fn answer(
        mut self,
        status: u16,
        body: Value,
        headers: HeaderMap,
        f: impl FnOnce(&mut Attempt),
    ) -> Response {
        self.done = true;
        self.update(|a| {
            f(a);
            sent(a, status, &body);
        });
        respond(status, body, headers)
    }

    fn refuse(self, status: u16, body: Value, kind: RefusalKind, message: &str) -> Response {
        let message = message.to_string();
        self.answer(status, body, HeaderMap::new(), |a| {
            a.refusal = Some(Refusal { kind, message });
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done {
            self.update(|a| {
                if a.reply == Reply::InFlight {
                    a.reply = Reply::NotSent;
                    a.outcome = Outcome::Unknown;
                    a.observations.clear();
                }
            });
        }
    }
}

fn sent(a: &mut Attempt, status: u16, body: &Value) {
    a.status = Some(status);
    a.reply = Reply::Sent;
    a.outcome = if (200..300).contains(&status) && envelope_success(body) {
        Outcome::Succeeded
    } else {
        Outcome::Failed
    };
}

fn respond(status: u16, body: Value, mut headers: HeaderMap) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    let payload = match (&body, text) {
        (Value::String(s), true) => s.clone(),
        (Value::Null, _) if status.is_redirection() => String::new(),
        _ => {
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            body.to_string()
        }
    };
    (status, headers, payload).into_response()
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn query_object(pairs: &[(String, String)]) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in pairs {
        match out.get_mut(k) {
            None => {
                out.insert(k.clone(), json!(v));
            }
            Some(Value::Array(items)) => items.push(json!(v)),
            Some(prev) => *prev = json!([prev.clone(), v]),
        }
    }
    out
}

fn auth_response(flight: InFlight, failure: AuthFailure, kind: RefusalKind) -> Response {
    let mut headers = HeaderMap::new();
    if failure.challenge {
        headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    flight.answer(failure.status, failure.body, headers, |a| {
        a.refusal = Some(Refusal {
            kind,
            message: failure.message.to_string(),
        });
    })
}

pub(crate) async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let kill = parts.extensions.get::<ConnectionKill>().cloned();
    let method = parts.method.as_str().to_string();
    let path = parts.uri.path().to_string();
    if path == recorded::OPENAPI_PATH {
        return openapi_document(&shared, &method);
    }
    let mut query: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let headers = parts.headers;
    let agent = AgentHeaders {
        session: header_str(&headers, "x-moviepilot-agent-session").map(str::to_string),
        channel: header_str(&headers, "x-moviepilot-agent-channel").map(str::to_string),
        source: header_str(&headers, "x-moviepilot-agent-source").map(str::to_string),
    };
    let flight = InFlight::begin(
        &shared,
        Attempt {
            sequence: 0,
            method: method.clone(),
            path: path.clone(),
            operation_id: None,
            path_params: Map::new(),
            query: query_object(&query),
            body: None,
            user: None,
            agent,
            refusal: None,
            faults: Vec::new(),
            status: None,
            reply: Reply::InFlight,
            outcome: Outcome::Unknown,
            effects: Vec::new(),
            observations: Vec::new(),
            duplicate_attempt: false,
        },
    );
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return flight.refuse(
                413,
                json!({"detail": "Request body too large or unreadable"}),
                RefusalKind::Invalid,
                "request body too large or unreadable",
            );
        }
    };

    if path.trim_end_matches('/') == LOGIN_PATH {
        return login(&shared, flight, &method, &bytes);
    }

    if let Some(doc) = shared.openapi.routes() {
        match recorded::route_by_document(doc, &method, &path, &query) {
            DocRouting::Operation { keep_query } => {
                // The recorded server ignores what its route does not declare.
                query.retain(|(k, _)| keep_query.contains(k));
            }
            DocRouting::NotFound => {
                return flight.refuse(
                    404,
                    json!({"detail": "Not Found"}),
                    RefusalKind::NotFound,
                    "not found",
                );
            }
            DocRouting::MethodNotAllowed => return method_not_allowed(flight),
            DocRouting::Redirect(to) => {
                let mut headers = HeaderMap::new();
                if let Ok(v) = HeaderValue::from_str(&to) {
                    headers.insert(header::LOCATION, v);
                }
                return flight.answer(307, Value::Null, headers, |a| {
                    a.refusal = Some(Refusal {
                        kind: RefusalKind::NotFound,
                        message: format!("redirected to {to}"),
                    });
                });
            }
            DocRouting::Captured { route } => {
                return flight.refuse(
                    200,
                    json!({}),
                    RefusalKind::Captured,
                    &format!("answered by {route}"),
                );
            }
        }
    }
    let (op, mut path_params) = match catalog().resolve(&method, &path, &query) {
        Route::Operation { op, path_params } => (op, path_params),
        Route::MethodNotAllowed => return method_not_allowed(flight),
        Route::NotFound => {
            return flight.refuse(
                404,
                json!({"detail": "Not Found"}),
                RefusalKind::NotFound,
                "not found",
            );
        }
    };
    if shared.answers == AnswerStyle::RecordedV2 {
        recorded::normalise_v2_request(&mut path_params, &mut query);
    }
    let body_json = if bytes.is_empty() {
        Ok(None)
    } else {
        serde_json::from_slice::<Value>(&bytes).map(Some)
    };
    flight.update(|a| {
        a.operation_id = Some(op.id.to_string());
        a.path_params = path_params
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        a.body = match &body_json {
            Ok(v) => v.clone(),
            Err(_) => Some(Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        };
    });

    let (user, super_user) = match authenticate(&shared, &headers) {
        Ok(found) => found,
        Err((failure, kind)) => return auth_response(flight, failure, kind),
    };
    flight.update(|a| {
        a.user = Some(AttemptUser {
            id: user.id,
            name: user.name.clone(),
            super_user,
        });
    });
    if op.admin && !super_user {
        let failure = match shared.answers {
            AnswerStyle::Envelope => auth::not_superuser(),
            AnswerStyle::RecordedV2 => auth::not_superuser_v2(),
        };
        return auth_response(flight, failure, RefusalKind::Forbidden);
    }
    let body = match body_json {
        Ok(b) => b,
        Err(_) => {
            let served =
                crate::world::invalid(&["body"], "json_invalid", "JSON decode error", Value::Null);
            return flight.refuse(422, served.body, RefusalKind::Invalid, "body is not JSON");
        }
    };

    let lower_headers: BTreeMap<String, String> = headers
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION && *name != header::COOKIE)
        .filter_map(|(name, v)| Some((name.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();

    let pre = fire_faults(
        &mut shared.lock(),
        flight.index,
        op.id,
        &lower_headers,
        false,
    );
    for action in &pre {
        if let FaultAction::Stall { ms } = action {
            match ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
                // Until shutdown closes the connection, which drops this future.
                None => std::future::pending::<()>().await,
            }
        }
    }
    for action in &pre {
        match action {
            FaultAction::Respond { status, body, .. } => {
                let body = body.clone().unwrap_or_else(fault_body);
                let headers = reply_headers(shared.answers, &body, None);
                return flight.answer(*status, body, headers, |a| {
                    a.refusal = Some(Refusal {
                        kind: RefusalKind::Fault,
                        message: "answered by a fault".to_string(),
                    });
                });
            }
            FaultAction::Drop { .. } => return drop_connection(&shared, flight, kill).await,
            FaultAction::Stall { .. } => {}
        }
    }

    let call = Call {
        op,
        path_params: &path_params,
        query: &query,
        body: body.as_ref(),
        user: &user,
        super_user,
    };
    match settle(&shared, flight.index, &call, &lower_headers) {
        Settled::NotServed => {
            let body = json!({
                "detail": format!("fake MoviePilot does not serve {} / 评测环境未实现该操作", op.id),
                "operation_id": op.id,
            });
            flight.refuse(
                501,
                body,
                RefusalKind::NotServed,
                &format!("{} is not served", op.id),
            )
        }
        Settled::Dropped => drop_connection(&shared, flight, kill).await,
        Settled::Reply {
            status,
            body,
            collection,
        } => {
            let body = match shared.answers {
                AnswerStyle::Envelope => body,
                AnswerStyle::RecordedV2 => recorded::shape_v2_reply(op, status, body),
            };
            let headers = reply_headers(shared.answers, &body, collection);
            flight.answer(status, body, headers, |_| {})
        }
    }
}

/// The headers of a reply: collection headers in the world's style; none in the recorded
/// server's, whose string bodies (a 500's text) go out as plain text.
fn reply_headers(style: AnswerStyle, body: &Value, collection: Option<Collection>) -> HeaderMap {
    match style {
        AnswerStyle::Envelope => collection_headers(collection),
        AnswerStyle::RecordedV2 => {
            let mut headers = HeaderMap::new();
            if body.is_string() {
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
            }
            headers
        }
    }
}

/// `GET /api/v1/openapi.json`: the served document, or 404 (counted, not in the ledger).
fn openapi_document(shared: &Shared, method: &str) -> Response {
    shared
        .openapi_reads
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    match recorded::document_bytes(&shared.openapi) {
        Some(bytes) if method == "GET" => {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            (StatusCode::OK, headers, bytes.to_vec()).into_response()
        }
        Some(_) => respond(
            405,
            json!({"detail": "Method Not Allowed"}),
            HeaderMap::new(),
        ),
        None => respond(404, json!({"detail": "Not Found"}), HeaderMap::new()),
    }
}

/// MoviePilot's collection headers of a list reply.
fn collection_headers(collection: Option<Collection>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(c) = collection {
        let mut put = |name: &'static str, v: Option<u64>| {
            if let Some(v) = v {
                headers.insert(name, HeaderValue::from(v));
            }
        };
        put("x-result-count", Some(c.result_count as u64));
        put("x-total-count", c.total_count.map(|n| n as u64));
        put("x-page", c.page);
        put("x-page-size", c.page_size);
    }
    headers
}

/// The bearer's user (a copy) and whether it may use admin operations.
fn authenticate(
    shared: &Shared,
    headers: &HeaderMap,
) -> std::result::Result<(User, bool), (AuthFailure, RefusalKind)> {
    let inner = shared.lock();
    auth::authenticate(
        header_str(headers, "authorization"),
        &inner.world.state.users,
        &shared.secret_key,
        shared.clock.now(),
    )
    .map(|(user, super_user)| (user.clone(), super_user))
    .map_err(|failure| {
        let kind = if failure.status == 401 {
            RefusalKind::Unauthenticated
        } else {
            RefusalKind::InvalidToken
        };
        (failure, kind)
    })
}

/// The faults of one phase that fire for this call, noted on its attempt.
fn fire_faults(
    inner: &mut Inner,
    index: usize,
    operation_id: &str,
    headers: &BTreeMap<String, String>,
    after_effect: bool,
) -> Vec<FaultAction> {
    let view = CallView {
        operation_id,
        headers,
        unknown_returned: inner.unknown_returned,
    };
    let fired = inner.faults.fire(&view, after_effect);
    if let Some(a) = inner.ledger.get_mut(index) {
        a.faults.extend(fired.iter().cloned());
    }
    fired
}

enum Settled {
    NotServed,
    Dropped,
    Reply {
        status: u16,
        body: Value,
        collection: Option<Collection>,
    },
}

/// Serves the call, decides the post-effect faults and records the outcome, in one locked step.
fn settle(
    shared: &Shared,
    index: usize,
    call: &Call<'_>,
    headers: &BTreeMap<String, String>,
) -> Settled {
    let mut inner = shared.lock();
    let Some(served) = inner.world.serve(call) else {
        return Settled::NotServed;
    };
    let post = if served.landed(call.op.effect.is_read()) {
        fire_faults(&mut inner, index, call.op.id, headers, true)
    } else {
        Vec::new()
    };
    let Served {
        status,
        body,
        collection,
        effects,
        observations,
        duplicate,
        refusal,
    } = served;
    let dropped = post.iter().any(|a| matches!(a, FaultAction::Drop { .. }));
    let replaced = post.iter().find_map(|a| match a {
        FaultAction::Respond { status, body, .. } => {
            Some((*status, body.clone().unwrap_or_else(fault_body)))
        }
        _ => None,
    });
    if let Some(a) = inner.ledger.get_mut(index) {
        a.effects = effects;
        a.duplicate_attempt = duplicate;
        a.refusal = refusal;
        // A lost or replaced reply shows the client nothing: no observations.
        if !dropped && replaced.is_none() {
            a.observations = observations;
        }
    }
    if dropped {
        // Under the same lock as the effect, so no later call sees one without the other.
        mark_dropped(&mut inner, index);
    }
    match (dropped, replaced) {
        (true, _) => Settled::Dropped,
        (false, Some((status, body))) => Settled::Reply {
            status,
            body,
            collection: None,
        },
        (false, None) => Settled::Reply {
            status,
            body,
            collection,
        },
    }
}

fn fault_body() -> Value {
    json!({
        "success": false,
        "message": "服务暂时不可用，请稍后重试 / service temporarily unavailable, retry later",
        "data": null,
    })
}

fn mark_dropped(inner: &mut Inner, index: usize) {
    inner.unknown_returned = true;
    if let Some(a) = inner.ledger.get_mut(index) {
        a.reply = Reply::Dropped;
        a.outcome = Outcome::Unknown;
        a.status = None;
        a.observations.clear();
    }
}

/// Closes the connection without a response; the attempt says `dropped`.
async fn drop_connection(
    shared: &Arc<Shared>,
    mut flight: InFlight,
    kill: Option<ConnectionKill>,
) -> Response {
    flight.done = true;
    mark_dropped(&mut shared.lock(), flight.index);
    match kill {
        Some(ConnectionKill(token)) => {
            token.cancel();
            // The connection task drops this future with the socket.
            std::future::pending::<Response>().await
        }
        // Not reachable through the accept loop; answer something rather than hang.
        None => respond(500, fault_body(), HeaderMap::new()),
    }
}

fn method_not_allowed(flight: InFlight) -> Response {
    flight.refuse(
        405,
        json!({"detail": "Method Not Allowed"}),
        RefusalKind::MethodNotAllowed,
        "method not allowed",
    )
}

fn login(shared: &Arc<Shared>, flight: InFlight, method: &str, bytes: &[u8]) -> Response {
    if method != "POST" {
        return method_not_allowed(flight);
    }
    let form: Vec<(String, String)> = form_urlencoded::parse(bytes).into_owned().collect();
    let shown: Map<String, Value> = form
        .iter()
        .map(|(k, v)| {
            let v = if k.contains("password") || k.contains("secret") {
                "***"
            } else {
                v.as_str()
            };
            (k.clone(), json!(v))
        })
        .collect();
    flight.update(|a| a.body = Some(Value::Object(shown)));
    let result = {
        let inner = shared.lock();
        auth::login(
            &form,
            &inner.world.state.users,
            &shared.secret_key,
            shared.token_ttl,
            shared.clock.now(),
        )
    };
    match result {
        Ok((user, reply)) => flight.answer(200, reply, HeaderMap::new(), |a| {
            a.user = Some(AttemptUser {
                id: user.id,
                name: user.name.clone(),
                super_user: user.super_user,
            });
        }),
        Err(failure) => {
            let kind = if failure.status == 422 {
                RefusalKind::Invalid
            } else {
                RefusalKind::BadCredentials
            };
            auth_response(flight, failure, kind)
        }
    }
}
