//! Lenient serde types for what providers stream back.
//!
//! Every field is optional and defaults when absent or `null`; unknown fields are ignored. These
//! types are the only place provider dialects are tolerated; everything after them is strict.

use serde::{Deserialize, Deserializer};

/// `null` and absence both become the default, for providers that send `"tool_calls": null`.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One `chat.completion.chunk` (or a whole non-streamed `chat.completion`, whose choices carry
/// `message` instead of `delta`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatChunk {
    #[serde(default, deserialize_with = "nullable")]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An error reported inside a 200 stream.
    #[serde(default)]
    pub error: Option<WireError>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub delta: Option<Delta>,
    /// Non-streamed responses (servers that ignore `stream: true`).
    #[serde(default)]
    pub message: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Some servers (llama.cpp, some proxies) put usage inside the choice.
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    /// DeepSeek, Qwen, vLLM reasoning parsers.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// OpenRouter, Ollama.
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub tool_calls: Vec<ToolCallDelta>,
    /// The legacy single-function field. llama-cpp-python repeats every tool-call fragment here
    /// too, so it counts only when `tool_calls` is absent from the chunk.
    #[serde(default)]
    pub function_call: Option<FunctionDelta>,
}

/// A fragment of a tool call. `index` and `id` are both optional; see [`crate::assembly`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ToolCallDelta {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    /// A string fragment normally; a JSON object from servers that send arguments already parsed.
    #[serde(default, deserialize_with = "arguments_text")]
    pub arguments: Option<String>,
}

fn arguments_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("tool-call arguments as a string or a JSON value")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(V)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            let value =
                serde_json::Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            Ok(Some(value.to_string()))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            let value =
                serde_json::Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
            Ok(Some(value.to_string()))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
    }
    d.deserialize_option(V)
}

/// Usage as providers report it; all optional.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WireUsage {
    #[serde(default, deserialize_with = "nullable")]
    pub prompt_tokens: u64,
    #[serde(default, deserialize_with = "nullable")]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    pub prompt_cache_hit_tokens: Option<u64>,
    /// Prompt tokens written to the cache (Anthropic's name, passed through by gateways).
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

impl WireUsage {
    pub fn to_usage(&self) -> mpa_protocol::Usage {
        let cache_read = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .unwrap_or(0);
        mpa_protocol::Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
            total_tokens: self
                .total_tokens
                .unwrap_or(self.prompt_tokens + self.completion_tokens),
            cache_read_tokens: cache_read,
            cache_write_tokens: self.cache_creation_input_tokens.unwrap_or(0),
            estimated: false,
        }
    }
}

/// `{"error": {...}}` bodies and in-stream error chunks. `error` may also be a bare string.
#[derive(Debug, Clone, Default)]
pub struct WireError {
    pub message: String,
    pub kind: Option<String>,
    pub code: Option<String>,
    /// A numeric `code` (OpenRouter sends HTTP-like codes in stream errors).
    pub status: Option<u16>,
}

impl<'de> Deserialize<'de> for WireError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(WireError::from_value(&v))
    }
}

impl WireError {
    pub fn from_value(v: &serde_json::Value) -> Self {
        use serde_json::Value;
        match v {
            Value::String(s) => WireError {
                message: s.clone(),
                ..WireError::default()
            },
            Value::Object(map) => {
                let text = |k: &str| match map.get(k) {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                };
                let status = match map.get("code").or_else(|| map.get("status")) {
                    Some(Value::Number(n)) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
                    Some(Value::String(s)) => s.parse().ok(),
                    _ => None,
                };
                let detail_list = || match map.get("detail") {
                    Some(Value::Array(items)) => crate::classify::summarize_detail_array(items),
                    _ => None,
                };
                let message = text("message")
                    .or_else(|| text("detail"))
                    .or_else(detail_list)
                    .or_else(|| text("error"))
                    .unwrap_or_else(|| v.to_string());
                WireError {
                    message,
                    kind: text("type"),
                    code: text("code"),
                    status,
                }
            }
            other => WireError {
                message: other.to_string(),
                ..WireError::default()
            },
        }
    }

    /// All the text a classifier may look at.
    pub fn haystack(&self) -> String {
        format!(
            "{} {} {}",
            self.message,
            self.kind.as_deref().unwrap_or(""),
            self.code.as_deref().unwrap_or("")
        )
    }
}
