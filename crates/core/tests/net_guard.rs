//! The one public-address check (`mpa_core::net_guard`): what `browse_webpage` and `view_image`
//! may reach without `allow_private_network`.

use async_trait::async_trait;
use mpa_core::net_guard::{NetRefusal, Resolve, check_url, is_public_ip};
use std::net::{IpAddr, SocketAddr};

/// A resolver answering from a fixed table (no system DNS in tests).
struct Table(Vec<(&'static str, Vec<&'static str>)>);

#[async_trait]
impl Resolve for Table {
    async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        let found = self
            .0
            .iter()
            .find(|(h, _)| *h == host)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"))?;
        Ok(found
            .1
            .iter()
            .map(|a| SocketAddr::new(a.parse::<IpAddr>().unwrap(), port))
            .collect())
    }
}

fn table() -> Table {
    Table(vec![
        ("public.example", vec!["93.184.216.34"]),
        ("lan.example", vec!["10.1.2.3"]),
        ("metadata.example", vec!["169.254.169.254"]),
        ("loop6.example", vec!["::1"]),
        // One private answer among public ones is enough to refuse.
        ("mixed.example", vec!["93.184.216.34", "192.168.1.10"]),
    ])
}

#[tokio::test]
async fn private_literals_and_names_are_refused() {
    let r = table();
    for url in [
        "http://127.0.0.1/",
        "http://127.9.9.9:8080/x",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://0.0.0.0/",
        "http://100.64.0.1/",
        "http://172.16.5.5/",
        "http://192.168.0.1/",
        "http://lan.example/",
        "http://metadata.example/",
        "https://loop6.example/",
        "http://mixed.example/",
    ] {
        let got = check_url(url, &r).await;
        assert!(
            matches!(got, Err(NetRefusal::PrivateAddress { .. })),
            "{url}: {got:?}"
        );
    }
}

#[tokio::test]
async fn public_addresses_pass_and_are_returned() {
    let r = table();
    let got = check_url("https://public.example/page", &r).await.unwrap();
    assert_eq!(
        got,
        vec!["93.184.216.34:443".parse::<SocketAddr>().unwrap()]
    );
    let got = check_url("http://[2606:4700::1111]:8080/", &r)
        .await
        .unwrap();
    assert_eq!(got[0].port(), 8080);
}

#[tokio::test]
async fn other_schemes_credentials_and_unknown_hosts_are_refused() {
    let r = table();
    assert_eq!(
        check_url("file:///etc/passwd", &r).await,
        Err(NetRefusal::Scheme("file".into()))
    );
    assert_eq!(
        check_url("http://user:pw@public.example/", &r).await,
        Err(NetRefusal::Credentials)
    );
    assert!(matches!(
        check_url("http://nowhere.example/", &r).await,
        Err(NetRefusal::Unresolved { .. })
    ));
    assert!(matches!(
        check_url("not a url", &r).await,
        Err(NetRefusal::InvalidUrl(_))
    ));
}

#[test]
fn embedded_ipv4_forms_are_judged_by_their_ipv4_address() {
    for (ip, public) in [
        ("::ffff:10.0.0.1", false),
        ("64:ff9b::a9fe:a9fe", false), // NAT64 of 169.254.169.254
        ("2002:c0a8:0101::1", false),  // 6to4 of 192.168.1.1
        ("2002:5db8:d822::1", true),   // 6to4 of 93.184.216.34
        ("2001:db8::1", false),
        ("ff02::1", false),
        ("8.8.8.8", true),
        ("224.0.0.1", false),
        ("255.255.255.255", false),
    ] {
        assert_eq!(is_public_ip(ip.parse().unwrap()), public, "{ip}");
    }
}
