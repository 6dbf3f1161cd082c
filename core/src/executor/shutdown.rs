//! Prompt shutdown of a pipeline's threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

use crate::sync::LockExt;

/// Observed by every thread of a running pipeline. Blocking operations select on
/// [`Shutdown::channel`], which disconnects when the pipeline is dropped, so no thread stays
/// blocked on a channel after that.
#[derive(Clone, Debug)]
pub struct Shutdown {
    rx: Receiver<()>,
    flag: Arc<AtomicBool>,
}

/// Owned by the pipeline iterator (and shared with its cancellers): firing (or dropping)
/// it signals shutdown.
#[derive(Debug)]
pub(crate) struct ShutdownTrigger {
    tx: Mutex<Option<Sender<()>>>,
    flag: Arc<AtomicBool>,
}

impl ShutdownTrigger {
    /// Signals shutdown: sets the flag and disconnects the channel.
    pub(crate) fn fire(&self) {
        self.flag.store(true, Ordering::Release);
        self.tx.locked().take();
    }
}

impl Shutdown {
    pub(crate) fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = crossbeam_channel::bounded(0);
        let flag = Arc::new(AtomicBool::new(false));
        (
            ShutdownTrigger {
                tx: Mutex::new(Some(tx)),
                flag: Arc::clone(&flag),
            },
            Shutdown { rx, flag },
        )
    }

    /// True once the pipeline is being dropped.
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// A channel that never delivers and disconnects on shutdown (use in `select!`).
    pub fn channel(&self) -> &Receiver<()> {
        &self.rx
    }
}

impl Drop for ShutdownTrigger {
    fn drop(&mut self) {
        self.fire();
    }
}
