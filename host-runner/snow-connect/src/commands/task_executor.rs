//! `snow-connect task-executor`: the Kafka Connect plugin's child process (snow-executor).

use anyhow::Result;

use crate::args::Args;

/// `snow-connect task-executor --plugin-dir DIR`: serves the Kafka Connect plugin on stdin/stdout
/// until it says stop or closes stdin ([`snow_executor`]).
pub fn task_executor(args: &[String]) -> Result<()> {
    let parsed = Args::parse("task-executor", args, &["plugin-dir"])?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = rt.block_on(snow_executor::serve(parsed.option("plugin-dir")));
    // Units still in a call are not waited for: Connect has what was handed over.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served
}
