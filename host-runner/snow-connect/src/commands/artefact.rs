//! `snow-connect artefact keygen|sign|verify|push|pull`: signing keys and Sigstore bundles, and
//! components in OCI registries (snow-oci).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use snow_runtime::artefact::{Checked, SigningKey};

use crate::args::{Args, trust_policy};
use crate::usage::USAGE;

/// Keys, signatures and their checks (Sigstore bundles, `cosign sign-blob --bundle` compatible).
pub fn artefact(args: &[String]) -> Result<()> {
    let args = Args::parse_with_flags(
        "artefact",
        args,
        &["key", "bundle", "trusted-keys", "trusted-root", "out", "auth-file", "annotation"],
        &["plain-http", "unsigned"],
    )?;
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
        Some("push") => push(&args),
        Some("pull") => pull(&args),
        Some("attach") => attach(&args),
        _ => bail!("artefact needs keygen, sign, verify, push or pull\n{USAGE}"),
    }
}

/// The registry settings of the command line: `--plain-http` for the reference's registry,
/// `--auth-file` (else the default credentials file).
fn resolver(args: &Args, reference: &snow_oci::Reference) -> snow_oci::Resolver {
    let plain = if args.flag("plain-http") { vec![reference.registry.clone()] } else { Vec::new() };
    snow_oci::Resolver::new(snow_oci::Settings::command_line(plain, args.option("auth-file").map(PathBuf::from)))
}

/// `artefact push <component.wasm> <oci://registry/repository:tag>`: the component and its bundle
/// (`--bundle`, else beside it; `--unsigned` to push none); prints the pinned reference.
fn push(args: &Args) -> Result<()> {
    let (Some(file), Some(target)) = (args.positional.get(1), args.positional.get(2)) else {
        bail!("artefact push needs the component and the reference to push it to\n{USAGE}");
    };
    let reference = snow_oci::Reference::parse_with(target, true)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
    let bundle_path =
        args.option("bundle").map(PathBuf::from).unwrap_or_else(|| snow_runtime::artefact::default_bundle_path(file.as_ref()));
    let bundle = if args.flag("unsigned") {
        None
    } else {
        Some(std::fs::read(&bundle_path).with_context(|| {
            format!(
                "reading the bundle {} (sign the component with `snow-connect artefact sign`, or push it with --unsigned)",
                bundle_path.display()
            )
        })?)
    };
    let mut annotations = std::collections::BTreeMap::new();
    for a in args.options("annotation") {
        let (k, v) = a.split_once('=').with_context(|| format!("--annotation {a:?} must be key=value"))?;
        annotations.insert(k.to_string(), v.to_string());
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let pushed = rt.block_on(snow_oci::push::push(&resolver(args, &reference), &reference, &bytes, bundle.as_deref(), annotations))?;
    println!("component.ref={}", pushed.pinned);
    eprintln!(
        "pushed {file} (sha256:{}, {} bytes){} to {}; name it in a connector's configuration with the line above",
        pushed.component,
        bytes.len(),
        if pushed.bundle.is_some() { " and its bundle as a referrer" } else { " without a bundle" },
        reference.registry
    );
    Ok(())
}

/// `artefact attach <oci://…> --bundle FILE`: a bundle (of the component's bytes) attached to a
/// component already in the registry.
fn attach(args: &Args) -> Result<()> {
    let target = args.positional.get(1).with_context(|| format!("artefact attach needs the reference of the component\n{USAGE}"))?;
    let reference = snow_oci::Reference::parse_with(target, true)?;
    let path = args.option("bundle").context("--bundle (the Sigstore bundle of the component) is required")?;
    let bundle = std::fs::read(path).with_context(|| format!("reading {path}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let attached = rt.block_on(snow_oci::push::attach(&resolver(args, &reference), &reference, &bundle))?;
    println!("component.ref={}", attached.pinned);
    eprintln!("attached {path} to sha256:{} as the referrer sha256:{}", attached.component, attached.bundle.unwrap_or_default());
    Ok(())
}

/// `artefact pull <oci://…> [--out FILE] [--trusted-keys PUB]`: the component and its bundle
/// into files (checked against their digests; verified when keys are given).
fn pull(args: &Args) -> Result<()> {
    let target = args.positional.get(1).with_context(|| format!("artefact pull needs the reference to pull\n{USAGE}"))?;
    let reference = snow_oci::Reference::parse_with(target, true)?;
    let policy = trust_policy(args, false)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let resolved = rt.block_on(resolver(args, &reference).resolve(&reference, &policy))?;
    let name = reference.repository.rsplit('/').next().unwrap_or("component");
    let out = args.option("out").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(format!("{name}.wasm")));
    std::fs::copy(&resolved.path, &out).with_context(|| format!("writing {}", out.display()))?;
    let kept = snow_runtime::artefact::default_bundle_path(&resolved.path);
    let bundle_out = snow_runtime::artefact::default_bundle_path(&out);
    let bundle = if kept.is_file() {
        std::fs::copy(&kept, &bundle_out).with_context(|| format!("writing {}", bundle_out.display()))?;
        format!(", bundle {}", bundle_out.display())
    } else {
        let _ = std::fs::remove_file(&bundle_out);
        ", no bundle".to_string()
    };
    println!("{} -> {} (sha256:{}{bundle})", resolved.pinned, out.display(), resolved.component);
    if args.option("trusted-keys").is_some() {
        let checked = Checked::inspect(&out, &policy)?;
        match checked.signature() {
            Ok(signature) => println!("{}: {signature}", out.display()),
            Err(refusal) => bail!("component {} refused: {refusal}", out.display()),
        }
    }
    Ok(())
}
