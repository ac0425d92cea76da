//! `snow-connect artefact keygen|sign|verify`: signing keys and Sigstore bundles.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use snow_runtime::artefact::{Checked, SigningKey};

use crate::args::{Args, trust_policy};
use crate::usage::USAGE;

/// Keys, signatures and their checks (Sigstore bundles, `cosign sign-blob --bundle` compatible).
pub fn artefact(args: &[String]) -> Result<()> {
    let args = Args::parse("artefact", args, &["key", "bundle", "trusted-keys", "trusted-root"])?;
    let operand = |what: &str| args.positional.get(1).map(PathBuf::from).with_context(|| format!("artefact {what}\n{USAGE}"));
    match args.positional.first().map(String::as_str) {
        Some("keygen") => {
            let (key, public) = snow_runtime::artefact::keys::generate(&operand("keygen needs a file prefix")?)?;
            println!(
                "private key {} (keep it secret; mode 0600)\npublic key  {} (give it to hosts as component.trusted.keys)",
                key.display(),
                public.display()
            );
            Ok(())
        }
        Some("sign") => {
            let component = operand("sign needs the component to sign")?;
            let key = SigningKey::from_pem_file(args.option("key").context("--key (the PKCS#8 PEM private key) is required")?.as_ref())?;
            let bundle = snow_runtime::artefact::sign_file(&component, &key, args.option("bundle").map(AsRef::as_ref))?;
            println!("signed {} -> {}", component.display(), bundle.display());
            Ok(())
        }
        Some("verify") => {
            let component = operand("verify needs the component to check")?;
            let checked = Checked::inspect(&component, &trust_policy(&args, true)?)?;
            match checked.signature() {
                Ok(signature) => {
                    println!("{}: {signature} (sha256 {})", component.display(), checked.digest());
                    Ok(())
                }
                Err(refusal) => bail!("component {} refused: {refusal}", component.display()),
            }
        }
        _ => bail!("artefact needs keygen, sign or verify\n{USAGE}"),
    }
}
