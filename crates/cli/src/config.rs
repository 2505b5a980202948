//! The one `Config` of the host: every option is a flag with an environment-variable fallback
//! (names follow MoviePilot where it has one). It is parsed here and handed down as typed
//! sub-configs; no library crate reads the environment. Boolean options accept `true/false`,
//! `1/0`, `yes/no` and `on/off`, as MoviePilot's own settings do.

use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Global options are listed once under these headings, after a subcommand's own options.
const MODEL: &str = "Global options: model";
const MOVIEPILOT: &str = "Global options: MoviePilot";
const HOST: &str = "Global options: host";

#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Data directory: main store (agent.db), per-user history, memory and skills.
    #[arg(help_heading = HOST, long, env = "MPA_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// Base URL of an OpenAI-compatible API (Ollama, vLLM, llama.cpp server, OpenAI, DeepSeek…).
    #[arg(
        help_heading = MODEL,
        long,
        env = "LLM_BASE_URL",
        default_value = "http://127.0.0.1:11434/v1",
        global = true
    )]
    pub llm_base_url: String,

    /// API key sent as a bearer token (never printed or logged).
    #[arg(help_heading = MODEL, long, env = "LLM_API_KEY", hide_env_values = true, global = true)]
    pub llm_api_key: Option<String>,

    /// Model name as the endpoint knows it.
    #[arg(help_heading = MODEL, long, env = "LLM_MODEL", default_value = "qwen2.5:7b", global = true)]
    pub llm_model: String,

    /// Tools offered on the first model call (0 = all tools, no selection).
    #[arg(help_heading = MODEL, long, env = "LLM_MAX_TOOLS", default_value_t = 0, global = true)]
    pub llm_max_tools: u32,

    /// Context window in K tokens, used when the model catalogue does not know the model.
    #[arg(
        help_heading = MODEL,
        long,
        env = "LLM_MAX_CONTEXT_TOKENS",
        default_value_t = 128,
        global = true
    )]
    pub llm_max_context_tokens: u64,

    /// Most tokens one model answer may have (`max_tokens`; 0 = send no limit). Default: the
    /// model catalogue's output limit, else 4096 — so a model that loops cannot stream for minutes.
    #[arg(help_heading = MODEL, long, env = "LLM_MAX_OUTPUT_TOKENS", global = true)]
    pub llm_max_output_tokens: Option<u32>,

    /// Model calls per turn before the turn stops with an iteration-limit error.
    #[arg(help_heading = MODEL, long, env = "LLM_MAX_ITERATIONS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub llm_max_iterations: u32,

    /// Seconds one tool call may run before its outcome becomes `unknown` (0 = unlimited).
    #[arg(help_heading = MODEL, long, env = "LLM_TOOL_TIMEOUT", default_value_t = 300, global = true)]
    pub llm_tool_timeout: u64,

    /// Sampling temperature.
    #[arg(help_heading = MODEL, long, env = "LLM_TEMPERATURE", default_value_t = 0.3, global = true)]
    pub llm_temperature: f32,

    /// Largest text of one message in KiB (a chat message, or each earlier message an
    /// OpenAI-compatible client sends along); a larger one is refused before anything is stored.
    #[arg(long, env = "MPA_MAX_MESSAGE_KB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=32_768), global = true)]
    pub max_message_kb: u64,

    /// Free space (MiB) the data directory's disk must keep: below it new turns are refused with
    /// `storage_full` and `/healthz` reports the disk low (0 = not checked).
    #[arg(long, env = "MPA_MIN_FREE_MB", default_value_t = 64, global = true)]
    pub min_free_mb: u64,

    /// Whether images are sent to the model (true/false, 1/0, yes/no, on/off).
    #[arg(help_heading = MODEL, long, env = "LLM_SUPPORT_IMAGE_INPUT", default_value_t = true, action = ArgAction::Set, value_parser = BoolishValueParser::new(), global = true)]
    pub llm_support_image_input: bool,

    /// Enable retention cleanup of chat evidence (true/false, 1/0, yes/no, on/off).
    #[arg(help_heading = HOST, long, env = "DATA_CLEANUP_ENABLE", default_value_t = true, action = ArgAction::Set, value_parser = BoolishValueParser::new(), global = true)]
    pub data_cleanup_enable: bool,

    /// Keep chat evidence this many days after its last activity (0 = keep forever).
    #[arg(
        help_heading = HOST,
        long,
        env = "DATA_CLEANUP_AGENT_CHAT_DAYS",
        default_value_t = 0,
        global = true
    )]
    pub data_cleanup_agent_chat_days: u32,

    /// MoviePilot base URL: enables the `moviepilot_api` tool over MoviePilot's REST API.
    #[arg(help_heading = MOVIEPILOT, long, env = "MOVIEPILOT_URL", global = true)]
    pub moviepilot_url: Option<String>,

    /// MoviePilot's SECRET_KEY: the host mints short-lived tokens for the MoviePilot user linked
    /// to (or signed in as) each account (never printed or logged).
    #[arg(
        help_heading = MOVIEPILOT,
        long,
        env = "MOVIEPILOT_SECRET_KEY",
        hide_env_values = true,
        global = true
    )]
    pub moviepilot_secret_key: Option<String>,

    /// How users sign in: `local` accounts (each may be linked to a MoviePilot user) or
    /// `moviepilot` accounts (checked against MoviePilot's own login).
    #[arg(help_heading = MOVIEPILOT, long, env = "MPA_AUTH", default_value = "local", value_parser = ["local", "moviepilot"], global = true)]
    pub auth: String,

    /// Seconds a conversation's terminals may stay unused before they are closed (0 = only when
    /// the conversation is deleted or the host stops).
    #[arg(
        help_heading = HOST,
        long,
        env = "MPA_TERMINAL_IDLE_TTL",
        default_value_t = 86_400,
        global = true
    )]
    pub terminal_idle_ttl: u64,

    /// The Chromium `browse_webpage` drives (default: `chromium` or `google-chrome` on PATH).
    /// When none works the tool answers `browser_unavailable`; nothing else is affected.
    #[arg(help_heading = HOST, long, env = "MPA_BROWSER_PATH", global = true)]
    pub browser_path: Option<std::path::PathBuf>,

    /// Seconds a conversation's browser may stay unused before it is closed.
    #[arg(
        help_heading = HOST,
        long,
        env = "MPA_BROWSER_IDLE_TTL",
        default_value_t = 1_800,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub browser_idle_ttl: u64,

    /// OCR service for `recognize_captcha` (MoviePilot's OCR protocol, `POST <url>/captcha/base64`).
    #[arg(help_heading = HOST, long, env = "MPA_CAPTCHA_OCR_URL", global = true)]
    pub captcha_ocr_url: Option<String>,

    /// Address `mpagent serve` listens on.
    #[arg(
        help_heading = HOST,
        long,
        env = "MPA_LISTEN",
        default_value = "127.0.0.1:3001",
        global = true
    )]
    pub listen: SocketAddr,

    /// Static bearer token with admin rights, for automation (never printed or logged).
    #[arg(help_heading = HOST, long, env = "MPA_ADMIN_TOKEN", hide_env_values = true, global = true)]
    pub admin_token: Option<String>,

    /// Working directory for commands the agent runs (default: the directory mpagent started in).
    #[arg(help_heading = HOST, long, env = "MPA_WORKDIR", global = true)]
    pub workdir: Option<PathBuf>,

    /// Python virtual environment put first on PATH for commands (default: <workdir>/venv if present).
    #[arg(help_heading = HOST, long, env = "VENV_PATH", global = true)]
    pub venv_path: Option<PathBuf>,

    /// A SearXNG instance for `search_web` (its JSON output enabled), tried first.
    #[arg(help_heading = HOST, long, env = "SEARXNG_URL", global = true)]
    pub searxng_url: Option<String>,

    /// A Brave Search API key for `search_web`, used when SearXNG is not set or fails.
    #[arg(help_heading = HOST, long, env = "BRAVE_SEARCH_API_KEY", global = true, hide_env_values = true)]
    pub brave_search_api_key: Option<String>,

    /// Register the diagnostic test_* tools (for end-to-end tests and troubleshooting).
    #[arg(help_heading = HOST, long, env = "MPA_ENABLE_TEST_TOOLS", default_value_t = false, action = ArgAction::Set, value_parser = BoolishValueParser::new(), global = true, hide_short_help = true)]
    pub enable_test_tools: bool,
}

impl Config {
    /// The MoviePilot gateway's settings, when `MOVIEPILOT_URL` is set.
    pub fn moviepilot(&self) -> Option<mpa_core::MoviePilotHostConfig> {
        let url = self
            .moviepilot_url
            .clone()
            .filter(|u| !u.trim().is_empty())?;
        Some(mpa_core::MoviePilotHostConfig {
            config: mpa_core::moviepilot::MoviePilotConfig {
                url,
                secret_key: self.moviepilot_secret_key.clone().filter(|k| !k.is_empty()),
                auth: match self.auth.as_str() {
                    "moviepilot" => mpa_core::moviepilot::AuthMode::MoviePilot,
                    _ => mpa_core::moviepilot::AuthMode::Local,
                },
            },
            identity: None,
            account_clock: None,
        })
    }

    pub fn model_config(&self) -> mpa_core::model::ModelConfig {
        mpa_core::model::ModelConfig {
            base_url: self.llm_base_url.clone(),
            api_key: self.llm_api_key.clone().filter(|k| !k.is_empty()),
            model: self.llm_model.clone(),
            temperature: Some(self.llm_temperature),
            max_output_tokens: self.llm_max_output_tokens,
            ..mpa_core::model::ModelConfig::default()
        }
    }

    pub fn agent_config(&self) -> mpa_core::AgentConfig {
        let mut cfg = mpa_core::AgentConfig::new(self.model_config());
        cfg.max_iterations = self.llm_max_iterations;
        cfg.tool_timeout =
            (self.llm_tool_timeout > 0).then(|| Duration::from_secs(self.llm_tool_timeout));
        cfg.max_context_tokens_k = self.llm_max_context_tokens;
        cfg.max_tools = self.llm_max_tools;
        cfg.support_image_input = self.llm_support_image_input;
        cfg.max_message_bytes =
            usize::try_from(self.max_message_kb.saturating_mul(1024)).unwrap_or(usize::MAX);
        cfg
    }
}
