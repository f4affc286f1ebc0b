//! One handler per request or notification, as functions of the session (and the client, for
//! the ones that reply or publish). `crate::Backend` routes tower-lsp's calls to them.

pub mod code_action;
pub mod configuration;
pub mod diagnostic;
pub mod did_change;
pub mod did_close;
pub mod did_open;
pub mod hover;
pub mod initialize;
pub mod notebook;
