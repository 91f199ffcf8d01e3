//! One table per family of counters: [`counter_table!`] turns rows of
//! `Variant = "name": "help"` into the enum, the list of every counter
//! (`ALL`, `COUNT`, in table order), each one's stable name (the stats JSON
//! key and the Prometheus `reason` label) and its help text. Nothing else
//! spells a counter's name, so adding a reason is adding one row.

/// Declares a counter enum from one table of rows `Variant = "name": "help"`.
///
/// The enum derives `Clone, Copy, Debug, PartialEq, Eq, Hash`; its variants
/// are numbered in table order (`v as usize` indexes a `[_; COUNT]` array of
/// counts) and documented by their help text. `Display` prints the name.
///
/// ```
/// dchannel_core::counter_table! {
///     /// Why a fruit was thrown away.
///     pub enum Spoiled {
///         Bruised = "bruised": "Dropped on the floor",
///         Mouldy = "mouldy": "Kept too long",
///     }
/// }
/// assert_eq!(Spoiled::COUNT, 2);
/// assert_eq!(Spoiled::ALL[1].name(), "mouldy");
/// assert_eq!(Spoiled::Bruised.help(), "Dropped on the floor");
/// assert_eq!(Spoiled::Mouldy.to_string(), "mouldy");
/// ```
#[macro_export]
macro_rules! counter_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $enum:ident {
            $($variant:ident = $name:literal : $help:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $enum {
            $(#[doc = $help] $variant,)+
        }

        impl $enum {
            /// How many counters the table has.
            pub const COUNT: usize = [$(stringify!($variant)),+].len();

            /// Every counter, in table order (`ALL[v as usize] == v`).
            pub const ALL: [$enum; $enum::COUNT] = [$($enum::$variant),+];

            /// Stable counter name (stats JSON key, Prometheus label value).
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)+
                }
            }

            /// One line saying what the counter counts.
            pub const fn help(self) -> &'static str {
                match self {
                    $($enum::$variant => $help,)+
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

#[cfg(test)]
mod tests {
    counter_table! {
        /// A table of three.
        enum Three {
            A = "a": "first",
            B = "b": "second",
            C = "c": "third",
        }
    }

    #[test]
    fn all_is_in_table_order_and_indexes_itself() {
        assert_eq!(Three::COUNT, 3);
        for (i, v) in Three::ALL.iter().enumerate() {
            assert_eq!(*v as usize, i);
        }
        let names: Vec<_> = Three::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(Three::C.help(), "third");
        assert_eq!(format!("{}", Three::B), "b");
    }
}
