//! Core errors become JS `Error`s whose `code` is the variant's stable code, with `reasonCode`
//! where the core has a finer one and the `source()` chain as nested `cause` errors.

use std::future::Future;

use napi::bindgen_prelude::{
    FromNapiValue, JsObjectValue, JsValue, Object, PromiseRaw, ToNapiValue, Unknown,
};
use napi::{Env, JsError, ValueType};

use crate::error::Error as CoreError;

/// A JS error object with `code` (and `reasonCode`, `cause`) set, wrapped so napi throws or
/// rejects with that very object.
pub fn coded(env: &Env, err: &CoreError) -> napi::Error {
    let mut js: napi::Error<String> =
        napi::Error::new(err.code().to_string(), err.message_with_causes());
    if let Some(cause) = cause_chain(err) {
        js.set_cause(cause);
    }
    let value = JsError::from(js).into_unknown(*env);
    if let Some(reason_code) = err.reason_code() {
        // SAFETY: the value is the error object just created in this env.
        if let Ok(mut object) = unsafe { Object::from_napi_value(env.raw(), value.raw()) } {
            // Best effort: the error stands without it.
            let _ = object.set_named_property("reasonCode", reason_code);
        }
    }
    napi::Error::from(value)
}

/// The underlying errors as JS errors, each the `cause` of the one before.
fn cause_chain(err: &CoreError) -> Option<napi::Error> {
    let causes: Vec<String> = err.causes().collect();
    causes.into_iter().rev().fold(None, |deeper, text| {
        let mut cause = napi::Error::from_reason(text);
        if let Some(deeper) = deeper {
            cause.set_cause(deeper);
        }
        Some(cause)
    })
}

/// Runs a core future on the addon's runtime; resolves with its value or rejects with a coded
/// error.
pub fn promise<'env, V, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, V>>
where
    V: ToNapiValue + Send + 'static,
    F: Future<Output = crate::error::Result<V>> + Send + 'static,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, result| {
        result.map_err(|e| coded(env, &e))
    })
}

/// A required object argument: as [`object_arg`], and `undefined` or `null` is an
/// `OPTIONS_INVALID` error naming it and saying what was `expected`.
pub fn required_arg<T: FromNapiValue>(
    env: &Env,
    value: Option<Unknown>,
    name: &str,
    expected: &str,
) -> napi::Result<T> {
    object_arg(env, value, name)?.ok_or_else(|| invalid(env, name, expected.into()))
}

/// An optional object argument: `undefined` or `null` is `None`, an object is converted, and
/// anything else (or an object with mistyped fields) is an `OPTIONS_INVALID` error naming it.
pub fn object_arg<T: FromNapiValue>(
    env: &Env,
    value: Option<Unknown>,
    name: &str,
) -> napi::Result<Option<T>> {
    let Some(value) = value else { return Ok(None) };
    match value.get_type()? {
        ValueType::Undefined | ValueType::Null => Ok(None),
        ValueType::Object => {
            // SAFETY: the value belongs to this env and is alive for this call.
            unsafe { T::from_napi_value(env.raw(), value.raw()) }
                .map(Some)
                .map_err(|e| invalid(env, name, e.reason.clone()))
        }
        // `typeof`'s word: boolean, number, string, symbol, function, bigint.
        other => {
            let reason = format!("expected an object, got a {other:?}");
            Err(invalid(env, name, reason.to_lowercase()))
        }
    }
}

/// An `OPTIONS_INVALID` error naming the argument `name`.
fn invalid(env: &Env, name: &str, reason: String) -> napi::Error {
    let option = name.to_string();
    coded(env, &CoreError::OptionsInvalid { option, reason })
}
