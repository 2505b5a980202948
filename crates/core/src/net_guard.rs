//! The one public-address check for everything the agent fetches or navigates to on a user's
//! behalf (`browse_webpage` navigation and every request its pages make, `view_image` URLs):
//! the host must not become a way into the LAN, the loopback services next to it or the cloud
//! metadata address. A URL passes when its scheme is HTTP(S), it carries no credentials, and
//! every address its host resolves to is a public unicast address.
//!
//! The resolver is injectable ([`Resolve`]) so tests can make a hostname resolve to a private
//! address without touching the system's DNS. A caller that connects itself should connect to
//! the addresses [`public_addrs`] returned (no second lookup that a rebinding DNS could answer
//! differently).

use async_trait::async_trait;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Resolves a host name to socket addresses.
#[async_trait]
pub trait Resolve: Send + Sync + 'static {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>>;
}

/// The system's resolver (`getaddrinfo` on a blocking thread, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

/// The shared resolver handle tools keep.
pub type Resolver = Arc<dyn Resolve>;

/// The system resolver as a [`Resolver`].
pub fn system_resolver() -> Resolver {
    Arc::new(SystemResolver)
}

/// Why a URL may not be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetRefusal {
    #[error("not a valid URL: {0} / URL 无效")]
    InvalidUrl(String),
    #[error("scheme `{0}` is not allowed (only http and https) / 只允许 http 和 https")]
    Scheme(String),
    #[error("URLs with credentials are not allowed / URL 中不允许包含账号密码")]
    Credentials,
    #[error(
        "`{host}` is a private, loopback, link-local or reserved address ({addr}); \
         private networks are not reachable / 私有网络地址不可访问"
    )]
    PrivateAddress { host: String, addr: IpAddr },
    #[error("`{host}` did not resolve: {reason} / 域名无法解析")]
    Unresolved { host: String, reason: String },
}

/// Whether `ip` is a public unicast address (not loopback, private, link-local, shared,
/// documentation, benchmarking, multicast, reserved or unspecified; IPv6 forms that embed an
/// IPv4 address are judged by that address).
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                    // "this network"
        || a == 10                              // private
        || a == 127                             // loopback
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 169 && b == 254)               // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))  // private
        || (a == 192 && b == 0 && c == 0)       // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)       // documentation
        || (a == 192 && b == 88 && c == 99)     // 6to4 relay anycast
        || (a == 192 && b == 168)               // private
        || (a == 198 && (18..20).contains(&b))  // benchmarking
        || (a == 198 && b == 51 && c == 100)    // documentation
        || (a == 203 && b == 0 && c == 113)     // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return is_public_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    // 6to4 (2002::/16) embeds the IPv4 address in bits 16..48.
    if s[0] == 0x2002 {
        return is_public_v4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    // Global unicast is 2000::/3; inside it, Teredo (2001::/32, tunnels to anywhere) and
    // documentation (2001:db8::/32) are not reachable destinations.
    (s[0] & 0xe000) == 0x2000 && !(s[0] == 0x2001 && (s[1] == 0 || s[1] == 0x0db8))
}

/// Checks `url` and returns the public addresses its host resolves to (an IP literal is its own
/// one address). Refused: another scheme than http/https, credentials in the URL, a host with
/// any non-public address (one private answer is enough: a client may pick any of them).
pub async fn public_addrs(
    url: &url::Url,
    resolver: &dyn Resolve,
) -> Result<Vec<SocketAddr>, NetRefusal> {
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(NetRefusal::Scheme(other.to_string())),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(NetRefusal::Credentials);
    }
    let port = url
        .port_or_known_default()
        .ok_or_else(|| NetRefusal::InvalidUrl(url.to_string()))?;
    let (name, addrs) = match url.host() {
        None => return Err(NetRefusal::InvalidUrl(url.to_string())),
        Some(url::Host::Ipv4(ip)) => (ip.to_string(), vec![SocketAddr::new(ip.into(), port)]),
        Some(url::Host::Ipv6(ip)) => (ip.to_string(), vec![SocketAddr::new(ip.into(), port)]),
        Some(url::Host::Domain(name)) => {
            let found = resolver
                .resolve(name, port)
                .await
                .map_err(|e| NetRefusal::Unresolved {
                    host: name.to_string(),
                    reason: e.to_string(),
                })?;
            if found.is_empty() {
                return Err(NetRefusal::Unresolved {
                    host: name.to_string(),
                    reason: "no addresses".into(),
                });
            }
            (name.to_string(), found)
        }
    };
    if let Some(bad) = addrs.iter().find(|a| !is_public_ip(a.ip())) {
        return Err(NetRefusal::PrivateAddress {
            host: name,
            addr: bad.ip(),
        });
    }
    Ok(addrs)
}

/// [`public_addrs`] for a URL given as text.
pub async fn check_url(url: &str, resolver: &dyn Resolve) -> Result<Vec<SocketAddr>, NetRefusal> {
    let parsed = url::Url::parse(url).map_err(|e| NetRefusal::InvalidUrl(e.to_string()))?;
    public_addrs(&parsed, resolver).await
}
