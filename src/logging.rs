//! Diagnostics through `tracing`: off unless `PO_SANDBOX_LOG` holds a filter, then to stderr.

use crate::names::vars::LOG_VAR;
use std::sync::OnceLock;

static INIT: OnceLock<()> = OnceLock::new();

/// Installs the stderr subscriber once, when `PO_SANDBOX_LOG` is set and parses; otherwise
/// nothing is installed and every `tracing` call is a no-op.
pub fn init_from_env() {
    INIT.get_or_init(|| {
        let Ok(filter) = std::env::var(LOG_VAR) else {
            return;
        };
        if filter.trim().is_empty() {
            return;
        }
        match tracing_subscriber::EnvFilter::try_new(&filter) {
            Ok(filter) => {
                let _ = tracing_subscriber::fmt()
                    .with_env_filter(filter)
                    .with_writer(std::io::stderr)
                    .with_target(true)
                    .try_init();
            }
            Err(e) => eprintln!("po-sandbox: ignoring {LOG_VAR}={filter:?}: {e}"),
        }
    });
}
