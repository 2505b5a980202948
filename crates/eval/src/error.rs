//! The crate's one error type. Messages name the file and the field at fault, never a secret.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("无法读取状态文件 / cannot read the state file {path}: {source}")]
    ReadState {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("状态文件无效 / invalid state file {origin}: {message}")]
    InvalidState { origin: String, message: String },
    #[error(
        "状态文件缺少 config.secret_key / the state file {origin} must set config.secret_key (MoviePilot's SECRET_KEY, which signs the bearer tokens)"
    )]
    MissingSecret { origin: String },
    #[error("OpenAPI 文档无效 / the OpenAPI document to serve is not usable: {reason}")]
    InvalidOpenApi { reason: String },
    #[error("无法监听 / cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

pub type Result<T> = std::result::Result<T, EvalError>;
