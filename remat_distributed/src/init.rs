//! Where a rank learns its place in the group: torchrun's variables or
//! explicit arguments (docs/semantics.md, rule W1).

use crate::error::{Error, Result};
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

/// Which c10d backend carries the collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Gloo, on CPU tensors.
    Gloo,
    /// NCCL, on CUDA tensors (CPU tensors still go to Gloo), in a build
    /// with the `cuda` feature on a machine with a CUDA device; otherwise
    /// joining returns [`Error::NotBuilt`] or [`Error::Config`]
    /// (docs/semantics.md, rule W2). Each rank uses the device its tensors
    /// are on: `LOCAL_RANK`'s, by convention.
    Nccl,
}

/// PyTorch's default process-group timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How one rank joins a group.
///
/// ```
/// use remat_distributed::InitOptions;
/// use std::time::Duration;
/// let opts = InitOptions::new(0, 2, "127.0.0.1", 29500).timeout(Duration::from_secs(10));
/// assert_eq!(opts.world_size, 2);
/// assert_eq!(opts.local_rank, 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitOptions {
    /// This process's rank, `0..world_size`; rank 0 hosts the store.
    pub rank: usize,
    /// How many ranks the group has.
    pub world_size: usize,
    /// The rank's index on its machine (torchrun's `LOCAL_RANK`): the CUDA
    /// device it would use. Defaults to `rank`.
    pub local_rank: usize,
    /// Rank 0's address or host name, where the store listens.
    pub master_addr: String,
    /// The store's port on rank 0.
    pub master_port: u16,
    /// How long forming the group and each collective may wait for peers.
    pub timeout: Duration,
    /// The backend.
    pub backend: Backend,
    /// The address Gloo binds on this machine; by default the loopback
    /// address when `master_addr` is a loopback one, else this machine's
    /// host name.
    pub device_host: Option<String>,
}

impl InitOptions {
    /// Explicit arguments, Gloo, [`DEFAULT_TIMEOUT`].
    pub fn new(
        rank: usize,
        world_size: usize,
        master_addr: impl Into<String>,
        master_port: u16,
    ) -> InitOptions {
        InitOptions {
            rank,
            world_size,
            local_rank: rank,
            master_addr: master_addr.into(),
            master_port,
            timeout: DEFAULT_TIMEOUT,
            backend: Backend::Gloo,
            device_host: None,
        }
    }

    /// The same options with another timeout.
    pub fn timeout(mut self, timeout: Duration) -> InitOptions {
        self.timeout = timeout;
        self
    }

    /// The same options with another backend.
    pub fn backend(mut self, backend: Backend) -> InitOptions {
        self.backend = backend;
        self
    }

    /// From the variables torchrun sets: `RANK`, `WORLD_SIZE`,
    /// `MASTER_ADDR`, `MASTER_PORT` (required) and `LOCAL_RANK`
    /// (optional); `REMAT_DIST_TIMEOUT` (seconds) overrides the timeout.
    ///
    /// ```
    /// // Outside a launcher the variables are missing, and the error names them.
    /// if std::env::var_os("RANK").is_none() {
    ///     let err = remat_distributed::InitOptions::from_env().unwrap_err();
    ///     assert!(err.to_string().contains("RANK"));
    /// }
    /// ```
    pub fn from_env() -> Result<InitOptions> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`InitOptions::from_env`] over any source of variables.
    ///
    /// ```
    /// use remat_distributed::InitOptions;
    /// let vars = [("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "localhost"), ("MASTER_PORT", "29500")];
    /// let opts = InitOptions::from_vars(|n| vars.iter().find(|v| v.0 == n).map(|v| v.1.to_string())).unwrap();
    /// assert_eq!((opts.rank, opts.local_rank, opts.master_port), (1, 1, 29500));
    /// ```
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<InitOptions> {
        let need = |name: &str| {
            var(name).ok_or_else(|| {
                Error::Config(format!(
                    "{name} is not set: start every rank with RANK, WORLD_SIZE, MASTER_ADDR and \
                     MASTER_PORT (torchrun sets them), or pass them with InitOptions::new"
                ))
            })
        };
        let number = |name: &str, text: String| {
            text.trim().parse::<usize>().map_err(|_| {
                Error::Config(format!(
                    "{name}={text:?} is not a number: set it to a whole number"
                ))
            })
        };
        let rank = number("RANK", need("RANK")?)?;
        let world_size = number("WORLD_SIZE", need("WORLD_SIZE")?)?;
        let local_rank = match var("LOCAL_RANK") {
            Some(text) => number("LOCAL_RANK", text)?,
            None => rank,
        };
        let master_addr = need("MASTER_ADDR")?;
        let master_port = parse_port(&need("MASTER_PORT")?)?;
        let mut opts = InitOptions::new(rank, world_size, master_addr, master_port);
        opts.local_rank = local_rank;
        if let Some(text) = var("REMAT_DIST_TIMEOUT") {
            let secs = text.trim().parse::<f64>().ok().filter(|s| *s > 0.0);
            let secs = secs.ok_or_else(|| {
                Error::Config(format!(
                    "REMAT_DIST_TIMEOUT={text:?} is not a positive number of seconds"
                ))
            })?;
            opts.timeout = Duration::from_secs_f64(secs);
        }
        Ok(opts)
    }

    /// Checks what can be checked before any connection, and resolves the
    /// address Gloo binds (docs/semantics.md, rule W1).
    pub(crate) fn validate(&self) -> Result<String> {
        if self.world_size == 0 {
            return Err(Error::Config(
                "WORLD_SIZE is 0: a group has at least one rank".into(),
            ));
        }
        if self.rank >= self.world_size {
            return Err(Error::Config(format!(
                "rank {} is outside a world of {} ranks: ranks run from 0 to WORLD_SIZE - 1",
                self.rank, self.world_size
            )));
        }
        if i32::try_from(self.world_size).is_err() {
            return Err(Error::Config(format!(
                "WORLD_SIZE {} is more ranks than c10d counts",
                self.world_size
            )));
        }
        if self.master_port == 0 {
            return Err(Error::Config(
                "MASTER_PORT is 0: give rank 0's store a fixed port (1-65535) every rank knows"
                    .into(),
            ));
        }
        let addrs: Vec<IpAddr> = (self.master_addr.as_str(), self.master_port)
            .to_socket_addrs()
            .map_err(|e| {
                Error::Config(format!(
                    "MASTER_ADDR {:?} does not resolve ({e}): set it to rank 0's address or \
                     host name, as every rank can reach it",
                    self.master_addr
                ))
            })?
            .map(|a| a.ip())
            .collect();
        if let Some(host) = &self.device_host {
            return Ok(host.clone());
        }
        if addrs.iter().any(IpAddr::is_loopback) {
            return Ok("127.0.0.1".into());
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        if host.is_empty() {
            return Err(Error::Config(
                "cannot tell this machine's host name for Gloo: set InitOptions::device_host to \
                 an address of this machine the other ranks can reach"
                    .into(),
            ));
        }
        Ok(host)
    }
}

fn parse_port(text: &str) -> Result<u16> {
    match text.trim().parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(p as u16),
        _ => Err(Error::Config(format!(
            "MASTER_PORT={text:?} is not a port: set it to a number from 1 to 65535, the same on \
             every rank"
        ))),
    }
}
