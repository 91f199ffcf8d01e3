//! Static X25519 keys: generation, public-key derivation, base64 text (as
//! WireGuard's `wg genkey` / `wg pubkey`: 32 bytes, standard base64, 44
//! characters) and key files.
//!
//! Private key files are created mode 0600; a private key file that group or
//! others may read, or that belongs to a user other than root and the one
//! reading it, is refused with an error naming the file. A public key of small
//! order (all zeros and six more, [`crate::low_order`]) is refused where it is
//! parsed. These are the library side of `dchannel genkey` / `dchannel pubkey`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use curve25519_dalek::montgomery::MontgomeryPoint;
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Bytes of an X25519 key.
pub const KEY_LEN: usize = 32;

/// A static private key (wiped from memory when dropped).
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct PrivateKey([u8; KEY_LEN]);

/// A static public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PublicKey(pub [u8; KEY_LEN]);

/// A key that could not be parsed or a key file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Not 44 characters of standard base64 for 32 bytes.
    #[error("bad key {what}: expected 44 characters of base64 (32 bytes), {detail}")]
    Format {
        /// Which key (file name or field).
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// A public key of small order (all zeros and the like, [`crate::low_order`]).
    #[error("bad key {what}: {} is a point of small order (all zeros or one of the six \
             others X25519 maps every private key to zero with): with it anyone could pose \
             as the key's owner. Use the output of `dchannel pubkey`", STANDARD.encode(.key))]
    LowOrder {
        /// Which key (file name or field).
        what: String,
        /// The key.
        key: [u8; KEY_LEN],
    },
    /// The private key file belongs to a user other than root and the reader.
    #[error("private key file {} belongs to uid {owner}, neither root nor this process's \
             user (uid {user}): another user could replace it; run `chown {user} {}`", path.display(), path.display())]
    Owner {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The effective user id of this process.
        user: u32,
    },
    /// The private key file is readable by group or others.
    #[error("private key file {} is readable by group or others (mode {mode:04o}); run `chmod 600 {}`", path.display(), path.display())]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl PrivateKey {
    /// A new random private key from the operating system's generator, clamped
    /// as X25519 requires.
    pub fn generate() -> PrivateKey {
        let mut k = [0u8; KEY_LEN];
        getrandom::fill(&mut k).expect("operating system random generator");
        let key = PrivateKey::from_bytes(k);
        k.zeroize();
        key
    }

    /// The key from its 32 bytes (clamped).
    pub fn from_bytes(mut b: [u8; KEY_LEN]) -> PrivateKey {
        b[0] &= 248;
        b[31] &= 127;
        b[31] |= 64;
        PrivateKey(b)
    }

    /// The raw bytes (for the Noise handshake).
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// The matching public key (X25519 base-point multiplication).
    pub fn public_key(&self) -> PublicKey {
        PublicKey(MontgomeryPoint::mul_base_clamped(self.0).to_bytes())
    }

    /// Base64 text (44 characters).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Parses base64 text (surrounding white space ignored).
    pub fn from_base64(text: &str, what: &str) -> Result<PrivateKey, KeyError> {
        let mut b = decode32(text, what)?;
        let k = PrivateKey::from_bytes(b);
        b.zeroize();
        Ok(k)
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKey(..)")
    }
}

impl PublicKey {
    /// The raw bytes (for tools that want them, e.g. WireGuard's hex UAPI).
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }

    /// Base64 text (44 characters).
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Parses base64 text (surrounding white space ignored); `what` names the
    /// key in the error. A key of small order is refused ([`crate::low_order`]).
    pub fn from_base64(text: &str, what: &str) -> Result<PublicKey, KeyError> {
        let key = decode32(text, what)?;
        if crate::low_order::is_small_order(&key) {
            return Err(KeyError::LowOrder {
                what: what.to_string(),
                key,
            });
        }
        Ok(PublicKey(key))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.to_base64())
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl From<[u8; 32]> for PublicKey {
    fn from(b: [u8; 32]) -> PublicKey {
        PublicKey(b)
    }
}

fn decode32(text: &str, what: &str) -> Result<[u8; KEY_LEN], KeyError> {
    let t = text.trim();
    let err = |detail: String| KeyError::Format {
        what: what.to_string(),
        detail,
    };
    if t.len() != 44 {
        return Err(err(format!("got {} characters", t.len())));
    }
    let mut v = STANDARD
        .decode(t)
        .map_err(|e| err(format!("not base64: {e}")))?;
    if v.len() != KEY_LEN {
        v.zeroize();
        return Err(err(format!("decodes to {} bytes", v.len())));
    }
    let mut out = [0u8; KEY_LEN];
    out.copy_from_slice(&v);
    v.zeroize();
    Ok(out)
}

/// `dchannel genkey`: a new private key as base64 text (44 characters, no newline).
pub fn genkey() -> String {
    PrivateKey::generate().to_base64()
}

/// `dchannel pubkey`: the public key (base64) of a private key given as base64
/// text (as read from standard input; surrounding white space ignored).
pub fn pubkey(private_base64: &str) -> Result<String, KeyError> {
    Ok(
        PrivateKey::from_base64(private_base64, "on standard input")?
            .public_key()
            .to_base64(),
    )
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KeyError + '_ {
    move |source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `key` as base64 plus a newline to `path`, created (or truncated) with
/// mode 0600; an existing file's mode is set to 0600 too.
pub fn write_private_key(path: &Path, key: &PrivateKey) -> Result<(), KeyError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io(path))?;
    let mut text = key.to_base64();
    text.push('\n');
    let r = f.write_all(text.as_bytes()).map_err(io(path));
    text.zeroize();
    r
}

/// Reads a private key file; refuses one that group or others may read, and
/// one owned by a user other than root and this process's effective user
/// (docs/deploy.md: "readable by its owner only").
pub fn read_private_key(path: &Path) -> Result<PrivateKey, KeyError> {
    let f = std::fs::File::open(path).map_err(io(path))?;
    let meta = f.metadata().map_err(io(path))?;
    let user = rustix::process::geteuid().as_raw();
    if meta.uid() != 0 && meta.uid() != user {
        return Err(KeyError::Owner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            user,
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Permissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut text = std::io::read_to_string(f).map_err(io(path))?;
    let k = PrivateKey::from_base64(&text, &path.display().to_string());
    text.zeroize();
    k
}

/// Writes a public key as base64 plus a newline (mode 0644).
pub fn write_public_key(path: &Path, key: &PublicKey) -> Result<(), KeyError> {
    std::fs::write(path, format!("{}\n", key.to_base64())).map_err(io(path))
}

/// Reads a public key file.
pub fn read_public_key(path: &Path) -> Result<PublicKey, KeyError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    PublicKey::from_base64(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7748_public_key_and_base64_round_trip() {
        // RFC 7748 §6.1: Alice's private and public key.
        let hex = |s: &str| -> [u8; 32] {
            let v: Vec<u8> = (0..64)
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect();
            v.try_into().unwrap()
        };
        let sk = PrivateKey::from_bytes(hex(
            "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
        ));
        assert_eq!(
            sk.public_key().0,
            hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        );
        let text = sk.public_key().to_base64();
        assert_eq!(text.len(), 44);
        assert_eq!(PublicKey::from_base64(&text, "t").unwrap(), sk.public_key());
        let again = PrivateKey::from_base64(&format!("  {}\n", sk.to_base64()), "t").unwrap();
        assert_eq!(again.public_key(), sk.public_key());
    }

    #[test]
    fn genkey_pubkey_text_functions() {
        let sk = genkey();
        assert_eq!(sk.len(), 44);
        let pk = pubkey(&format!("{sk}\n")).unwrap();
        assert_eq!(
            pk,
            PrivateKey::from_base64(&sk, "t")
                .unwrap()
                .public_key()
                .to_base64()
        );
        // RFC 7748 §6.1 Bob: private 5dab08..., public de9edb...
        assert_eq!(
            pubkey("XasIfmJKikt54X+Lg4AO5m87sSkmGLb9HC+LJ/+I4Os=").unwrap(),
            "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08="
        );
        assert_eq!(
            pubkey("nope").unwrap_err().to_string(),
            "bad key on standard input: expected 44 characters of base64 (32 bytes), got 4 characters"
        );
    }

    #[test]
    fn generated_keys_differ_and_are_clamped() {
        let a = PrivateKey::generate();
        let b = PrivateKey::generate();
        assert_ne!(a.as_bytes(), b.as_bytes());
        assert_eq!(a.as_bytes()[0] & 7, 0);
        assert_eq!(a.as_bytes()[31] & 0xc0, 0x40);
    }

    #[test]
    fn bad_text_is_refused_with_the_name() {
        let e = PublicKey::from_base64("abc", "device 3").unwrap_err();
        assert!(e.to_string().contains("device 3") && e.to_string().contains("3 characters"));
        let e = PublicKey::from_base64(&"!".repeat(44), "k").unwrap_err();
        assert!(e.to_string().contains("not base64"), "{e}");
    }

    #[test]
    fn small_order_public_keys_are_refused_naming_the_key() {
        let zero = STANDARD.encode([0u8; 32]);
        let e = PublicKey::from_base64(&zero, "--gateway-key").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("bad key --gateway-key: AAAA") && msg.contains("small order"),
            "{msg}"
        );
        // one of order 8 (libsodium's list), with the top bit set as a decoder ignores it
        let mut p8 = [0u8; 32];
        p8.copy_from_slice(
            &STANDARD
                .decode("X5yVvKNQjCSx0LFVnIPvWwREXMRYHI6G2CJO3dCfEVc=")
                .unwrap(),
        );
        p8[31] |= 0x80;
        let e = PublicKey::from_base64(&STANDARD.encode(p8), "k").unwrap_err();
        assert!(matches!(e, KeyError::LowOrder { .. }), "{e}");
        // a real key still parses
        let real = PrivateKey::generate().public_key();
        assert_eq!(
            PublicKey::from_base64(&real.to_base64(), "k").unwrap(),
            real
        );
    }

    #[test]
    fn a_key_file_of_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("private.key");
        write_private_key(&p, &PrivateKey::generate()).unwrap();
        let me = rustix::process::geteuid().as_raw();
        // Owned by root or by the reader: fine (the file was just made by the reader).
        assert!(read_private_key(&p).is_ok());
        // Someone else's: only root can give a file away (chown(2)); elsewhere skip.
        let other = if me == 4242 { 4343 } else { 4242 };
        if let Err(e) = std::os::unix::fs::chown(&p, Some(other), None) {
            eprintln!("skipped: chown to uid {other} needs root ({e})");
            return;
        }
        let msg = read_private_key(&p).unwrap_err().to_string();
        assert!(
            msg.contains(&p.display().to_string())
                && msg.contains(&format!("belongs to uid {other}"))
                && msg.contains(&format!("chown {me} ")),
            "{msg}"
        );
        std::os::unix::fs::chown(&p, Some(0), None).unwrap();
        assert!(read_private_key(&p).is_ok(), "root's file is fine");
    }

    #[test]
    fn key_files_mode_0600_and_loose_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("private.key");
        let sk = PrivateKey::generate();
        write_private_key(&p, &sk).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_private_key(&p).unwrap().public_key(), sk.public_key());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_private_key(&p).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&p.display().to_string()) && msg.contains("0640"),
            "{msg}"
        );
        // writing again tightens the mode of the existing file
        write_private_key(&p, &sk).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let pubp = dir.path().join("public.key");
        write_public_key(&pubp, &sk.public_key()).unwrap();
        assert_eq!(read_public_key(&pubp).unwrap(), sk.public_key());
        let e = read_private_key(&dir.path().join("missing")).unwrap_err();
        assert!(e.to_string().contains("missing"));
    }
}
