//! Running the commands the tasks are made of: a failure names the command
//! as it was given, so a task's error says which of its steps broke.

use crate::paths::repo_root;
use crate::Result;
use std::env;
use std::process::Command;

pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// [`run`], returning what the command printed on standard output; its
/// standard error passes through. On a failure the output is shown too,
/// since it may say what went wrong.
pub(crate) fn stdout_of(cmd: &mut Command) -> Result<String> {
    let shown = format!("{cmd:?}");
    let output = cmd
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        eprintln!("{stdout}");
        Err(format!("{shown} failed ({})", output.status))
    }
}

pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    cmd.current_dir(repo_root());
    cmd
}
