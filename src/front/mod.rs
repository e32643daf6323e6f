//! The front doors (docs/architecture.md, "Front doors"): thin adapters
//! over the core ([`crate::exec`] for calls and listings, [`crate::identity`]
//! for who calls), each a folder of its own. They never import each other;
//! a new one is a new folder here and nothing else.

pub(crate) mod grpc;
pub(crate) mod mcp;
pub(crate) mod metrics;
pub(crate) mod model;
