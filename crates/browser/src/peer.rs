//! Who owns the other end of a loopback TCP connection: the user id of the connecting socket,
//! asked of the kernel by its four addresses. One `sock_diag` query over netlink (an exact
//! look-up, microseconds); where netlink answers nothing usable, the `/proc/net/tcp{,6}` table
//! (a walk of the whole connection table, milliseconds).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h).
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `sizeof(struct nlmsghdr)`.
const NLMSG_HEADER: usize = 16;
/// `sizeof(struct inet_diag_sockid)`.
const SOCKID: usize = 48;
/// Offset of `idiag_uid` in `struct inet_diag_msg`: family, state, timer, retrans (4 bytes),
/// the socket id, then expires, rqueue, wqueue (3 × 4 bytes).
const UID_AT: usize = 4 + SOCKID + 12;
/// Offset of `idiag_state` in `struct inet_diag_msg`.
const STATE_AT: usize = 1;
/// `TCP_TIME_WAIT` and `TCP_NEW_SYN_RECV`: the kernel keeps such a connection in a small
/// record that has no owner and reports user 0 for it — which must not pass for root's.
const OWNERLESS_STATES: [u8; 2] = [6, 12];

/// The user owning the TCP socket whose local end is `client` and remote end is `server` (a
/// connection to one of our listeners, seen from the connecting side). `None` when the kernel
/// knows no such socket (it is gone, or it is not on this host) or only an ownerless record of
/// it (a client that already closed its end: `TIME_WAIT`).
pub fn socket_owner(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    owner_by_netlink(client, server).or_else(|| owner_by_proc(client, server))
}

/// [`socket_owner`] by one `SOCK_DIAG_BY_FAMILY` request for exactly that socket.
pub fn owner_by_netlink(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    if client.is_ipv4() != server.is_ipv4() {
        return None;
    }
    // SAFETY: socket(2) with constant arguments; the descriptor is owned right below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let request = diag_request(client, server);
    // SAFETY: `request` is a valid readable buffer of `request.len()` bytes for the call.
    let sent = unsafe { libc::send(fd.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if usize::try_from(sent).ok() != Some(request.len()) {
        return None;
    }
    let mut reply = [0u8; 512];
    // The kernel answers while handling the send, so the reply is already queued: never wait.
    // SAFETY: `reply` is a valid writable buffer of `reply.len()` bytes for the call.
    let got = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            reply.as_mut_ptr().cast(),
            reply.len(),
            libc::MSG_DONTWAIT,
        )
    };
    let got = usize::try_from(got).ok()?;
    uid_in_reply(reply.get(..got)?)
}

/// A netlink message asking for the one TCP socket `client → server`.
fn diag_request(client: SocketAddr, server: SocketAddr) -> Vec<u8> {
    let family = if client.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let address = |ip: IpAddr| -> [u8; 16] {
        let mut out = [0u8; 16];
        match ip {
            IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => out = v6.octets(),
        }
        out
    };
    let body_len = 8 + SOCKID;
    let mut m = Vec::with_capacity(NLMSG_HEADER + body_len);
    // struct nlmsghdr
    m.extend_from_slice(&((NLMSG_HEADER + body_len) as u32).to_ne_bytes());
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    // struct inet_diag_req_v2: family, protocol, extensions, pad, every state
    m.extend_from_slice(&[family as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    // struct inet_diag_sockid: ports in network order, addresses, interface, no cookie
    m.extend_from_slice(&client.port().to_be_bytes());
    m.extend_from_slice(&server.port().to_be_bytes());
    m.extend_from_slice(&address(client.ip()));
    m.extend_from_slice(&address(server.ip()));
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m.extend_from_slice(&u32::MAX.to_ne_bytes());
    m
}

/// The `idiag_uid` of a `SOCK_DIAG_BY_FAMILY` answer; `None` for an error answer (no such
/// socket) or anything shorter than one message.
fn uid_in_reply(reply: &[u8]) -> Option<u32> {
    let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
    if kind != SOCK_DIAG_BY_FAMILY {
        return None;
    }
    let state = *reply.get(NLMSG_HEADER + STATE_AT)?;
    if OWNERLESS_STATES.contains(&state) {
        return None;
    }
    let at = NLMSG_HEADER + UID_AT;
    Some(u32::from_ne_bytes(reply.get(at..at + 4)?.try_into().ok()?))
}

/// [`socket_owner`] from `/proc/net/tcp` (or `tcp6`).
pub fn owner_by_proc(client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let table = if client.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    };
    let text = std::fs::read_to_string(table).ok()?;
    owner_in_table(&text, client, server)
}

/// [`owner_by_proc`] over the text of a `/proc/net/tcp{,6}` table.
pub fn owner_in_table(table: &str, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    let (want_local, want_remote) = (proc_address(client), proc_address(server));
    table.lines().skip(1).find_map(|line| {
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, state, uid) = (
            fields.get(1)?,
            fields.get(2)?,
            fields.get(3)?,
            fields.get(7)?,
        );
        let ownerless = u8::from_str_radix(state, 16).is_ok_and(|s| OWNERLESS_STATES.contains(&s));
        (local.eq_ignore_ascii_case(&want_local)
            && remote.eq_ignore_ascii_case(&want_remote)
            && !ownerless)
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// An address as the kernel prints it in `/proc/net/tcp{,6}`: the address's bytes as 32-bit
/// words in host order, in hex, then `:` and the port in hex.
fn proc_address(addr: SocketAddr) -> String {
    let words = |bytes: &[u8]| -> String {
        bytes
            .chunks(4)
            .map(|w| {
                let mut word = [0u8; 4];
                word.copy_from_slice(w);
                format!("{:08X}", u32::from_ne_bytes(word))
            })
            .collect()
    };
    let ip = match addr.ip() {
        IpAddr::V4(v4) => words(&v4.octets()),
        IpAddr::V6(v6) => words(&v6.octets()),
    };
    format!("{ip}:{:04X}", addr.port())
}

/// The effective user id of this process.
pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
