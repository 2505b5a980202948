//! One conversation's browser: a Chromium process with its own profile, its tabs, and the
//! actions on them. Every request any of its pages makes (navigations, redirects, sub-resources,
//! scripts' fetches) is paused by the DevTools `Fetch` domain and continued only after the
//! request guard admitted its URL, unless the tab was navigated with private networks allowed;
//! every connection then goes through the profile's egress proxy (`egress.rs`), which connects
//! only to addresses the guard checked.

use crate::cdp::{Cdp, CdpEvent};
use crate::dom;
use crate::egress::Egress;
use crate::error::{BrowserError, Result};
use crate::jpeg::jpeg_size;
use crate::{RequestGuard, launch};
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// Screenshot bounds (runtime spec §9.2): raw JPEG bytes and pixel area.
pub const SCREENSHOT_MAX_BYTES: usize = 150 * 1024;
pub const SCREENSHOT_MAX_AREA: f64 = 1280.0 * 720.0;
/// How long a starting browser may take to answer (a loaded two-core box needs seconds).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The JPEG qualities tried, best first, before the image is scaled down.
const QUALITIES: &[u32] = &[80, 60, 45, 30];

/// A page the session has.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TabInfo {
    pub tab_id: String,
    pub url: String,
    pub title: String,
    pub active: bool,
}

/// Where a page is.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PageInfo {
    pub tab_id: String,
    pub url: String,
    pub title: String,
}

/// A screenshot: JPEG bytes and the size they decode to.
#[derive(Debug, Clone)]
pub struct Screenshot {
    pub jpeg: Vec<u8>,
    pub width: u32,
    pub height: u32,
    pub quality: u32,
    /// The element or viewport was larger than the pixel bound and was scaled down.
    pub scaled: bool,
}

/// How an element is named by the caller.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Selector(&'a str),
    Ref(&'a str),
}

impl Target<'_> {
    fn args(&self) -> Value {
        match self {
            Self::Selector(s) => json!({"selector": s}),
            Self::Ref(r) => json!({"ref": r}),
        }
    }
}

#[derive(Debug)]
struct Tab {
    tab_id: String,
    target_id: String,
    session_id: String,
    /// Requests of this tab may reach private addresses (set by the last `goto`).
    allow_private: bool,
    /// Why the guard refused the last request of this tab (reported by `goto`).
    last_refusal: Option<String>,
    /// Its requests are intercepted and it runs (set up after it attached).
    ready: bool,
}

#[derive(Debug, Default)]
struct Tabs {
    list: Vec<Tab>,
    active: Option<String>,
    next: u32,
}

struct Shared {
    tabs: Mutex<Tabs>,
    attached: Notify,
    guard: Arc<dyn RequestGuard>,
}

impl Shared {
    fn tabs(&self) -> std::sync::MutexGuard<'_, Tabs> {
        self.tabs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running browser of one (user, session).
pub struct Browser {
    cdp: Cdp,
    shared: Arc<Shared>,
    child: tokio::sync::Mutex<Option<tokio::process::Child>>,
    pid: Option<u32>,
    profile: Mutex<Option<tempfile::TempDir>>,
    last_used: Mutex<Instant>,
    egress: Egress,
}

impl Browser {
    /// Starts Chromium and opens its first tab.
    pub(crate) async fn start(
        exe: &std::path::Path,
        profile: tempfile::TempDir,
        extra_args: &[String],
        guard: Arc<dyn RequestGuard>,
        egress: Egress,
    ) -> Result<Self> {
        let mut args = egress.chromium_args().to_vec();
        args.extend_from_slice(extra_args);
        let launched = launch::launch(exe, profile.path(), &args)?;
        let pid = launched.child.id();
        let (cdp, events) = Cdp::start(launched.to_browser, launched.from_browser);
        let shared = Arc::new(Shared {
            tabs: Mutex::new(Tabs::default()),
            attached: Notify::new(),
            guard,
        });
        tokio::spawn(event_loop(cdp.clone(), shared.clone(), events));
        let browser = Self {
            cdp,
            shared,
            child: tokio::sync::Mutex::new(Some(launched.child)),
            pid,
            profile: Mutex::new(Some(profile)),
            last_used: Mutex::new(Instant::now()),
            egress,
        };
        let first = tokio::time::timeout(START_TIMEOUT, async {
            // Every page, ours or a page's popup, is attached paused so its requests are
            // guarded before its first one leaves.
            browser
                .cdp
                .call(
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                    None,
                )
                .await?;
            // The page Chromium opened at start becomes the first tab.
            let targets = browser
                .cdp
                .call("Target.getTargets", json!({}), None)
                .await?;
            let first = targets["targetInfos"]
                .as_array()
                .and_then(|l| l.iter().find(|t| t["type"] == "page"))
                .and_then(|t| t["targetId"].as_str())
                .map(str::to_string);
            match first {
                Some(target) => {
                    let tab = browser.wait_attached(&target).await?;
                    browser.shared.tabs().active = Some(tab);
                    Ok(())
                }
                None => browser.open_tab(None).await.map(drop),
            }
        })
        .await;
        match first {
            Ok(Ok(_)) => Ok(browser),
            Ok(Err(e)) => {
                browser.close().await;
                Err(BrowserError::Unavailable(format!(
                    "the browser started but did not answer: {e}"
                )))
            }
            Err(_) => {
                browser.close().await;
                Err(BrowserError::Unavailable(format!(
                    "the browser did not answer within {} s",
                    START_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// The browser's process id (its process group has the same id).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the browser process is gone.
    pub fn is_closed(&self) -> bool {
        self.cdp.is_closed()
    }

    /// When the session last ran an action.
    pub fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Ends the browser: asks it to close, then kills its process group; removes the profile.
    pub async fn close(&self) {
        let mut child = self.child.lock().await;
        if let Some(mut c) = child.take() {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                self.cdp.call("Browser.close", json!({}), None),
            )
            .await;
            if tokio::time::timeout(Duration::from_secs(3), c.wait())
                .await
                .is_err()
            {
                let _ = c.start_kill();
                let _ = c.wait().await;
            }
            // Helpers (renderers, the zygote) share its process group.
            if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
                // SAFETY: kill has no memory preconditions; a group that is gone answers ESRCH.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        }
        drop(child);
        self.egress.stop();
        self.profile
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    // ---- tabs ----

    /// Opens a tab (on `url` when given, checked like `goto`, public addresses only) and makes
    /// it the active one.
    pub async fn open_tab(&self, url: Option<&str>) -> Result<PageInfo> {
        self.touch();
        let created = self
            .cdp
            .call("Target.createTarget", json!({"url": "about:blank"}), None)
            .await?;
        let target_id = created["targetId"].as_str().unwrap_or_default().to_string();
        let tab_id = self.wait_attached(&target_id).await?;
        self.shared.tabs().active = Some(tab_id.clone());
        match url {
            Some(u) => self.goto(u, false, Duration::from_secs(30)).await,
            None => Ok(PageInfo {
                tab_id,
                url: "about:blank".into(),
                title: String::new(),
            }),
        }
    }

    async fn wait_attached(&self, target_id: &str) -> Result<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.shared.attached.notified();
            if let Some(t) = self
                .shared
                .tabs()
                .list
                .iter()
                .find(|t| t.target_id == target_id && t.ready)
            {
                return Ok(t.tab_id.clone());
            }
            if self.cdp.is_closed() {
                return Err(BrowserError::Closed);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, notified).await.is_err() {
                return Err(BrowserError::Protocol(
                    "the new tab was not attached".into(),
                ));
            }
        }
    }

    /// The session's tabs, in opening order.
    pub async fn list_tabs(&self) -> Result<Vec<TabInfo>> {
        self.touch();
        let (ids, active): (Vec<(String, String)>, Option<String>) = {
            let tabs = self.shared.tabs();
            (
                tabs.list
                    .iter()
                    .map(|t| (t.tab_id.clone(), t.session_id.clone()))
                    .collect(),
                tabs.active.clone(),
            )
        };
        let mut out = Vec::new();
        for (tab_id, session) in ids {
            let state = self
                .eval_in(&session, &dom::script(dom::PAGE_STATE, &json!({})))
                .await
                .unwrap_or(Value::Null);
            out.push(TabInfo {
                active: active.as_deref() == Some(&tab_id),
                tab_id,
                url: state["url"].as_str().unwrap_or_default().to_string(),
                title: state["title"].as_str().unwrap_or_default().to_string(),
            });
        }
        Ok(out)
    }

    /// Makes `tab_id` the active tab.
    pub async fn focus_tab(&self, tab_id: &str) -> Result<PageInfo> {
        self.touch();
        let target = self.tab_field(Some(tab_id), |t| t.target_id.clone())?;
        self.cdp
            .call("Target.activateTarget", json!({"targetId": target}), None)
            .await?;
        self.shared.tabs().active = Some(tab_id.to_string());
        self.page_info(tab_id).await
    }

    /// Closes `tab_id`; the last opened remaining tab becomes active.
    pub async fn close_tab(&self, tab_id: &str) -> Result<()> {
        self.touch();
        let target = self.tab_field(Some(tab_id), |t| t.target_id.clone())?;
        self.cdp
            .call("Target.closeTarget", json!({"targetId": target}), None)
            .await?;
        let mut tabs = self.shared.tabs();
        tabs.list.retain(|t| t.tab_id != tab_id);
        if tabs.active.as_deref() == Some(tab_id) {
            tabs.active = tabs.list.last().map(|t| t.tab_id.clone());
        }
        Ok(())
    }

    fn tab_field<T>(&self, tab_id: Option<&str>, f: impl Fn(&Tab) -> T) -> Result<T> {
        let tabs = self.shared.tabs();
        let want = match tab_id {
            Some(t) => t.to_string(),
            None => tabs
                .active
                .clone()
                .ok_or_else(|| BrowserError::UnknownTab("(no open tab; use open_tab)".into()))?,
        };
        tabs.list
            .iter()
            .find(|t| t.tab_id == want)
            .map(f)
            .ok_or(BrowserError::UnknownTab(want))
    }

    fn active_session(&self) -> Result<(String, String)> {
        self.tab_field(None, |t| (t.tab_id.clone(), t.session_id.clone()))
    }

    async fn page_info(&self, tab_id: &str) -> Result<PageInfo> {
        let session = self.tab_field(Some(tab_id), |t| t.session_id.clone())?;
        let state = self
            .eval_in(&session, &dom::script(dom::PAGE_STATE, &json!({})))
            .await?;
        Ok(PageInfo {
            tab_id: tab_id.to_string(),
            url: state["url"].as_str().unwrap_or_default().to_string(),
            title: state["title"].as_str().unwrap_or_default().to_string(),
        })
    }

    // ---- navigation ----

    /// Navigates the active tab to `url` (http or https) and waits for the page to load. Without
    /// `allow_private`, this and every later request of the tab must pass the request guard.
    pub async fn goto(
        &self,
        url: &str,
        allow_private: bool,
        timeout: Duration,
    ) -> Result<PageInfo> {
        self.touch();
        let parsed =
            url::Url::parse(url).map_err(|e| BrowserError::InvalidArgument(format!("url: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(BrowserError::NavigationRefused(format!(
                "scheme `{}` is not allowed (only http and https)",
                parsed.scheme()
            )));
        }
        if !allow_private {
            self.shared
                .guard
                .admit(parsed.as_str())
                .await
                .map_err(BrowserError::NavigationRefused)?;
        }
        let (tab_id, session) = self.active_session()?;
        {
            let mut tabs = self.shared.tabs();
            if let Some(t) = tabs.list.iter_mut().find(|t| t.tab_id == tab_id) {
                t.allow_private = allow_private;
                t.last_refusal = None;
            }
        }
        // The proxy follows the profile's current action.
        self.egress.allow_private(allow_private);
        let mark = self.egress.mark();
        let secs = timeout.as_secs();
        let nav = tokio::time::timeout(
            timeout,
            self.cdp.call(
                "Page.navigate",
                json!({"url": parsed.as_str()}),
                Some(&session),
            ),
        )
        .await
        .map_err(|_| BrowserError::Timeout(secs))??;
        if let Some(err) = nav.get("errorText").and_then(Value::as_str) {
            let refusal = self
                .tab_field(Some(&tab_id), |t| t.last_refusal.clone())?
                .or_else(|| self.egress.refused_since(mark, None));
            return Err(match refusal {
                Some(why) => BrowserError::NavigationRefused(why),
                None => BrowserError::NavigationFailed(err.to_string()),
            });
        }
        self.wait_until(&session, &json!({}), timeout).await?;
        let page = self.page_info(&tab_id).await?;
        // A plain-HTTP document the proxy refused arrives as its 403 page: report the refusal.
        let host = url::Url::parse(&page.url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()));
        if let Some(why) = host.and_then(|h| self.egress.refused_since(mark, Some(&h))) {
            return Err(BrowserError::NavigationRefused(why));
        }
        Ok(page)
    }

    /// Waits for an element matching `selector`, for `text` in the page, or (neither given)
    /// for the document to finish loading.
    pub async fn wait(
        &self,
        selector: Option<&str>,
        text: Option<&str>,
        timeout: Duration,
    ) -> Result<PageInfo> {
        self.touch();
        let (tab_id, session) = self.active_session()?;
        self.wait_until(
            &session,
            &json!({"selector": selector, "text": text}),
            timeout,
        )
        .await?;
        self.page_info(&tab_id).await
    }

    async fn wait_until(&self, session: &str, args: &Value, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let probe = dom::script(dom::WAIT_PROBE, args);
        loop {
            // A navigation in flight destroys the context an evaluation runs in; that is "not yet".
            match self.eval_in(session, &probe).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Ok(_) => {}
                Err(e @ (BrowserError::InvalidArgument(_) | BrowserError::Closed)) => {
                    return Err(e);
                }
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(BrowserError::Timeout(timeout.as_secs()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // ---- reading ----

    /// The page's elements with refs, and the start of its text.
    pub async fn snapshot(&self, max_elements: usize, text_chars: usize) -> Result<Value> {
        self.touch();
        let (tab_id, session) = self.active_session()?;
        let mut v = self
            .eval_in(
                &session,
                &dom::script(
                    dom::SNAPSHOT,
                    &json!({"max": max_elements, "text_chars": text_chars}),
                ),
            )
            .await?;
        v["tab_id"] = Value::String(tab_id);
        Ok(v)
    }

    /// The page's text (`html` false) or HTML, uncapped (the caller caps).
    pub async fn content(&self, html: bool) -> Result<Value> {
        self.touch();
        let (_, session) = self.active_session()?;
        self.eval_in(
            &session,
            &dom::script(
                dom::CONTENT,
                &json!({"kind": if html {"html"} else {"text"}}),
            ),
        )
        .await
    }

    /// The cookies of the active tab's page.
    pub async fn cookies(&self) -> Result<Value> {
        self.touch();
        let (_, session) = self.active_session()?;
        let v = self
            .cdp
            .call("Network.getCookies", json!({}), Some(&session))
            .await?;
        Ok(v.get("cookies")
            .cloned()
            .unwrap_or(Value::Array(Vec::new())))
    }

    /// Runs `expression` in the page (promises awaited) and answers its JSON value.
    pub async fn evaluate(&self, expression: &str, timeout: Duration) -> Result<Value> {
        self.touch();
        let (_, session) = self.active_session()?;
        let v = tokio::time::timeout(
            timeout,
            self.cdp.call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true,
                       "userGesture": true}),
                Some(&session),
            ),
        )
        .await
        .map_err(|_| BrowserError::Timeout(timeout.as_secs()))??;
        if let Some(ex) = v.get("exceptionDetails") {
            return Err(BrowserError::Script(exception_text(ex)));
        }
        Ok(v["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    // ---- acting ----

    /// Clicks the element with the mouse at its centre (by script when something covers it).
    pub async fn click(&self, target: Target<'_>) -> Result<Value> {
        self.touch();
        let (_, session) = self.active_session()?;
        let args = target.args();
        let point = self
            .eval_in(&session, &dom::script(dom::CLICK_POINT, &args))
            .await?;
        if point["hit"].as_bool() != Some(true) {
            self.eval_in(&session, &dom::script(dom::CLICK_SCRIPT, &args))
                .await?;
            return Ok(
                json!({"clicked": true, "by": "script", "note": "the element's centre was covered; clicked by script"}),
            );
        }
        let (x, y) = (point["x"].clone(), point["y"].clone());
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.cdp
                .call(
                    "Input.dispatchMouseEvent",
                    json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
                    Some(&session),
                )
                .await?;
        }
        Ok(json!({"clicked": true, "by": "mouse"}))
    }

    /// Replaces the content of an input, text area or editable element with `text`, typed.
    pub async fn fill(&self, target: Target<'_>, text: &str) -> Result<Value> {
        self.touch();
        let (_, session) = self.active_session()?;
        let args = target.args();
        self.eval_in(&session, &dom::script(dom::FOCUS_FOR_FILL, &args))
            .await?;
        self.cdp
            .call("Input.insertText", json!({"text": text}), Some(&session))
            .await?;
        let len = self
            .eval_in(&session, &dom::script(dom::AFTER_FILL, &args))
            .await?;
        Ok(json!({"filled": true, "length": len}))
    }

    /// Chooses the option of a `<select>` whose value or label is `value`.
    pub async fn select(&self, target: Target<'_>, value: &str) -> Result<Value> {
        self.touch();
        let (_, session) = self.active_session()?;
        let mut args = target.args();
        args["value"] = Value::String(value.to_string());
        self.eval_in(&session, &dom::script(dom::SELECT, &args))
            .await
    }

    /// A JPEG of the viewport, or of the one element `selector` matches, within the bounds.
    pub async fn screenshot(&self, selector: Option<&str>) -> Result<Screenshot> {
        self.touch();
        let (_, session) = self.active_session()?;
        let (x, y, w, h) = match selector {
            Some(s) => {
                let b = self
                    .eval_in(
                        &session,
                        &dom::script(dom::ELEMENT_BOX, &Target::Selector(s).args()),
                    )
                    .await?;
                let f = |k: &str| b[k].as_f64().unwrap_or(0.0);
                (f("x"), f("y"), f("width"), f("height"))
            }
            None => {
                let m = self
                    .cdp
                    .call("Page.getLayoutMetrics", json!({}), Some(&session))
                    .await?;
                let v = &m["cssVisualViewport"];
                let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
                (f("pageX"), f("pageY"), f("clientWidth"), f("clientHeight"))
            }
        };
        if w < 1.0 || h < 1.0 {
            return Err(BrowserError::InvalidArgument(
                "the element has no visible size".into(),
            ));
        }
        let mut scale = (SCREENSHOT_MAX_AREA / (w * h)).sqrt().min(1.0);
        let scaled = scale < 1.0;
        let mut last = 0;
        for _ in 0..4 {
            for &quality in QUALITIES {
                let shot = self
                    .cdp
                    .call(
                        "Page.captureScreenshot",
                        json!({"format": "jpeg", "quality": quality,
                               "clip": {"x": x, "y": y, "width": w, "height": h, "scale": scale},
                               "captureBeyondViewport": false, "fromSurface": true}),
                        Some(&session),
                    )
                    .await?;
                let data = shot["data"].as_str().unwrap_or_default();
                let jpeg = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data)
                    .map_err(|e| BrowserError::Protocol(format!("screenshot data: {e}")))?;
                last = jpeg.len();
                if jpeg.len() <= SCREENSHOT_MAX_BYTES {
                    let (width, height) = jpeg_size(&jpeg).ok_or_else(|| {
                        BrowserError::Protocol("the screenshot is not a JPEG".into())
                    })?;
                    return Ok(Screenshot {
                        jpeg,
                        width,
                        height,
                        quality,
                        scaled: scaled || scale < 1.0,
                    });
                }
            }
            scale *= 0.7;
        }
        Err(BrowserError::ImageTooLarge(last))
    }

    /// Evaluates a page script and maps its `MPA:` errors to typed ones.
    async fn eval_in(&self, session: &str, script: &str) -> Result<Value> {
        let v = self
            .cdp
            .call(
                "Runtime.evaluate",
                json!({"expression": script, "returnByValue": true, "awaitPromise": true}),
                Some(session),
            )
            .await?;
        if let Some(ex) = v.get("exceptionDetails") {
            let text = exception_text(ex);
            return Err(match text.split_once("MPA:") {
                Some((_, rest)) => {
                    let (code, detail) = rest.split_once(':').unwrap_or((rest, ""));
                    match code {
                        "unknown_ref" => BrowserError::UnknownRef(detail.to_string()),
                        "not_found" => BrowserError::ElementNotFound(detail.to_string()),
                        "ambiguous" => BrowserError::AmbiguousSelector {
                            selector: String::new(),
                            count: detail.parse().unwrap_or(0),
                        },
                        _ => BrowserError::InvalidArgument(format!("{code}: {detail}")),
                    }
                }
                None => BrowserError::Script(text),
            });
        }
        Ok(v["result"].get("value").cloned().unwrap_or(Value::Null))
    }
}

fn exception_text(ex: &Value) -> String {
    ex["exception"]["description"]
        .as_str()
        .or_else(|| ex["text"].as_str())
        .unwrap_or("exception")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Attaches pages as they appear and answers paused requests.
async fn event_loop(cdp: Cdp, shared: Arc<Shared>, mut events: mpsc::UnboundedReceiver<CdpEvent>) {
    while let Some(ev) = events.recv().await {
        match ev.method.as_str() {
            "Target.attachedToTarget" => {
                let info = &ev.params["targetInfo"];
                let session = ev.params["sessionId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if info["type"].as_str() != Some("page") {
                    // Workers and the like: let them run (their requests are the page's).
                    let cdp = cdp.clone();
                    tokio::spawn(async move {
                        let _ = cdp
                            .call("Runtime.runIfWaitingForDebugger", json!({}), Some(&session))
                            .await;
                    });
                    continue;
                }
                let target_id = info["targetId"].as_str().unwrap_or_default().to_string();
                {
                    let mut tabs = shared.tabs();
                    tabs.next += 1;
                    let tab_id = format!("t{}", tabs.next);
                    tabs.list.push(Tab {
                        tab_id,
                        target_id,
                        session_id: session.clone(),
                        allow_private: false,
                        last_refusal: None,
                        ready: false,
                    });
                }
                let (cdp, shared) = (cdp.clone(), shared.clone());
                tokio::spawn(async move {
                    let s = Some(session.as_str());
                    let _ = cdp
                        .call(
                            "Fetch.enable",
                            json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
                            s,
                        )
                        .await;
                    let _ = cdp.call("Page.enable", json!({}), s).await;
                    // The viewport the screenshot bounds are written for, whatever the window.
                    let _ = cdp
                        .call(
                            "Emulation.setDeviceMetricsOverride",
                            json!({"width": 1280, "height": 720, "deviceScaleFactor": 1, "mobile": false}),
                            s,
                        )
                        .await;
                    let _ = cdp
                        .call("Runtime.runIfWaitingForDebugger", json!({}), s)
                        .await;
                    if let Some(t) = shared
                        .tabs()
                        .list
                        .iter_mut()
                        .find(|t| t.session_id == session)
                    {
                        t.ready = true;
                    }
                    shared.attached.notify_waiters();
                });
            }
            "Target.detachedFromTarget" => {
                let session = ev.params["sessionId"].as_str().unwrap_or_default();
                let mut tabs = shared.tabs();
                let gone: Option<String> = tabs
                    .list
                    .iter()
                    .find(|t| t.session_id == session)
                    .map(|t| t.tab_id.clone());
                tabs.list.retain(|t| t.session_id != session);
                if gone.is_some() && tabs.active == gone {
                    tabs.active = tabs.list.last().map(|t| t.tab_id.clone());
                }
            }
            "Fetch.requestPaused" => {
                let Some(session) = ev.session_id else {
                    continue;
                };
                let (cdp, shared) = (cdp.clone(), shared.clone());
                tokio::spawn(answer_paused(cdp, shared, session, ev.params));
            }
            _ => {}
        }
    }
}

/// Continues a paused request the guard admits (or any, on a tab allowed private networks),
/// fails the others and remembers why.
async fn answer_paused(cdp: Cdp, shared: Arc<Shared>, session: String, params: Value) {
    let request_id = params["requestId"].clone();
    let url = params["request"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let allow = shared
        .tabs()
        .list
        .iter()
        .find(|t| t.session_id == session)
        .map(|t| t.allow_private);
    let scheme = url.split(':').next().unwrap_or_default();
    let verdict = match (allow, scheme) {
        // Data and blob URLs never leave the browser.
        (_, "data" | "blob") => Ok(()),
        (Some(true), "http" | "https") => Ok(()),
        (Some(false), "http" | "https") => shared.guard.admit(&url).await,
        // Unknown session (a worker's) or another scheme (ftp, file, …): refused.
        _ => Err(format!("`{scheme}` requests are not allowed")),
    };
    let s = Some(session.as_str());
    match verdict {
        Ok(()) => {
            let _ = cdp
                .call("Fetch.continueRequest", json!({"requestId": request_id}), s)
                .await;
        }
        Err(why) => {
            if let Some(t) = shared
                .tabs()
                .list
                .iter_mut()
                .find(|t| t.session_id == session)
            {
                t.last_refusal = Some(format!("{url}: {why}"));
            }
            let _ = cdp
                .call(
                    "Fetch.failRequest",
                    json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
                    s,
                )
                .await;
        }
    }
}
