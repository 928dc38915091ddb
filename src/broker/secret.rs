//! Keys and tokens in a type that never prints them.

use std::fmt;

use subtle::{Choice, ConstantTimeEq};
use zeroize::Zeroizing;

/// A secret string: `Debug` shows `Secret(***)`, there is no `Display`, equality takes the same
/// time wherever two secrets differ, and the bytes are wiped on drop.
#[derive(Clone)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(Zeroizing::new(value.into()))
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl ConstantTimeEq for Secret {
    fn ct_eq(&self, other: &Secret) -> Choice {
        self.0.as_bytes().ct_eq(other.0.as_bytes())
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        self.ct_eq(other).into()
    }
}

impl Eq for Secret {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("sk-real-key");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(format!("{:?}", Some(&s)), "Some(Secret(***))");
        assert_eq!(s.expose(), "sk-real-key");
    }

    #[test]
    fn equality_compares_in_constant_time() {
        let abc = Secret::new("abc");
        assert!(bool::from(abc.ct_eq(&Secret::new("abc"))));
        assert!(!bool::from(abc.ct_eq(&Secret::new("abd"))));
        assert!(!bool::from(abc.ct_eq(&Secret::new("ab"))));
        assert_eq!(abc, Secret::new("abc"));
        assert_ne!(abc, Secret::new("abd"));
    }
}
