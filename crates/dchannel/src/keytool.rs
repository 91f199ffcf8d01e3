//! `dchannel genkey` and `dchannel pubkey`: the key pair of a device or a
//! gateway (X25519, base64 as WireGuard writes it; docs/deploy.md).

use crate::cli::{GenkeyArgs, PubkeyArgs};
use anyhow::{bail, Context, Result};
use dchannel_crypto::keys::{self, read_private_key, write_private_key};
use dchannel_crypto::PrivateKey;
use std::io::{Read, Write};
use zeroize::Zeroize;

/// A new private key on stdout, or in `--out FILE` (mode 0600). An existing
/// FILE is refused without `--force`: a typo in a key rotation must not
/// destroy the live key.
pub fn genkey(a: &GenkeyArgs) -> Result<()> {
    match &a.out {
        Some(path) => {
            if !a.force && path.symlink_metadata().is_ok() {
                bail!(
                    "--out {}: the file exists (a key in use?); not overwritten. Choose \
                     another name, or pass --force to replace it",
                    path.display()
                );
            }
            write_private_key(path, &PrivateKey::generate()).context("--out")
        }
        None => {
            let mut text = keys::genkey();
            text.push('\n');
            let r = std::io::stdout().lock().write_all(text.as_bytes());
            text.zeroize();
            Ok(r?)
        }
    }
}

/// The public key of the private key in `FILE` (refused if group/world
/// readable) or on stdin.
pub fn pubkey(a: &PubkeyArgs) -> Result<()> {
    let public = match &a.file {
        Some(path) => read_private_key(path)?.public_key().to_base64(),
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the private key from stdin")?;
            let r = keys::pubkey(&text);
            text.zeroize();
            r?
        }
    };
    writeln!(std::io::stdout().lock(), "{public}")?;
    Ok(())
}

/// Exits with 0, or 1 and the error on stderr (as the agent roles do).
pub fn exit(r: Result<()>) -> ! {
    match r {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("dchannel: error: {e:#}");
            std::process::exit(1);
        }
    }
}
