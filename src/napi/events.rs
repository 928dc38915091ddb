//! Lifecycle events to JS callbacks. The event and state types themselves are core types with
//! `#[napi]` (see `src/events.rs`, `src/provider/status.rs`): a discriminated union on `type`
//! and string-literal unions in `index.d.ts`.

use std::sync::Arc;

use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use crate::events::{Event, EventBus};

/// The JS shape of an event listener: `(event: SandboxEvent) => void`, weak (it never keeps
/// Node alive) and not error-first.
type EventCallback = ThreadsafeFunction<Event, (), Event, napi::Status, false, true>;

/// Subscribes a JS callback to a bus.
pub fn subscribe(events: &EventBus, callback: Function<Event, ()>) -> napi::Result<()> {
    let tsfn: EventCallback = callback
        .build_threadsafe_function()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    events.subscribe(Arc::new(move |event| {
        tsfn.call(event.clone(), ThreadsafeFunctionCallMode::NonBlocking);
    }));
    Ok(())
}
