//! The Python peers: a long-lived worker (`bench/python/peers.py worker`)
//! that answers one JSON command per line, so that Python variants run in
//! the same rounds as the Rust ones; and one-shot children for memory.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

pub struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

#[derive(Clone)]
pub struct Peers {
    pub python: PathBuf,
    pub script: PathBuf,
}

impl Peers {
    pub fn worker(&self) -> Result<Worker, String> {
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .arg("worker")
            .env("PYTHONWARNINGS", "ignore")
            .env("REMAT_BENCH_THREADS", crate::threads().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.python.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Worker {
            child,
            stdin,
            stdout,
        })
    }
}

/// The last line of a child's standard output, as JSON.
pub fn last_json(out: std::process::Output, what: &str) -> Result<Value, String> {
    if !out.status.success() {
        return Err(format!("{what} failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or(""))
        .map_err(|e| format!("{what} answered {text:?}: {e}"))
}

impl Peers {
    /// A fresh Python process running `steps` steps of `policy` (the
    /// memory child of peers.py), with glibc's allocator pinned as this
    /// process's or with its defaults; its JSON line.
    pub fn child(
        &self,
        imp: &str,
        policy: &str,
        config: &str,
        steps: usize,
        pinned: bool,
    ) -> Result<Value, String> {
        let out = crate::allocator::setting(&mut Command::new(&self.python), pinned)
            .arg(&self.script)
            .args(["rss", imp, policy, config, &steps.to_string()])
            .env("PYTHONWARNINGS", "ignore")
            .env("REMAT_BENCH_THREADS", crate::threads().to_string())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.python.display()))?;
        last_json(out, &format!("python child {imp} {policy}"))
    }
}

impl Worker {
    pub fn ask(&mut self, cmd: Value) -> Result<Value, String> {
        writeln!(self.stdin, "{cmd}").map_err(|e| format!("python worker: {e}"))?;
        self.stdin
            .flush()
            .map_err(|e| format!("python worker: {e}"))?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| format!("python worker: {e}"))?;
        let reply: Value = serde_json::from_str(&line)
            .map_err(|e| format!("python worker answered {line:?} to {cmd}: {e}"))?;
        if let Some(err) = reply.get("error") {
            return Err(format!("python worker, on {cmd}: {err}"));
        }
        Ok(reply)
    }

    pub fn step(&mut self, config: &str, imp: &str, policy: &str) -> Result<(f64, f64), String> {
        let r =
            self.ask(json!({"cmd": "step", "config": config, "impl": imp, "policy": policy}))?;
        Ok((num(&r, "secs")?, num(&r, "loss")?))
    }

    /// Sets the worker's intra-op threads (section 1 runs at several).
    pub fn threads(&mut self, n: i32) -> Result<(), String> {
        let r = self.ask(json!({"cmd": "threads", "n": n}))?;
        match num(&r, "threads")? as i32 {
            got if got == n => Ok(()),
            got => Err(format!("python worker runs {got} threads, not {n}")),
        }
    }

    pub fn bytes(&mut self, config: &str, imp: &str, policy: &str) -> Result<i64, String> {
        let r =
            self.ask(json!({"cmd": "bytes", "config": config, "impl": imp, "policy": policy}))?;
        Ok(num(&r, "bytes")? as i64)
    }

    pub fn chain(&mut self, imp: &str, regions: bool, backward: bool) -> Result<f64, String> {
        let r = self
            .ask(json!({"cmd": "chain", "impl": imp, "regions": regions, "backward": backward}))?;
        num(&r, "secs")
    }

    pub fn quit(mut self) {
        let _ = self.ask(json!({"cmd": "quit"}));
        let _ = self.child.wait();
    }
}

pub fn num(v: &Value, key: &str) -> Result<f64, String> {
    v.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no number `{key}` in {v}"))
}
