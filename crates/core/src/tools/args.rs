//! Argument pieces several tools share: closed word sets whose unknown words get the tool's own
//! message, and batches of operations whose errors name the operation.

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// A closed set of words in tool arguments (`action`, `target`, …). Implemented with
/// [`choice!`](crate::tools::args::choice); the schema comes from `#[derive(JsonSchema)]`.
pub trait Choice: Sized {
    /// The variant named by `word` (already trimmed).
    fn parse(word: &str) -> Option<Self>;
    /// The answer for any other word: what it got and what it accepts.
    fn unknown(word: &str) -> String;
}

/// Deserialises a [`Choice`] from a string, trimmed first (models pad words with spaces).
pub fn deserialize_choice<'de, D: Deserializer<'de>, T: Choice>(d: D) -> Result<T, D::Error> {
    let raw = String::deserialize(d)?;
    let word = raw.trim();
    T::parse(word).ok_or_else(|| D::Error::custom(T::unknown(word)))
}

/// `choice!(Type, |word| message, "word" => Variant, …)` implements [`Choice`] and
/// `Deserialize` for a unit enum.
macro_rules! choice {
    ($ty:ty, |$word:ident| $unknown:expr, $($name:literal => $variant:expr),+ $(,)?) => {
        impl $crate::tools::args::Choice for $ty {
            fn parse(word: &str) -> Option<Self> {
                match word {
                    $($name => Some($variant),)+
                    _ => None,
                }
            }

            fn unknown($word: &str) -> String {
                $unknown
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::tools::args::deserialize_choice(d)
            }
        }
    };
}
pub(crate) use choice;

/// The `operations` of a batch tool: a list whose parse errors say which operation is wrong
/// (`Operation 3: unknown field …`). The schema is that of `Vec<T>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<T>(pub Vec<T>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Batch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<serde_json::Value>::deserialize(d)?;
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                serde_json::from_value(item)
                    .map_err(|e| D::Error::custom(format!("Operation {}: {e}", i + 1)))
            })
            .collect::<Result<Vec<T>, D::Error>>()
            .map(Batch)
    }
}

impl<T: JsonSchema> JsonSchema for Batch<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Vec::<T>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        Vec::<T>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Vec::<T>::json_schema(generator)
    }
}
