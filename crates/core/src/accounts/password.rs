//! Argon2id password hashing (PHC strings with a random salt). The one place passwords are hashed
//! or checked; the store keeps only the resulting strings.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// Shortest password an account may have, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;

pub fn hash(password: &str) -> Result<String, String> {
    let mut salt_bytes = [0u8; 16];
    rand::Rng::fill(&mut rand::rng(), &mut salt_bytes);
    let salt = SaltString::encode_b64(&salt_bytes).map_err(|e| e.to_string())?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `password` matches the stored PHC hash (false for a malformed hash).
pub fn verify(stored: &str, password: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn hash_and_verify() {
        let h = super::hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2"));
        assert!(super::verify(&h, "correct horse"));
        assert!(!super::verify(&h, "wrong"));
        assert!(!super::verify("garbage", "x"));
    }
}
