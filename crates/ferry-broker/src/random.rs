//! Randomness enters the broker only through [`RandomSource`], so retry jitter and generated
//! message ids are reproducible in tests from a seed instead of depending on a global RNG.
//!
//! One trait serves both users (backoff jitter and the 80 random bits of a ULID): they need
//! the same thing, uniformly distributed bits, and a second trait would only add plumbing.
//!
//! The production source is [`fastrand::Rng`]: it is already in the workspace's dependency
//! tree, has no dependencies of its own, and is fast. It is not cryptographically secure,
//! which neither jitter nor message ids need — a message id is an identifier, not a secret.
//! Anything that must be unguessable (a lease token handed to consumers, for instance) should
//! not be drawn from here.

/// A stream of uniformly distributed random bits.
pub trait RandomSource {
    /// The next 64 uniformly distributed bits.
    fn next_u64(&mut self) -> u64;

    /// A uniformly distributed value in `[0, 1)`.
    ///
    /// Built from the top 53 bits, the precision of an `f64` mantissa, so every value is
    /// exactly representable and 1.0 is never returned.
    fn next_unit(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        (self.next_u64() >> 11) as f64 * SCALE
    }
}

impl RandomSource for fastrand::Rng {
    fn next_u64(&mut self) -> u64 {
        self.u64(..)
    }
}

impl<R: RandomSource + ?Sized> RandomSource for &mut R {
    fn next_u64(&mut self) -> u64 {
        (**self).next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Constant(u64);
    impl RandomSource for Constant {
        fn next_u64(&mut self) -> u64 {
            self.0
        }
    }

    #[test]
    fn unit_values_stay_below_one_even_for_all_ones() {
        assert_eq!(Constant(0).next_unit(), 0.0);
        let top = Constant(u64::MAX).next_unit();
        assert!(top < 1.0 && top > 0.999_999_999, "{top}");
    }

    #[test]
    fn seeded_fastrand_is_reproducible() {
        let mut a = fastrand::Rng::with_seed(7);
        let mut b = fastrand::Rng::with_seed(7);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
    }
}
