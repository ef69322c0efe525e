//! Macros that state once a shape the wire formats share.
//!
//! - Code points, open enums (`open_enum!`) and flag sets (`flag_set!`): transparent
//!   newtypes over the wire integer, so every value parses and emits unchanged (an
//!   unknown opcode or status is data for the engine to judge, not a parse failure).
//!   Known values are associated constants with the reference's name.
//! - Views: their constructors (`view_constructors!`), one line per field for its getter
//!   and setter (`view_fields!`, and `view_bits!` for fields packed in a word), and the
//!   accessors every MAD header has (`mad_common_fields!`).
//! - Owned forms: `to_vec`/`to_bytes` over `emit` (`emit_to_vec!`, `emit_to_array!`), and
//!   the fixed-size byte strings `Gid` and `Bytes64` (`wire_bytes!`).

/// What open enums and flag sets have in common: the declaration they are written as, the
/// transparent newtype over the wire integer with its named constants, built from the
/// integer with `From`, read and written by views as that integer
/// ([`WireValue`](crate::wire_value::WireValue)), and with the `serde` feature serialised
/// as its `Display` text. `$kind` (`open_enum_items` or `flag_set_items`) adds the rest.
macro_rules! code_point {
    (
        $kind:ident;
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($ty:ty) {
            $( $(#[$cmeta:meta])* $cname:ident = $val:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        #[repr(transparent)]
        $vis struct $name(pub $ty);

        impl From<$ty> for $name {
            fn from(v: $ty) -> Self {
                Self(v)
            }
        }

        impl $crate::wire_value::WireValue for $name {
            #[inline]
            fn read<E: byteorder::ByteOrder>(b: &[u8]) -> Self {
                Self(<$ty as $crate::wire_value::WireValue>::read::<E>(b))
            }
            #[inline]
            fn write<E: byteorder::ByteOrder>(self, b: &mut [u8]) {
                <$ty as $crate::wire_value::WireValue>::write::<E>(self.0, b);
            }
        }

        #[cfg(feature = "serde")]
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl $name {
            $( $(#[$cmeta])* pub const $cname: Self = Self($val); )*
        }

        $kind!($name, $ty, $($cname = $val),*);
    };
}

/// An open enum: `pub struct Name(pub u8)` with named constants.
///
/// `Debug` prints `NAME` for known values and `Name(0x..)` otherwise; `Display` prints the
/// name or the hex value. With the `serde` feature it serialises as its `Display` text.
macro_rules! open_enum {
    ($($declaration:tt)*) => {
        code_point! { open_enum_items; $($declaration)* }
    };
}

/// What `open_enum!` adds to `code_point!`: the known values, their names, `Debug` and `Display`.
macro_rules! open_enum_items {
    ($name:ident, $ty:ty, $($cname:ident = $val:expr),*) => {
        impl $name {

            /// Every named value, in declaration order.
            pub const KNOWN: &'static [Self] = &[$(Self::$cname),*];

            /// The reference's name for this value, if it is a known one.
            #[must_use]
            pub const fn name(self) -> Option<&'static str> {
                $( if self.0 == $val { return Some(stringify!($cname)); } )*
                None
            }

            /// Whether this value is one of the named ones.
            #[must_use]
            pub const fn is_known(self) -> bool {
                self.name().is_some()
            }
        }

        impl From<$name> for $ty {
            fn from(v: $name) -> Self {
                v.0
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({:#x})", stringify!($name), self.0),
                }
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{:#x}", self.0),
                }
            }
        }
    };
}

/// A set of flag bits: `pub struct Name(pub u32)` with named single-bit (or multi-bit)
/// constants, `contains`, `|`, and a `Debug` that lists the names plus any leftover bits.
macro_rules! flag_set {
    ($($declaration:tt)*) => {
        code_point! { flag_set_items; $($declaration)* }
    };
}

/// What `flag_set!` adds to `code_point!`: set operations, `Debug` and `Display`.
macro_rules! flag_set_items {
    ($name:ident, $ty:ty, $($cname:ident = $val:expr),*) => {
        impl $name {

            /// No bits set.
            pub const EMPTY: Self = Self(0);

            /// Every named flag, in declaration order.
            pub const KNOWN: &'static [(&'static str, Self)] = &[$((stringify!($cname), Self::$cname)),*];

            /// Whether every bit of `other` is set in `self`.
            #[must_use]
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether any bit of `other` is set in `self`.
            #[must_use]
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }

            /// `self` with the bits of `other` added.
            #[must_use]
            pub const fn with(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }

            /// `self` with the bits of `other` cleared.
            #[must_use]
            pub const fn without(self, other: Self) -> Self {
                Self(self.0 & !other.0)
            }

            /// The raw bits.
            #[must_use]
            pub const fn bits(self) -> $ty {
                self.0
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, rhs: Self) -> Self {
                Self(self.0 | rhs.0)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: Self) {
                self.0 |= rhs.0;
            }
        }

        impl core::fmt::Display for $name {
            /// Names of the set flags joined by `|`, then any unnamed bits in hex; `0` when empty.
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let mut rest = self.0;
                let mut first = true;
                for (n, v) in Self::KNOWN {
                    if v.0 != 0 && rest & v.0 == v.0 {
                        if !first {
                            f.write_str("|")?;
                        }
                        f.write_str(n)?;
                        rest &= !v.0;
                        first = false;
                    }
                }
                if rest != 0 || first {
                    if !first {
                        f.write_str("|")?;
                    }
                    write!(f, "{:#x}", rest)?;
                }
                Ok(())
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}({:#x}: {})", stringify!($name), self.0, self)
            }
        }
    };
}

/// The constructors every view shares (smoltcp's contract): `new_unchecked`,
/// `new_checked`, `into_inner`, and — given a format name and a
/// [`Layout`](crate::error::Layout) — `check_len`. With `own check_len` the view defines
/// `check_len` itself. Used inside `impl<T: AsRef<[u8]>> XxxPacket<T>`.
macro_rules! view_constructors {
    ($format:expr, $layout:expr) => {
        view_constructors!(own check_len);

        /// Checks that the buffer holds every field of the layout; the error names the
        /// first field that is cut short.
        pub fn check_len(&self) -> $crate::error::Result<()> {
            $crate::error::check_layout($format, $layout, self.buffer.as_ref().len())
        }
    };
    // For a view whose `check_len` is not a fixed layout (it defines its own).
    (own check_len) => {
        /// Wraps a buffer without checking its length.
        pub const fn new_unchecked(buffer: T) -> Self {
            Self { buffer }
        }

        /// Wraps a buffer, checking it with `check_len`, so no accessor can panic.
        pub fn new_checked(buffer: T) -> $crate::error::Result<Self> {
            let p = Self::new_unchecked(buffer);
            p.check_len()?;
            Ok(p)
        }

        /// The wrapped buffer.
        pub fn into_inner(self) -> T {
            self.buffer
        }
    };
}

/// The getter/setter pairs of a view's plain fields, one line a field:
///
/// ```text
/// view_fields! {
///     impl MadHeaderPacket, BigEndian {
///         /// Method.
///         method, set_method: Method = field::METHOD;
///     }
/// }
/// ```
///
/// generates `pub fn method(&self) -> Method` (for `T: AsRef<[u8]>`) and
/// `pub fn set_method(&mut self, v: Method)` (for `T: AsMut<[u8]>` too), which read and
/// write the field's bytes (`field::METHOD`, a `usize` offset or a range) as a
/// [`WireValue`](crate::wire_value::WireValue) in the format's byte order. The getter
/// carries the field's doc; the setter points at the getter and repeats it. Both index
/// the buffer, so they panic on a buffer too short for the field, like every accessor
/// before `check_len`.
macro_rules! view_fields {
    (
        impl $view:ident, $order:ty {
            $(
                $(#[doc = $doc:literal])*
                $get:ident, $set:ident: $ty:ty = $at:expr;
            )*
        }
    ) => {
        impl<T: AsRef<[u8]>> $view<T> {
            $(
                $(#[doc = $doc])*
                pub fn $get(&self) -> $ty {
                    let at = $crate::wire_value::FieldPos::bytes($at);
                    <$ty as $crate::wire_value::WireValue>::read::<$order>(&self.buffer.as_ref()[at])
                }
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            $(
                #[doc = concat!("Sets the field [`", stringify!($get), "`](Self::", stringify!($get), ") reads:")]
                #[doc = ""]
                $(#[doc = $doc])*
                pub fn $set(&mut self, v: $ty) {
                    let at = $crate::wire_value::FieldPos::bytes($at);
                    <$ty as $crate::wire_value::WireValue>::write::<$order>(v, &mut self.buffer.as_mut()[at]);
                }
            )*
        }
    };
}

/// The getter/setter pairs of bit fields packed into one plain field (the word) of a
/// view, one line a bit field:
///
/// ```text
/// view_bits! {
///     impl GrhPacket, BigEndian, field::VERSION_TCLASS_FLOW => u32 {
///         /// Traffic class (bits 27:20).
///         tclass, set_tclass: u8 = 20, 8;
///     }
/// }
/// ```
///
/// generates `pub fn tclass(&self) -> u8`, the 8 bits of the word from bit 20 up, and
/// `pub fn set_tclass(&mut self, v: u8)`, which writes the low 8 bits of `v` there and
/// keeps the word's other bits. The word (a `u8`, `u16` or `u32` at a `usize` offset or
/// a range) is read and written as a [`WireValue`](crate::wire_value::WireValue) in the
/// format's byte order, the bit field's value converted through
/// [`WireBits`](crate::wire_value::WireBits). Both panic on a buffer too short for the
/// word, like every accessor before `check_len`.
macro_rules! view_bits {
    (
        impl $view:ident, $order:ty, $at:expr => $word:ty {
            $(
                $(#[doc = $doc:literal])*
                $get:ident, $set:ident: $ty:ty = $shift:literal, $width:literal;
            )*
        }
    ) => {
        impl<T: AsRef<[u8]>> $view<T> {
            $(
                $(#[doc = $doc])*
                pub fn $get(&self) -> $ty {
                    use $crate::wire_value::{FieldPos, WireBits, WireValue};
                    let word = <$word as WireValue>::read::<$order>(&self.buffer.as_ref()[$at.bytes()]);
                    <$ty as WireBits>::from_bits($crate::wire_value::get_bits(word.to_bits(), $shift, $width))
                }
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            $(
                #[doc = concat!("Sets the bits [`", stringify!($get), "`](Self::", stringify!($get), ") reads (the low ", stringify!($width), " bits of `v`):")]
                #[doc = ""]
                $(#[doc = $doc])*
                pub fn $set(&mut self, v: $ty) {
                    use $crate::wire_value::{FieldPos, WireBits, WireValue};
                    let b = &mut self.buffer.as_mut()[$at.bytes()];
                    let word = <$word as WireValue>::read::<$order>(b).to_bits();
                    let word = $crate::wire_value::set_bits(word, $shift, $width, v.to_bits());
                    <$word as WireValue>::write::<$order>(<$word as WireBits>::from_bits(word), b);
                }
            )*
        }
    };
}

/// The accessors of the fields that every MAD begins with and that every class reads the
/// same way (the versions, the class, the method and the transaction id), for the views of
/// the common MAD header and of the ACM MAD. The status and the class-specific word
/// between them have a type per class, so each view declares those itself.
macro_rules! mad_common_fields {
    ($view:ident) => {
        view_fields! {
            impl $view, byteorder::BigEndian {
                /// Base version (1).
                base_version, set_base_version: u8 = $crate::mad::field::BASE_VERSION;
                /// Management class.
                mgmt_class, set_mgmt_class: $crate::mad::MgmtClass = $crate::mad::field::MGMT_CLASS;
                /// Class version.
                class_version, set_class_version: u8 = $crate::mad::field::CLASS_VERSION;
                /// Method; bit 7 marks a response.
                method, set_method: $crate::mad::Method = $crate::mad::field::METHOD;
                /// Transaction id.
                tid, set_tid: u64 = $crate::mad::field::TID;
            }
        }
    };
}

/// `to_vec` for a message Repr whose `emit(&self, &mut [u8]) -> usize` writes exactly
/// `buffer_len()` bytes. Used inside the Repr's `impl`; `$what` names the message in the
/// doc ("request", "reply").
macro_rules! emit_to_vec {
    ($what:literal) => {
        #[doc = concat!("The ", $what, " as a freshly allocated byte vector.")]
        #[must_use]
        pub fn to_vec(&self) -> alloc::vec::Vec<u8> {
            let mut v = alloc::vec![0; self.buffer_len()];
            self.emit(&mut v);
            v
        }
    };
}

/// `buffer_len` and `to_bytes` for a Repr of fixed length `$len` whose
/// `emit(&self, &mut [u8])` writes exactly `$len` bytes. Used inside the Repr's `impl`;
/// `$what` names the value in the doc ("record", "header").
macro_rules! emit_to_array {
    ($what:literal, $len:ident) => {
        #[doc = concat!("Bytes `emit` writes: [`", stringify!($len), "`].")]
        pub const fn buffer_len(&self) -> usize {
            $len
        }

        #[doc = concat!("The ", $what, " as its [`", stringify!($len), "`] wire bytes.")]
        #[must_use]
        pub fn to_bytes(&self) -> [u8; $len] {
            let mut b = [0; $len];
            self.emit(&mut b);
            b
        }
    };
}

/// A field of raw wire bytes, `pub struct Name(pub [u8; N])`: compared, ordered and hashed
/// bytewise, read in place through zerocopy, all zero by default (`ZERO`), and read from
/// the start of a longer buffer with `read`.
macro_rules! wire_bytes {
    ($(#[$meta:meta])* $vis:vis struct $name:ident([u8; $len:expr]);) => {
        $(#[$meta])*
        #[derive(
            Clone,
            Copy,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            zerocopy::FromBytes,
            zerocopy::IntoBytes,
            zerocopy::Immutable,
            zerocopy::KnownLayout,
            zerocopy::Unaligned,
        )]
        #[repr(transparent)]
        $vis struct $name(pub [u8; $len]);

        impl Default for $name {
            fn default() -> Self {
                Self::ZERO
            }
        }

        impl $name {
            /// All zero.
            pub const ZERO: Self = Self([0; $len]);

            /// The value in the first bytes of `bytes`, or `None` if there are fewer.
            #[must_use]
            #[inline]
            pub fn read(bytes: &[u8]) -> Option<Self> {
                <Self as zerocopy::FromBytes>::read_from_prefix(bytes)
                    .ok()
                    .map(|(v, _)| v)
            }
        }
    };
}
