//! Callbacks to JS listeners. The event and state types themselves are core types with
//! `#[napi]` (see `src/events.rs`, `src/provider/status.rs`): a discriminated union on `type`
//! and string-literal unions in `index.d.ts`.

use std::sync::Arc;

use napi::bindgen_prelude::{Function, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use crate::events::{Event, EventBus};

/// The JS shape of a listener: `(event) => void`, weak (it never keeps Node alive) and not
/// error-first.
pub type Listener<T> = ThreadsafeFunction<T, (), T, napi::Status, false, true>;

/// A JS callback as a [`Listener`] callable from any thread.
pub fn listener<T: ToNapiValue + 'static>(callback: Function<T, ()>) -> napi::Result<Listener<T>> {
    let builder = callback.build_threadsafe_function();
    builder.callee_handled::<false>().weak::<true>().build()
}

/// Subscribes a JS callback to a bus.
pub fn subscribe(events: &EventBus, callback: Function<Event, ()>) -> napi::Result<()> {
    let tsfn = listener(callback)?;
    events.subscribe(Arc::new(move |event| {
        tsfn.call(event.clone(), ThreadsafeFunctionCallMode::NonBlocking);
    }));
    Ok(())
}
