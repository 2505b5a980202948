//! The public-address guard for everything the agent fetches from a URL a model gave it
//! (`view_image`, `search_web`'s provider is configured, the browser's navigation): no request
//! may reach the host's own network — loopback, the LAN, link-local (the cloud metadata address
//! `169.254.169.254`), carrier-grade NAT, multicast, reserved ranges, or an IPv6 form of any of
//! them.
//!
//! Every hop is checked: the URL (HTTP(S), no credentials, at most [`MAX_URL_CHARS`]), then every
//! address its host resolves to (one private address refuses the hop: a round-robin name cannot
//! smuggle one in), and the connection goes to exactly the addresses checked (reqwest's resolve
//! override), so a name that resolves differently a moment later (DNS rebinding) is never
//! looked up again. Redirects are not followed by the HTTP client; [`NetGuard::fetch`] follows
//! at most [`FetchLimits::max_redirects`], each target checked as the first URL was. No proxy is
//! used (a proxy would resolve the name itself).
//!
//! The resolver is injectable ([`Resolve`]) so tests can name hosts that resolve to private
//! addresses; [`NetGuard::trusting`] lets a test (or a host that knowingly serves from such an
//! address) treat one exact address as public.

use async_trait::async_trait;
use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Longest URL accepted (spec runtime.md §9.1).
pub const MAX_URL_CHARS: usize = 8192;

/// Resolves a host name to addresses (the system's resolver, or a test's table).
#[async_trait]
pub trait Resolve: Send + Sync + 'static {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (getaddrinfo on a blocking thread, through tokio).
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// Why a URL or one of its hops was refused, or a fetch did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not an HTTP(S) URL the agent may use (credentials, no host, too long, unparsable).
    InvalidUrl(String),
    /// The host is or resolves to an address of the host's own network.
    Private(String),
    /// The name did not resolve.
    Unresolved(String),
    /// A redirect without a usable target, or one too many.
    Redirect(String),
    /// The connection or the response failed (status included).
    Download(String),
    /// The body is larger than allowed.
    TooLarge(u64),
    /// The whole fetch took longer than allowed.
    Timeout,
}

impl Refusal {
    pub fn message(&self) -> String {
        match self {
            Refusal::InvalidUrl(m) | Refusal::Redirect(m) | Refusal::Download(m) => m.clone(),
            Refusal::Private(host) => format!(
                "{host} is a private, loopback, link-local or reserved address; the agent only \
                 fetches from public addresses / 只允许访问公网地址"
            ),
            Refusal::Unresolved(host) => format!("{host} could not be resolved"),
            Refusal::TooLarge(limit) => format!("the response is larger than {limit} bytes"),
            Refusal::Timeout => "the fetch timed out".into(),
        }
    }
}

/// Whether `ip` is an address on the public internet. Everything the host's own network could
/// answer on is not: loopback, private ranges, link-local (cloud metadata), CGNAT, multicast,
/// broadcast, documentation, benchmarking and reserved ranges, and the IPv6 forms that embed an
/// IPv4 address (mapped, compatible, NAT64) are judged by that address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments 192.0.0/24
        || (a == 198 && (18..20).contains(&b)) // benchmarking 198.18/15
        || a >= 240) // reserved 240/4
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) reach an IPv4 address.
    if s[..6] == [0, 0, 0, 0, 0, 0] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return !ip.is_unspecified() && !ip.is_loopback() && is_public_v4(v4);
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2002)) // 6to4 embeds any IPv4 address
}

/// What one fetch may take.
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    pub max_bytes: u64,
    /// The whole fetch, every hop included.
    pub timeout: Duration,
    pub max_redirects: u32,
}

/// A fetched body.
#[derive(Debug)]
pub struct Fetched {
    /// The URL that answered (after redirects).
    pub url: Url,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// The guard: a resolver and the exact addresses a host trusts as public.
#[derive(Clone)]
pub struct NetGuard {
    resolver: Arc<dyn Resolve>,
    trusted: Arc<[IpAddr]>,
}

impl Default for NetGuard {
    fn default() -> Self {
        Self::new(Arc::new(SystemResolver))
    }
}

impl std::fmt::Debug for NetGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetGuard")
            .field("trusted", &self.trusted)
            .finish()
    }
}

impl NetGuard {
    pub fn new(resolver: Arc<dyn Resolve>) -> Self {
        Self {
            resolver,
            trusted: Arc::from(Vec::new()),
        }
    }

    /// Treats this exact address as public (a test's "public" server on a loopback address).
    pub fn trusting(mut self, ip: IpAddr) -> Self {
        let mut t = self.trusted.to_vec();
        t.push(ip);
        self.trusted = t.into();
        self
    }

    fn allowed(&self, ip: IpAddr, allow_private: bool) -> bool {
        allow_private || is_public(ip) || self.trusted.contains(&ip)
    }

    /// Parses a URL the agent may fetch: HTTP(S), a host, no user or password, not too long.
    pub fn parse(url: &str) -> Result<Url, Refusal> {
        if url.chars().count() > MAX_URL_CHARS {
            return Err(Refusal::InvalidUrl(format!(
                "the URL is longer than {MAX_URL_CHARS} characters"
            )));
        }
        let parsed = Url::parse(url.trim())
            .map_err(|e| Refusal::InvalidUrl(format!("not a valid URL: {e}")))?;
        Self::check_shape(&parsed)?;
        Ok(parsed)
    }

    fn check_shape(url: &Url) -> Result<(), Refusal> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::InvalidUrl(format!(
                "only http and https URLs are fetched, not {}:",
                url.scheme()
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::InvalidUrl(
                "URLs with a user name or password are not fetched".into(),
            ));
        }
        if url.host().is_none() {
            return Err(Refusal::InvalidUrl("the URL has no host".into()));
        }
        Ok(())
    }

    /// Checks one hop: the URL's shape and every address its host resolves to. Returns the
    /// addresses to connect to (exactly these: never resolve the name again).
    pub async fn check(&self, url: &Url, allow_private: bool) -> Result<Vec<SocketAddr>, Refusal> {
        Self::check_shape(url)?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| Refusal::InvalidUrl("the URL has no port".into()))?;
        let host = match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(url::Host::Domain(name)) => name.to_string(),
            None => return Err(Refusal::InvalidUrl("the URL has no host".into())),
        };
        self.check_host(&host, port, allow_private).await
    }

    /// Checks `host:port` (a name, or an IP literal without brackets): every address it
    /// resolves to. Returns the addresses to connect to (the browser's egress proxy uses it for
    /// each connection a page opens).
    pub async fn check_host(
        &self,
        host: &str,
        port: u16,
        allow_private: bool,
    ) -> Result<Vec<SocketAddr>, Refusal> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.check_addrs(host, vec![SocketAddr::new(ip, port)], allow_private);
        }
        let found = self
            .resolver
            .resolve(host, port)
            .await
            .map_err(|_| Refusal::Unresolved(host.to_string()))?;
        if found.is_empty() {
            return Err(Refusal::Unresolved(host.to_string()));
        }
        self.check_addrs(host, found, allow_private)
    }

    fn check_addrs(
        &self,
        host: &str,
        addrs: Vec<SocketAddr>,
        allow_private: bool,
    ) -> Result<Vec<SocketAddr>, Refusal> {
        if let Some(bad) = addrs.iter().find(|a| !self.allowed(a.ip(), allow_private)) {
            tracing::info!(host, address = %bad.ip(), "fetch refused: not a public address");
            return Err(Refusal::Private(host.to_string()));
        }
        Ok(addrs)
    }

    /// A client that connects to exactly `addrs` for the URL's host and follows no redirect.
    fn client_for(
        url: &Url,
        addrs: &[SocketAddr],
        timeout: Duration,
    ) -> Result<reqwest::Client, Refusal> {
        let mut b = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .user_agent(concat!("moviepilot-agent/", env!("CARGO_PKG_VERSION")));
        if let Some(url::Host::Domain(name)) = url.host() {
            b = b.resolve_to_addrs(name, addrs);
        }
        b.build()
            .map_err(|e| Refusal::Download(format!("the HTTP client could not be built: {e}")))
    }

    /// GETs `url`, checking every hop, streaming the body and stopping past `limits.max_bytes`.
    pub async fn fetch(
        &self,
        url: Url,
        limits: FetchLimits,
        allow_private: bool,
    ) -> Result<Fetched, Refusal> {
        tokio::time::timeout(limits.timeout, self.fetch_hops(url, limits, allow_private))
            .await
            .unwrap_or(Err(Refusal::Timeout))
    }

    async fn fetch_hops(
        &self,
        mut url: Url,
        limits: FetchLimits,
        allow_private: bool,
    ) -> Result<Fetched, Refusal> {
        let mut redirects = 0;
        loop {
            let addrs = self.check(&url, allow_private).await?;
            let client = Self::client_for(&url, &addrs, limits.timeout)?;
            let mut resp = client.get(url.clone()).send().await.map_err(|e| {
                Refusal::Download(format!("the request failed: {}", without_url(&e)))
            })?;
            let status = resp.status();
            if status.is_redirection() {
                redirects += 1;
                if redirects > limits.max_redirects {
                    return Err(Refusal::Redirect(format!(
                        "more than {} redirects",
                        limits.max_redirects
                    )));
                }
                let location = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| Refusal::Redirect(format!("a {status} without a Location")))?;
                url = url
                    .join(location)
                    .map_err(|e| Refusal::Redirect(format!("a redirect to an invalid URL: {e}")))?;
                if url.as_str().chars().count() > MAX_URL_CHARS {
                    return Err(Refusal::Redirect("a redirect to a URL too long".into()));
                }
                continue;
            }
            if !status.is_success() {
                return Err(Refusal::Download(format!("the server answered {status}")));
            }
            if resp.content_length().is_some_and(|n| n > limits.max_bytes) {
                return Err(Refusal::TooLarge(limits.max_bytes));
            }
            let content_type = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| {
                Refusal::Download(format!("the download failed: {}", without_url(&e)))
            })? {
                if body.len() as u64 + chunk.len() as u64 > limits.max_bytes {
                    return Err(Refusal::TooLarge(limits.max_bytes));
                }
                body.extend_from_slice(&chunk);
            }
            return Ok(Fetched {
                url,
                content_type,
                body,
            });
        }
    }
}

/// A reqwest error's text without the URL (it may carry a query the model should not see
/// again, and the caller names the source itself).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the body could not be read"
    } else {
        "request error"
    };
    kind.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_reserved_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:7f00:1::",
            "ff02::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!is_public(ip), "{ip} must not count as public");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(is_public(ip), "{ip} is public");
        }
    }

    #[test]
    fn urls_with_credentials_or_other_schemes_are_refused() {
        assert!(matches!(
            NetGuard::parse("http://user:pw@example.com/a.png"),
            Err(Refusal::InvalidUrl(_))
        ));
        assert!(matches!(
            NetGuard::parse("file:///etc/passwd"),
            Err(Refusal::InvalidUrl(_))
        ));
        assert!(matches!(
            NetGuard::parse(&format!("http://e.com/{}", "a".repeat(MAX_URL_CHARS))),
            Err(Refusal::InvalidUrl(_))
        ));
        assert!(NetGuard::parse("https://example.com/a.png").is_ok());
    }
}
