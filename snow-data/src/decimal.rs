//! Exact decimals: an unscaled integer and a scale, as Java's `BigDecimal` and Connect's
//! `Decimal` hold them (up to 38 digits here). Text in and out is plain digits with an optional
//! sign and point (`-1234.50`), never an exponent and never through a float; bytes are the
//! unscaled value in big-endian two's complement, as short as Java's `BigInteger.toByteArray`.

use std::fmt;

use crate::error::DataError;

/// Largest number of digits held.
pub const MAX_PRECISION: u32 = 38;

/// `unscaled × 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    /// The digits as an integer.
    pub unscaled: i128,
    /// Digits after the point.
    pub scale: i32,
}

impl Decimal {
    /// Parses `text` at exactly `scale` digits after the point: fewer are padded with zeros, more
    /// are refused unless they are zeros (nothing is ever rounded).
    pub fn parse(text: &str, scale: i32) -> Result<Self, DataError> {
        let bad = |why: &str| DataError::new(format!("{text:?} is not a decimal of scale {scale}: {why}"));
        check_scale(scale)?;
        let t = text.trim();
        let (negative, digits) = match t.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, t.strip_prefix('+').unwrap_or(t)),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && fraction.is_empty() || !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit()) {
            return Err(bad("only digits, one point and a sign are allowed"));
        }
        let keep = usize::try_from(scale.max(0)).unwrap_or(0);
        let (kept, dropped) = fraction.split_at(fraction.len().min(keep));
        if dropped.bytes().any(|b| b != b'0') {
            return Err(bad("more digits after the point than the scale holds"));
        }
        let mut unscaled: i128 = 0;
        let pad = keep - kept.len();
        for b in whole.bytes().chain(kept.bytes()).chain(std::iter::repeat_n(b'0', pad)) {
            unscaled = unscaled.checked_mul(10).and_then(|n| n.checked_add(i128::from(b - b'0'))).ok_or_else(|| bad("too many digits"))?;
        }
        let d = Self { unscaled: if negative { -unscaled } else { unscaled }, scale };
        if d.precision() > MAX_PRECISION {
            return Err(bad("more than 38 digits"));
        }
        Ok(d)
    }

    /// How many digits the unscaled value has (at least 1).
    pub fn precision(&self) -> u32 {
        self.unscaled.unsigned_abs().checked_ilog10().map_or(1, |l| l + 1)
    }

    /// The unscaled value as Java's `BigInteger.toByteArray` writes it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let all = self.unscaled.to_be_bytes();
        let mut start = 0;
        // Drop leading bytes that only repeat the sign of the byte after them.
        while start < all.len() - 1 {
            let (b, next) = (all[start], all[start + 1]);
            if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
                start += 1;
            } else {
                break;
            }
        }
        all[start..].to_vec()
    }

    /// The decimal whose unscaled value is `bytes` (big-endian two's complement) at `scale`.
    pub fn from_bytes(bytes: &[u8], scale: i32) -> Result<Self, DataError> {
        check_scale(scale)?;
        if bytes.is_empty() || bytes.len() > 16 {
            return Err(DataError::new(format!("a decimal's unscaled value must be 1 to 16 bytes, got {}", bytes.len())));
        }
        let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0x00 };
        let mut all = [fill; 16];
        all[16 - bytes.len()..].copy_from_slice(bytes);
        Ok(Self { unscaled: i128::from_be_bytes(all), scale })
    }

    /// The same value at another scale, if that loses no digit.
    pub fn rescale(&self, scale: i32) -> Result<Self, DataError> {
        let lost = || DataError::new(format!("{self} does not fit scale {scale} without rounding"));
        let diff = scale.checked_sub(self.scale).ok_or_else(lost)?;
        let factor = 10i128.checked_pow(diff.unsigned_abs()).ok_or_else(lost)?;
        let unscaled = if diff >= 0 {
            self.unscaled.checked_mul(factor).ok_or_else(lost)?
        } else if self.unscaled % factor == 0 {
            self.unscaled / factor
        } else {
            return Err(lost());
        };
        Ok(Self { unscaled, scale })
    }

    /// The nearest float (for Connect's `Cast` to a float type).
    pub fn to_f64(&self) -> f64 {
        self.to_string().parse().unwrap_or(f64::NAN)
    }
}

/// Largest scale (either sign) a decimal may have: far past the 38 digits one holds, and small
/// enough that writing it out is cheap (a scale read from a record is untrusted).
pub const MAX_SCALE: i32 = 128;

/// Refuses a scale past [`MAX_SCALE`].
pub fn check_scale(scale: i32) -> Result<(), DataError> {
    if scale.unsigned_abs() > MAX_SCALE.unsigned_abs() {
        return Err(DataError::new(format!("a decimal's scale must be between -{MAX_SCALE} and {MAX_SCALE}, got {scale}")));
    }
    Ok(())
}

impl fmt::Display for Decimal {
    /// Plain digits: `-1234.50`, `0.05`, `12` (scale 0), `1200` (scale -2).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.unscaled.unsigned_abs().to_string();
        let sign = if self.unscaled < 0 { "-" } else { "" };
        if self.scale <= 0 {
            let zeros = "0".repeat(usize::try_from(self.scale.unsigned_abs()).unwrap_or(0));
            return if self.unscaled == 0 { write!(f, "0") } else { write!(f, "{sign}{digits}{zeros}") };
        }
        let scale = usize::try_from(self.scale).unwrap_or(0);
        let padded = if digits.len() <= scale { format!("{}{digits}", "0".repeat(scale + 1 - digits.len())) } else { digits };
        let (whole, fraction) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{whole}.{fraction}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_exactly() {
        for (text, scale, shown) in
            [("1234.5", 2, "1234.50"), ("-0.05", 2, "-0.05"), ("7", 0, "7"), ("0", 3, "0.000"), ("12.300", 1, "12.3"), ("+3.1", 1, "3.1")]
        {
            assert_eq!(Decimal::parse(text, scale).expect(text).to_string(), shown);
        }
        let big = "12345678901234567890123456789012345.678";
        assert_eq!(Decimal::parse(big, 3).expect("38 digits").to_string(), big);
    }

    #[test]
    fn nothing_is_rounded_or_guessed() {
        for (text, why) in [("1.234", "more digits after"), ("1e5", "only digits"), ("", "only digits"), ("1.2.3", "only digits")] {
            let e = Decimal::parse(text, 2).expect_err(text).to_string();
            assert!(e.contains(why) && e.contains(&format!("{text:?}")), "{e}");
        }
        assert!(Decimal::parse("123456789012345678901234567890123456789", 0).is_err(), "39 digits");
    }

    #[test]
    fn bytes_are_javas_big_integer_bytes() {
        for (unscaled, bytes) in
            [(0i128, vec![0u8]), (127, vec![0x7f]), (128, vec![0x00, 0x80]), (-1, vec![0xff]), (-129, vec![0xff, 0x7f])]
        {
            let d = Decimal { unscaled, scale: 2 };
            assert_eq!(d.to_bytes(), bytes, "{unscaled}");
            assert_eq!(Decimal::from_bytes(&bytes, 2).expect("bytes"), d);
        }
    }

    #[test]
    fn rescaling_never_loses_a_digit() {
        let d = Decimal::parse("1.50", 2).expect("d");
        assert_eq!(d.rescale(4).expect("up").to_string(), "1.5000");
        assert_eq!(d.rescale(1).expect("down").to_string(), "1.5");
        assert!(d.rescale(0).is_err());
    }
}
