//! Client tokens: `--token HEX` on the client, `--client IP=HEX` on the
//! gateway. A token of 1 to 8 bytes (2 to 16 hex digits) is carried in the
//! header's 64-bit auth field as its value (right-aligned, zero-padded); a
//! longer one (up to 32 bytes) is folded to 64 bits with FNV-1a over its bytes,
//! identically on both ends.

use std::fmt;

/// A token flag value that is not a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenError {
    /// The value as given.
    pub input: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "token {:?}: {}; expected 1 to 64 hex digits, not all zero",
            self.input, self.reason
        )
    }
}

impl std::error::Error for TokenError {}

/// Parses a hex token into the 64-bit auth value.
pub fn parse_token(hex: &str) -> Result<u64, TokenError> {
    let err = |reason| TokenError {
        input: hex.to_string(),
        reason,
    };
    let h = hex.strip_prefix("0x").unwrap_or(hex);
    if h.is_empty() || h.len() > 64 {
        return Err(err("wrong length"));
    }
    if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(err("not hexadecimal"));
    }
    if h.bytes().all(|b| b == b'0') {
        // An all-zero token is what an uninitialised header carries.
        return Err(err("all zero"));
    }
    if h.len() <= 16 {
        return u64::from_str_radix(h, 16).map_err(|_| err("not hexadecimal"));
    }
    // FNV-1a 64 over the token bytes (an odd digit count gets a leading 0).
    let padded = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_string()
    };
    let mut v: u64 = 0xcbf2_9ce4_8422_2325;
    for i in (0..padded.len()).step_by(2) {
        let byte = u8::from_str_radix(&padded[i..i + 2], 16).map_err(|_| err("not hexadecimal"))?;
        v ^= u64::from(byte);
        v = v.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!(parse_token("00112233aabbccdd"), Ok(0x0011_2233_aabb_ccdd));
        assert_eq!(parse_token("ff"), Ok(255));
        assert!(parse_token("").is_err());
        assert_eq!(parse_token("abc"), Ok(0xabc));
        assert!(parse_token("zz").unwrap_err().to_string().contains("hex"));
        let long = parse_token("00112233aabbccddee").unwrap();
        assert_ne!(long, parse_token("00112233aabbccddef").unwrap());
        assert!(parse_token(&"ab".repeat(33)).is_err());
        assert!(parse_token("0000").is_err());
    }
}
