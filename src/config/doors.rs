//! The list of doors beside the gateway's own (gRPC, `listen`): one entry
//! each ([`DOORS`]), and everything that entry drives: the `--NAME-listen`
//! flag and its environment variable, the address, the exposure guard at
//! start and at reload, what a reload cannot change, and the start-up
//! line. A door's own settings are its file beside this one
//! (`config/mcp.rs`, `config/model.rs`).

use std::{net::SocketAddr, sync::Arc};

use super::{address, exposure, mcp, model, ConfigError, McpSettings, ModelSettings, Problems};
use crate::env::Env;

/// Every door beside the gateway's, in the order they start.
pub const DOORS: &[Door] = &[mcp::DOOR, model::DOOR];

/// One door's entry in [`DOORS`].
pub struct Door {
    /// The door's name, as the door names itself when served.
    pub name: &'static str,
    /// Its section of the configuration file, and the key of its address
    /// there (`SECTION.listen`).
    pub section: &'static str,
    pub listen_key: &'static str,
    /// The flag that sets its address (`--FLAG ADDR`).
    pub flag: &'static str,
    /// The environment variable that sets its address, below the flag.
    pub env: &'static str,
    /// What the flag does, before "on this address too" and its sources.
    pub help: &'static str,
    /// What it serves and where, for the start-up line.
    pub serves: &'static str,
    pub path: &'static str,
    /// Its address, when it is on.
    pub(crate) address: fn(&DoorSettings) -> Option<SocketAddr>,
    /// Whether it asks callers for credentials (the second argument:
    /// principals are configured).
    pub(crate) authenticates: fn(&DoorSettings, bool) -> bool,
    /// Whether `next` changes what the door was started with beyond its
    /// address and origins (that takes a restart).
    pub(crate) restarts: fn(&DoorSettings, &DoorSettings) -> bool,
    /// The browser origins it takes requests from besides loopback ones
    /// (`SECTION.allowed_origins`; they reload).
    pub(crate) origins: fn(&DoorSettings) -> &[String],
}

/// The settings of every door of [`DOORS`], each `None` when it is off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DoorSettings {
    pub(crate) mcp: Option<McpSettings>,
    pub(crate) model: Option<Arc<ModelSettings>>,
}

impl Door {
    /// The flag's whole help: what it does and the sources below it.
    pub fn flag_help(&self) -> String {
        format!("{} on this address too; also {}, or `{}` in the configuration", self.help, self.env, self.listen_key)
    }

    /// The door's address as the sources say: its flag (`flags`, by door
    /// name), then its environment variable, then `SECTION.listen`
    /// (`configured`); off when none is set or the one set is empty.
    pub(super) fn listen(
        &self,
        flags: &[(&'static str, String)],
        env: &Env,
        configured: Option<String>,
        problems: &mut Problems,
    ) -> Option<SocketAddr> {
        let flag = flags.iter().find(|(door, _)| *door == self.name).map(|(_, text)| text.clone());
        let text = flag.or_else(|| env.get(self.env).map(str::to_owned)).or(configured)?;
        let text = text.trim();
        (!text.is_empty()).then(|| problems.keep(address(text))).flatten()
    }
}

/// The allowed origins of every door that is on, by door name.
pub(crate) fn origins(doors: &DoorSettings) -> Vec<(&'static str, Vec<String>)> {
    addresses(doors).map(|(door, _)| (door.name, (door.origins)(doors).to_vec())).collect()
}

/// Every door that is on, with its address.
pub(crate) fn addresses(doors: &DoorSettings) -> impl Iterator<Item = (&'static Door, SocketAddr)> + '_ {
    DOORS.iter().filter_map(|door| Some((door, (door.address)(doors)?)))
}

/// The exposure guard of every door that is on: listening as `running`
/// says, asking for credentials as `next` does.
pub(super) fn check_exposure(
    running: &DoorSettings,
    next: &DoorSettings,
    principals: bool,
    tls: bool,
    allow_remote: bool,
) -> Result<(), ConfigError> {
    for (door, listen) in addresses(running) {
        exposure(listen, (door.authenticates)(next, principals), tls, allow_remote)?;
    }
    Ok(())
}

/// The keys of every door whose running settings `next` would change.
pub(super) fn changed(running: &DoorSettings, next: &DoorSettings) -> Vec<&'static str> {
    let mut changed = Vec::new();
    for door in DOORS {
        if (door.address)(running) != (door.address)(next) {
            changed.push(door.listen_key);
        } else if (door.restarts)(running, next) {
            changed.push(door.section);
        }
    }
    changed
}
