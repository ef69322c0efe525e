//! Integers as hex strings on output; integers or strings (`0x…` hex, or decimal) on
//! input. TOML integers are signed 64-bit, so GUIDs and prefixes above 2^63 need this.
//! Used as `#[serde(with = "hex")]`, and `with = "hex::list"` for pkey tables.

use core::fmt;
use core::marker::PhantomData;
use serde::de::{self, Unexpected};
use serde::{Deserializer, Serializer};

pub(super) trait HexInt: Copy + TryFrom<u64> + Into<u64> {
    const DIGITS: usize;
}
impl HexInt for u16 {
    const DIGITS: usize = 4;
}
impl HexInt for u64 {
    const DIGITS: usize = 16;
}

pub(super) fn format<T: HexInt>(v: T) -> String {
    format!("{:#0w$x}", v.into(), w = T::DIGITS + 2)
}

pub(super) fn serialize<T: HexInt, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*v))
}

pub(super) fn deserialize<'de, T: HexInt, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(HexVisitor(PhantomData))
}

pub(super) struct HexVisitor<T>(pub(super) PhantomData<T>);

impl<T: HexInt> HexVisitor<T> {
    fn narrow<E: de::Error>(&self, v: u64, shown: Unexpected<'_>) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(shown, self))
    }
}

impl<T: HexInt> de::Visitor<'_> for HexVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an integer of at most {} hex digits, or a string such as \"0x{}\"",
            T::DIGITS,
            "f".repeat(T::DIGITS)
        )
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.narrow(v, Unexpected::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        let u = u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))?;
        self.narrow(u, Unexpected::Signed(v))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
        let t = s.trim().replace('_', "");
        let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16),
            None => t.parse::<u64>(),
        };
        let v = parsed.map_err(|_| E::invalid_value(Unexpected::Str(s), &self))?;
        self.narrow(v, Unexpected::Str(s))
    }
}

/// A list of pkeys, each as the parent module reads and writes them.
pub(super) mod list {
    use super::HexVisitor;
    use crate::spec::hex;
    use core::fmt;
    use core::marker::PhantomData;
    use serde::de::{self, DeserializeSeed, SeqAccess};
    use serde::{Deserializer, Serializer};

    pub(in crate::spec) fn serialize<S: Serializer>(v: &[u16], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|&k| hex::format(k)))
    }

    pub(in crate::spec) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<u16>, D::Error> {
        d.deserialize_seq(ListVisitor)
    }

    struct ListVisitor;
    struct One;

    impl<'de> DeserializeSeed<'de> for One {
        type Value = u16;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u16, D::Error> {
            d.deserialize_any(HexVisitor(PhantomData))
        }
    }

    impl<'de> de::Visitor<'de> for ListVisitor {
        type Value = Vec<u16>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of pkeys such as [\"0xffff\", \"0x8001\"]")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u16>, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = seq.next_element_seed(One)? {
                out.push(k);
            }
            Ok(out)
        }
    }
}
