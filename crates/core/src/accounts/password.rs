//! Argon2id password hashing (PHC strings with a random salt, the crate's default parameters:
//! 19 MiB, 2 passes). The one place passwords are hashed or checked; the store keeps only the
//! resulting strings.
//!
//! Each run works in a caller-owned [`Memory`], kept and reused between runs: allocating 19 MiB
//! per login let the allocator keep one such block per blocking thread it ever ran on (a peak of
//! ~250 MB under 200 parallel logins with only two running at a time). With reused memory the
//! cost is fixed at one block per concurrent check.

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};

/// Shortest password an account may have, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Work memory of one argon2 run, grown on first use and reused after.
#[derive(Default)]
pub struct Memory(Vec<Block>);

impl Memory {
    fn blocks(&mut self, params: &Params) -> &mut [Block] {
        let n = params.block_count();
        if self.0.len() < n {
            self.0.resize(n, Block::default());
        }
        &mut self.0[..n]
    }
}

/// A new PHC string for `password`.
pub fn hash(password: &str, memory: &mut Memory) -> Result<String, String> {
    let params = Params::default();
    let mut salt = [0u8; 16];
    rand::Rng::fill(&mut rand::rng(), &mut salt);
    let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(
            password.as_bytes(),
            &salt,
            &mut out,
            memory.blocks(&params),
        )
        .map_err(|e| e.to_string())?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|e| e.to_string())?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&out).map_err(|e| e.to_string())?),
    };
    Ok(phc.to_string())
}

/// Whether `password` matches the stored PHC hash (false for a malformed hash). The comparison
/// of the outputs is constant-time.
pub fn verify(stored: &str, password: &str, memory: &mut Memory) -> bool {
    let Ok(phc) = PasswordHash::new(stored) else {
        return false;
    };
    let (Ok(algorithm), Some(expected), Some(salt)) =
        (Algorithm::try_from(phc.algorithm), phc.hash, phc.salt)
    else {
        return false;
    };
    let Ok(version) = phc
        .version
        .map_or(Ok(Version::default()), Version::try_from)
    else {
        return false;
    };
    let Ok(params) = Params::try_from(&phc) else {
        return false;
    };
    let mut salt_buf = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
        return false;
    };
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params.clone())
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, memory.blocks(&params))
        .is_ok()
        && Output::new(&out).is_ok_and(|o| o == expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::PasswordVerifier;

    #[test]
    fn hash_and_verify() {
        let mut m = Memory::default();
        let h = hash("correct horse", &mut m).unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify(&h, "correct horse", &mut m));
        assert!(!verify(&h, "wrong", &mut m));
        assert!(!verify("garbage", "x", &mut m));
        assert!(!verify("$argon2id$v=19$m=19456,t=2,p=1$", "x", &mut m));
    }

    #[test]
    fn hashes_agree_with_the_argon2_crate_both_ways() {
        let mut m = Memory::default();
        // Ours, checked by the crate's own verifier.
        let ours = hash("correct horse", &mut m).unwrap();
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"correct horse", &parsed)
                .is_ok()
        );
        // One written by the crate's own hasher (as version 1 stored them), checked by ours.
        use argon2::password_hash::PasswordHasher;
        let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
        let theirs = Argon2::default()
            .hash_password(b"battery staple", &salt)
            .unwrap()
            .to_string();
        assert!(verify(&theirs, "battery staple", &mut m));
        assert!(!verify(&theirs, "battery stapler", &mut m));
    }
}
