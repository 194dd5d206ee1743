//! What a setting's type tells the generated flags and docs
//! ([`SettingValue`]), and [`Listen`], an address that can be `off`.

use super::ByteSize;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::net::SocketAddr;
use std::path::PathBuf;

/// A type a setting may have.
pub trait SettingValue {
    /// The placeholder of its flag's value (`--listen ADDR`).
    const VALUE_NAME: &'static str;
    /// Its value as an integer, for the declared ranges (`None`: not one,
    /// or unset).
    fn as_i64(&self) -> Option<i64> {
        None
    }
}

macro_rules! value_names {
    ($($t:ty => $name:literal),* $(,)?) => { $(impl SettingValue for $t { const VALUE_NAME: &'static str = $name; })* };
}
value_names!(
    bool => "BOOL",
    String => "TEXT",
    PathBuf => "PATH",
    SocketAddr => "ADDR",
    ByteSize => "SIZE",
    Listen => "ADDR|off",
    crate::mqtt::MqttConfig => "TABLE",
    crate::frontend::tls::TlsFiles => "TABLE",
);

macro_rules! integers {
    ($($t:ty),*) => { $(impl SettingValue for $t {
        const VALUE_NAME: &'static str = "N";
        fn as_i64(&self) -> Option<i64> { i64::try_from(*self).ok().or(Some(i64::MAX)) }
    })* };
}
integers!(i32, u32, u64, usize);

impl<T: SettingValue> SettingValue for Option<T> {
    const VALUE_NAME: &'static str = T::VALUE_NAME;
    fn as_i64(&self) -> Option<i64> {
        self.as_ref().and_then(T::as_i64)
    }
}

/// Where a listener listens, or `off` (no listener).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listen {
    /// Listen on this address.
    On(SocketAddr),
    /// No listener.
    Off,
}

impl Listen {
    /// The address, `None` when off.
    pub fn addr(self) -> Option<SocketAddr> {
        match self {
            Listen::On(a) => Some(a),
            Listen::Off => None,
        }
    }

    /// `off`, `none` or an address.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "off" | "none" => Ok(Listen::Off),
            a => a
                .parse()
                .map(Listen::On)
                .map_err(|_| format!("{a:?}: an address (127.0.0.1:7072) or off")),
        }
    }
}

impl Serialize for Listen {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Listen::On(a) => s.collect_str(a),
            Listen::Off => s.serialize_str("off"),
        }
    }
}

impl<'de> Deserialize<'de> for Listen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Listen::parse(&text).map_err(serde::de::Error::custom)
    }
}
