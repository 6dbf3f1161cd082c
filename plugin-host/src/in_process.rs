//! [`InProcess`]: a plugin crate compiled into the host process, as a [`Backend`].

use std::sync::Arc;

use sluice_sdk::abi::status;
use sluice_sdk::{Config, Plugin, PluginInfo};

use crate::backend::{Backend, CallFailure, Instance, Lent};
use crate::error::{Error, Result};
use crate::lent::{LentCall, call_in_process};

/// A plugin compiled into the host process, run through the same wire format (or lent
/// path) and contracts as a loaded one: the reference a loaded build is compared with, and a
/// way to use a plugin crate directly as a stage.
pub struct InProcess<P: Plugin> {
    info: PluginInfo,
    _plugin: std::marker::PhantomData<fn() -> P>,
}

impl<P: Plugin> InProcess<P> {
    /// The backend for `P`.
    pub fn new() -> Arc<InProcess<P>> {
        Arc::new(InProcess {
            info: P::info(),
            _plugin: std::marker::PhantomData,
        })
    }
}

impl<P: Plugin> Backend for InProcess<P> {
    fn info(&self) -> &PluginInfo {
        &self.info
    }

    fn source(&self) -> String {
        format!("in-process {}", std::any::type_name::<P>())
    }

    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>> {
        let init = |message: String| Error::Init {
            plugin: self.info.name.clone(),
            message,
        };
        let config = Config::from_bytes(config).map_err(|e| init(e.to_string()))?;
        let plugin = P::new(&config).map_err(|e| init(e.to_string()))?;
        Ok(Box::new(InProcessInstance {
            plugin,
            info: self.info.clone(),
        }))
    }

    /// The SDK's lent path runs in-process as in a native library of this SDK's version.
    fn lends(&self) -> bool {
        true
    }
}

struct InProcessInstance<P> {
    plugin: P,
    info: PluginInfo,
}

impl<P: Plugin> Instance for InProcessInstance<P> {
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        let plugin = &mut self.plugin;
        let info = &self.info;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sluice_sdk::process(plugin, info, input, seeds)
        })) {
            Ok(Ok(out)) => {
                output(&out);
                Ok(())
            }
            Ok(Err(e)) => Err(CallFailure::from_status(e.status(), e.to_string())),
            Err(_) => Err(CallFailure::from_status(
                status::PANIC,
                "panicked".to_string(),
            )),
        }
    }

    fn call_lent(&mut self, call: &mut LentCall<'_>) -> std::result::Result<Lent, CallFailure> {
        call_in_process(&mut self.plugin, &self.info, call)
    }
}
