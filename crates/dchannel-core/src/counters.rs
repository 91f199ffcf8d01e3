//! One table per family of counters: [`counter_table!`] turns rows of
//! `/// help` and `Variant,` into the enum, the list of every counter
//! (`ALL`, `COUNT`, in table order), each one's stable name (the variant in
//! snake case: the stats JSON key and the Prometheus `reason` label) and its
//! help text. Nothing else
//! spells a counter's name, so adding a reason is adding one row.

/// Declares a counter enum from one table of rows `/// help` `Variant,`;
/// a counter's name is its variant in snake case (`BadToken`: `bad_token`).
///
/// The enum derives `Clone, Copy, Debug, PartialEq, Eq, Hash`; its variants
/// are numbered in table order (`v as usize` indexes a `[_; COUNT]` array of
/// counts) and documented by their help text. `Display` prints the name.
///
/// ```
/// dchannel_core::counter_table! {
///     /// Why a fruit was thrown away.
///     pub enum Spoiled {
///         /// Dropped on the floor
///         Bruised,
///         /// Kept too long
///         MouldyCore,
///     }
/// }
/// assert_eq!(Spoiled::COUNT, 2);
/// assert_eq!(Spoiled::ALL[1].name(), "mouldy_core");
/// assert_eq!(Spoiled::Bruised.help(), "Dropped on the floor");
/// assert_eq!(Spoiled::MouldyCore.to_string(), "mouldy_core");
/// ```
#[macro_export]
macro_rules! counter_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident {
            $($(#[doc = $help:literal])+ $variant:ident,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $enum {
            $($(#[doc = $help])+ $variant,)+
        }

        impl $enum {
            /// How many counters the table has.
            pub const COUNT: usize = [$(stringify!($variant)),+].len();

            /// Every counter, in table order (`ALL[v as usize] == v`).
            pub const ALL: [$enum; $enum::COUNT] = [$($enum::$variant),+];

            /// Stable counter name (stats JSON key, Prometheus label value):
            /// the variant's name in snake case.
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => {
                        const CAMEL: &str = stringify!($variant);
                        const LEN: usize = $crate::counters::snake_len(CAMEL);
                        const BYTES: [u8; LEN] = $crate::counters::snake_bytes::<LEN>(CAMEL);
                        const NAME: &str = match ::core::str::from_utf8(&BYTES) {
                            Ok(name) => name,
                            Err(_) => panic!("variant names are ASCII"),
                        };
                        NAME
                    })+
                }
            }

            /// What the counter counts: its doc comment, on one line.
            pub fn help(self) -> &'static str {
                match self {
                    $($enum::$variant => concat!($($help),+).trim_start(),)+
                }
            }
        }

        impl ::core::fmt::Display for $enum {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// Bytes of `camel` in snake case (for [`counter_table!`]).
#[doc(hidden)]
pub const fn snake_len(camel: &str) -> usize {
    let b = camel.as_bytes();
    let (mut n, mut i) = (b.len(), 1);
    while i < b.len() {
        if b[i].is_ascii_uppercase() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// `camel` (ASCII) in snake case: `TunWriteError` gives `tun_write_error`.
#[doc(hidden)]
pub const fn snake_bytes<const N: usize>(camel: &str) -> [u8; N] {
    let b = camel.as_bytes();
    let mut out = [0u8; N];
    let (mut i, mut j) = (0, 0);
    while i < b.len() {
        if b[i].is_ascii_uppercase() && i > 0 {
            out[j] = b'_';
            j += 1;
        }
        out[j] = b[i].to_ascii_lowercase();
        i += 1;
        j += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    counter_table! {
        /// A table of three.
        enum Three {
            /// first
            A,
            /// second,
            /// on two lines
            BeeTwo,
            /// third
            C,
        }
    }

    #[test]
    fn all_is_in_table_order_and_indexes_itself() {
        assert_eq!(Three::COUNT, 3);
        for (i, v) in Three::ALL.iter().enumerate() {
            assert_eq!(*v as usize, i);
        }
        let names: Vec<_> = Three::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names, ["a", "bee_two", "c"]);
        assert_eq!(Three::C.help(), "third");
        assert_eq!(Three::BeeTwo.help(), "second, on two lines");
        assert_eq!(format!("{}", Three::BeeTwo), "bee_two");
    }
}
