//! What an image given to `view_image` is, from its bytes alone (the header: format, width,
//! height — no decoder), against the limits of spec runtime.md §9.1.

use base64::Engine;
use mpa_protocol::ImageMime;

/// Largest image, in bytes (`IMAGE_MAX_BYTES`).
pub const IMAGE_MAX_BYTES: usize = 786_432;
/// Longest data URL or Base64 text (`IMAGE_MAX_BASE64_CHARS`).
pub const IMAGE_MAX_BASE64_CHARS: usize = 1_048_576;
/// Most pixels (width × height).
pub const IMAGE_MAX_PIXELS: u64 = 16_000_000;

/// An image whose bytes were checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    pub mime: ImageMime,
    pub width: u64,
    pub height: u64,
}

/// Why an image was refused: the tool's error code and what to tell the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: &'static str,
    pub message: String,
}

impl Refused {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// The format the bytes are, checked against `declared` (a data URL's or a server's MIME type,
/// when it names an image), and the size limits.
pub fn probe(bytes: &[u8], declared: Option<&str>) -> Result<Probed, Refused> {
    if bytes.len() > IMAGE_MAX_BYTES {
        return Err(Refused::new(
            "image_too_large",
            format!(
                "the image has {} bytes; at most {IMAGE_MAX_BYTES} are accepted",
                bytes.len()
            ),
        ));
    }
    let kind = imagesize::image_type(bytes).map_err(|_| {
        Refused::new(
            "invalid_image",
            "the data is not a JPEG, PNG, GIF or WEBP image / 不是可识别的图片",
        )
    })?;
    let mime = if kind == imagesize::ImageType::Jpeg {
        ImageMime::Jpeg
    } else if kind == imagesize::ImageType::Png {
        ImageMime::Png
    } else if kind == imagesize::ImageType::Gif {
        ImageMime::Gif
    } else if kind == imagesize::ImageType::Webp {
        ImageMime::Webp
    } else {
        return Err(Refused::new(
            "unsupported_image",
            "only JPEG, PNG, GIF and WEBP images are accepted",
        ));
    };
    if let Some(declared) = declared.map(|d| d.split(';').next().unwrap_or(d).trim())
        && declared.to_ascii_lowercase().starts_with("image/")
    {
        match ImageMime::parse(declared) {
            Some(d) if d == mime => {}
            Some(_) => {
                return Err(Refused::new(
                    "invalid_image",
                    format!(
                        "declared as {declared} but the content is {}",
                        mime.as_str()
                    ),
                ));
            }
            None => {
                return Err(Refused::new(
                    "unsupported_image",
                    format!("{declared} is not accepted; only JPEG, PNG, GIF and WEBP are"),
                ));
            }
        }
    }
    let size = imagesize::blob_size(bytes).map_err(|_| {
        Refused::new(
            "invalid_image",
            "the image is truncated or damaged: its size cannot be read",
        )
    })?;
    let (width, height) = (size.width as u64, size.height as u64);
    if width == 0 || height == 0 {
        return Err(Refused::new("invalid_image", "the image has no pixels"));
    }
    if width.saturating_mul(height) > IMAGE_MAX_PIXELS {
        return Err(Refused::new(
            "image_too_large",
            format!(
                "the image is {width}×{height} pixels; at most {IMAGE_MAX_PIXELS} pixels are accepted"
            ),
        ));
    }
    Ok(Probed {
        mime,
        width,
        height,
    })
}

/// Decodes Base64 text (standard or URL-safe alphabet, padded or not, whitespace ignored).
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let engines = [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    let decode = |bytes: &[u8]| engines.iter().find_map(|e| e.decode(bytes).ok());
    // Whitespace (wrapped Base64) is stripped only when the text does not decode as it is.
    decode(text.as_bytes()).or_else(|| {
        let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        decode(&compact)
    })
}

/// A `data:image/…;base64,…` URL: its declared MIME type and its bytes.
pub fn parse_data_url(url: &str) -> Result<(String, Vec<u8>), Refused> {
    if url.len() > IMAGE_MAX_BASE64_CHARS {
        return Err(Refused::new(
            "image_too_large",
            format!("the data URL is longer than {IMAGE_MAX_BASE64_CHARS} characters"),
        ));
    }
    let rest = url
        .strip_prefix("data:")
        .ok_or_else(|| Refused::new("invalid_source", "not a data URL"))?;
    let (head, payload) = rest
        .split_once(',')
        .ok_or_else(|| Refused::new("invalid_image", "the data URL has no data"))?;
    let mut params = head.split(';');
    let mime = params.next().unwrap_or_default().trim().to_string();
    if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err(Refused::new(
            "invalid_image",
            "only Base64 data URLs (data:image/…;base64,…) are accepted",
        ));
    }
    let bytes = decode_base64(payload)
        .ok_or_else(|| Refused::new("invalid_image", "the data URL's Base64 is not valid"))?;
    Ok((mime, bytes))
}

/// The data URL a model request carries for these bytes.
pub fn data_url(mime: ImageMime, bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 4 / 3 + 32);
    s.push_str("data:");
    s.push_str(mime.as_str());
    s.push_str(";base64,");
    base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG.
    pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    #[test]
    fn a_png_is_recognised_and_a_wrong_declaration_is_refused() {
        let bytes = decode_base64(PNG_1X1).unwrap();
        let p = probe(&bytes, Some("image/png")).unwrap();
        assert_eq!((p.mime, p.width, p.height), (ImageMime::Png, 1, 1));
        assert_eq!(
            probe(&bytes, Some("image/jpeg")).unwrap_err().code,
            "invalid_image"
        );
        assert_eq!(
            probe(&bytes, Some("image/bmp")).unwrap_err().code,
            "unsupported_image"
        );
        // A server's generic type does not count as a declaration.
        assert!(probe(&bytes, Some("application/octet-stream")).is_ok());
        assert_eq!(probe(b"<html>", None).unwrap_err().code, "invalid_image");
        let url = data_url(ImageMime::Png, &bytes);
        assert_eq!(
            parse_data_url(&url).unwrap(),
            ("image/png".to_string(), bytes)
        );
    }
}
