//! The build's commit, for `GET /` of the REST API (clients read it): `git rev-parse HEAD` of the
//! checkout being built, or `SNOW_COMMIT` when set (a build from a source archive), else `unknown`.
fn main() {
    println!("cargo:rerun-if-env-changed=SNOW_COMMIT");
    let git_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.git");
    if git_dir.exists() {
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD"))
            && let Some(reference) = head.trim().strip_prefix("ref: ")
        {
            println!("cargo:rerun-if-changed={}", git_dir.join(reference).display());
        }
    }
    let commit = std::env::var("SNOW_COMMIT").ok().filter(|c| !c.is_empty()).or_else(|| {
        std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    });
    println!("cargo:rustc-env=SNOW_COMMIT={}", commit.unwrap_or_else(|| "unknown".into()));
}
