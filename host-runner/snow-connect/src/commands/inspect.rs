//! `snow-connect inspect`: what a component is (world, size, digest, signature, imports,
//! exports) and what it costs to compile and instantiate.

use std::path::PathBuf;

use anyhow::{Context, Result};
use snow_runtime::artefact::{Checked, Refusal};

use crate::args::{Args, trust_policy};

/// Reports on the component `args` names.
pub fn inspect(args: &[String]) -> Result<()> {
    let args = Args::parse("inspect", args, &["instantiations", "trusted-keys", "bundle"])?;
    let path = PathBuf::from(args.positional.first().context("inspect needs a component path")?);
    let n: u32 = args.option("instantiations").map(str::parse).transpose().context("--instantiations must be a number")?.unwrap_or(200);
    let policy = trust_policy(&args, false)?;
    let artefact = Checked::inspect(&path, &policy)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = rt.block_on(async {
        snow_runtime::component::inspect::inspect(&snow_runtime::component::ComponentRuntime::new()?, &artefact, n).await
    })?;
    let signature = match artefact.signature() {
        Ok(signature) => signature.to_string(),
        Err(Refusal::NoTrustedKeys) => {
            format!("bundle at {}, not checked (give --trusted-keys to verify it)", policy.bundle_for(&path).display())
        }
        Err(refusal) => format!("not verified: {refusal}"),
    };
    println!("component      {}", path.display());
    println!("world          {}", report.world);
    println!("size           {} bytes", report.size_bytes);
    println!("sha256         {}", report.digest);
    println!("signature      {signature}");
    println!("compile        {:.1} ms (Cranelift, with import checks and pre-instantiation)", report.compile.as_secs_f64() * 1e3);
    println!("instantiate    {:.1} µs (mean of {})", report.instantiate_mean.as_secs_f64() * 1e6, report.instantiations);
    println!("imports        {}", report.imports.join("\n               "));
    println!("exports        {}", report.exports.join("\n               "));
    Ok(())
}
