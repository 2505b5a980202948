//! Images a tool produced (a viewed image, a browser screenshot) on their way to the model.
//!
//! An [`ImageBlock`] rides on a tool result and its transcript message in memory only: it is
//! never serialised (the message field is `#[serde(skip)]`) and its `Debug` shows the format and
//! size, never the bytes, so no log or snapshot can carry image data.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The image formats a model request may carry (spec runtime.md §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageMime {
    Jpeg,
    Png,
    Gif,
    Webp,
}

impl ImageMime {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageMime::Jpeg => "image/jpeg",
            ImageMime::Png => "image/png",
            ImageMime::Gif => "image/gif",
            ImageMime::Webp => "image/webp",
        }
    }

    /// The format a MIME type names (`image/jpg` too), case-insensitive.
    pub fn parse(mime: &str) -> Option<Self> {
        match mime.trim().to_ascii_lowercase().as_str() {
            "image/jpeg" | "image/jpg" => Some(ImageMime::Jpeg),
            "image/png" => Some(ImageMime::Png),
            "image/gif" => Some(ImageMime::Gif),
            "image/webp" => Some(ImageMime::Webp),
            _ => None,
        }
    }
}

/// How closely the model should look (OpenAI's `detail`; other providers ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageDetail {
    #[default]
    Auto,
    Low,
    High,
}

impl ImageDetail {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageDetail::Auto => "auto",
            ImageDetail::Low => "low",
            ImageDetail::High => "high",
        }
    }
}

/// One image of a tool result: its bytes (shared, never copied per request), its checked
/// format and the detail asked for. Width and height were checked by the tool that made it.
#[derive(Clone, PartialEq, Eq)]
pub struct ImageBlock {
    pub data: Arc<[u8]>,
    pub mime: ImageMime,
    pub detail: ImageDetail,
}

impl ImageBlock {
    pub fn new(data: impl Into<Arc<[u8]>>, mime: ImageMime, detail: ImageDetail) -> Self {
        Self {
            data: data.into(),
            mime,
            detail,
        }
    }
}

impl fmt::Debug for ImageBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ImageBlock({}, {} bytes, detail {})",
            self.mime.as_str(),
            self.data.len(),
            self.detail.as_str()
        )
    }
}
