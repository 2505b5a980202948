//! `recognize_captcha` (seed agent.md, 工具图片与模型视觉): reads the captcha the page shows now
//! — a screenshot of the one element `selector` names, in the conversation's active tab (never
//! a second download, which would change the code) — with the configured OCR service
//! (`MPA_CAPTCHA_OCR_URL`, MoviePilot's OCR protocol: `POST <url>/captcha/base64` with
//! `{"base64_img": …}` answering `{"result": "…"}`).
//!
//! At most [`MAX_ATTEMPTS`] recognitions per turn; each must be checked by submitting it and
//! reading the site's real response. Without an OCR service, or when it cannot read the image,
//! the result says so and tells the model never to guess.

use super::browse_webpage::session_key;
use super::{ToolContext, ToolMeta, ToolOutput, TypedTool};
use async_trait::async_trait;
use base64::Engine as _;
use mpa_browser::Browsers;
use mpa_protocol::{EffectClass, Outcome};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

pub const NAME: &str = "recognize_captcha";
/// Recognitions per turn (the seed: OCR and vision together, three submissions at most).
pub const MAX_ATTEMPTS: u32 = 3;
const OCR_TIMEOUT: Duration = Duration::from_secs(20);

const NEVER_GUESS: &str = "Do not guess the code. If you can see images, look at it with \
browse_webpage(action=\"screenshot\", selector=<the same selector>) in the same tab; otherwise \
(or if it is unreadable) ask the user to read it or to log in by hand.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecognizeCaptchaArgs {
    /// CSS selector of the captcha image on the current page (must match exactly one element).
    pub selector: String,
}

/// The OCR service's base URL.
#[derive(Debug, Clone)]
pub struct OcrService {
    pub url: String,
    client: reqwest::Client,
}

impl OcrService {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            client: reqwest::Client::builder()
                .timeout(OCR_TIMEOUT)
                .build()
                .unwrap_or_default(),
        }
    }

    async fn read(&self, jpeg: &[u8]) -> Result<String, String> {
        let endpoint = format!("{}/captcha/base64", self.url.trim_end_matches('/'));
        let body = json!({"base64_img": base64::engine::general_purpose::STANDARD.encode(jpeg)});
        let resp = self
            .client
            .post(&endpoint)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("the OCR service did not answer: {}", e.without_url()))?;
        if !resp.status().is_success() {
            return Err(format!("the OCR service answered HTTP {}", resp.status()));
        }
        let v: Value = resp
            .json()
            .await
            .map_err(|_| "the OCR service's answer is not JSON".to_string())?;
        let text = v
            .get("result")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default();
        if text.is_empty() {
            return Err("the OCR service could not read the image".into());
        }
        Ok(text.to_string())
    }
}

/// Recognitions used in this turn.
#[derive(Debug, Default)]
struct CaptchaAttempts(u32);

pub struct RecognizeCaptcha {
    pub browsers: Browsers,
    pub ocr: Option<OcrService>,
}

#[async_trait]
impl TypedTool for RecognizeCaptcha {
    type Args = RecognizeCaptchaArgs;
    const NAME: &'static str = NAME;

    fn description(&self) -> String {
        "Read a captcha shown on the current browser page with the configured OCR service: the \
         element `selector` names is captured in the same tab (the code the site expects now). \
         At most 3 attempts per request; after each, submit it and check the site's real \
         response (a wrong code: refresh the captcha, try again). Never guess a code."
            .into()
    }

    fn meta(&self) -> ToolMeta {
        // It sends the page's image to the OCR service.
        ToolMeta::new(EffectClass::ExternalSideEffect)
    }

    async fn run(&self, ctx: ToolContext, args: RecognizeCaptchaArgs) -> ToolOutput {
        let fail = |code: &str, message: String| {
            ToolOutput::object(
                json!({"success": false, "error": code, "message": message})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                Outcome::Failed,
            )
        };
        let Some(ocr) = &self.ocr else {
            return fail(
                "ocr_unconfigured",
                format!("No OCR service is configured (MPA_CAPTCHA_OCR_URL). {NEVER_GUESS}"),
            );
        };
        if ctx.turn.with(|a: &mut CaptchaAttempts| a.0) >= MAX_ATTEMPTS {
            return fail(
                "captcha_attempts_exhausted",
                format!(
                    "{MAX_ATTEMPTS} captcha attempts were used in this request. Ask the user to \
                     read the code or to log in by hand; do not guess."
                ),
            );
        }
        let Some(browser) = self.browsers.existing(&session_key(&ctx)).await else {
            return fail(
                "no_page",
                "No browser page is open in this conversation; open the login page with \
                 browse_webpage first."
                    .into(),
            );
        };
        let shot = match browser.screenshot(Some(&args.selector)).await {
            Ok(s) => s,
            Err(e) => {
                return fail(
                    e.code(),
                    format!("The captcha element could not be captured: {e}. {NEVER_GUESS}"),
                );
            }
        };
        // An attempt is a recognition asked of the service, whatever it answers.
        let used = ctx.turn.with(|a: &mut CaptchaAttempts| {
            a.0 += 1;
            a.0
        });
        match ocr.read(&shot.jpeg).await {
            Ok(text) => ToolOutput::object(
                json!({
                    "success": true,
                    "text": text,
                    "attempts_used": used,
                    "attempts_left": MAX_ATTEMPTS.saturating_sub(used),
                    "note": "Type it into the captcha field and submit, then check the site's \
                             response; if the code was wrong, refresh the captcha first.",
                })
                .as_object()
                .cloned()
                .unwrap_or_default(),
                Outcome::Succeeded,
            ),
            Err(why) => fail("captcha_unreadable", format!("{why}. {NEVER_GUESS}")),
        }
    }
}
