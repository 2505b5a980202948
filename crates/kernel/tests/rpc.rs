//! The RPC socket's token check.

use mpa_kernel::same_token;

#[test]
fn tokens_compare_by_value() {
    assert!(same_token(b"abc", b"abc"));
    assert!(!same_token(b"abc", b"abd"));
    assert!(!same_token(b"abc", b"abcd"));
}
