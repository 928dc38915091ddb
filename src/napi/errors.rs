//! Core errors become JS `Error`s whose `code` is the variant's stable code.

use std::collections::HashMap;

use napi::{Env, JsError};

use crate::error::Error as CoreError;

/// A JS error object with `code` set, wrapped so napi throws or rejects with that very object.
pub fn coded(env: &Env, err: &CoreError) -> napi::Error {
    let js: napi::Error<String> = napi::Error::new(err.code().to_string(), err.to_string());
    let value = JsError::from(js).into_unknown(*env);
    napi::Error::from(value)
}

/// Runs a core future on the addon's runtime; resolves with `convert(value)` or rejects with a
/// coded error.
pub fn promise<'env, T, V, F, C>(
    env: &'env Env,
    fut: F,
    convert: C,
) -> napi::Result<napi::bindgen_prelude::PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: napi::bindgen_prelude::ToNapiValue + 'static,
    F: std::future::Future<Output = crate::error::Result<T>> + Send + 'static,
    C: FnOnce(T) -> V + 'static,
{
    env.spawn_future_with_callback(
        async move { Ok(fut.await) },
        move |env, result| match result {
            Ok(value) => Ok(convert(value)),
            Err(e) => Err(coded(env, &e)),
        },
    )
}

/// A JS environment object (`process.env` or a plain record) as core variables; `undefined`
/// and `null` values count as unset.
pub fn env_vars(env: Option<HashMap<String, Option<String>>>) -> HashMap<String, String> {
    match env {
        Some(map) => map
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect(),
        None => std::env::vars().collect(),
    }
}
