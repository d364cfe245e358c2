//! The server's clock against the histories' `CLOCK_MONOTONIC`: the broker stamps a dead
//! letter's last failure with its own clock (wall time plus the test clock's offset, which
//! each clock jump moves forward), while every history event carries monotonic time. The
//! harness knows each jump, so it can place a broker time on the monotonic line and the
//! checker can tell which faults came before a dead letter's last failure.

/// The offsets the server's clock ran with, from the monotonic time each began.
#[derive(Debug, Clone)]
pub struct BrokerClock {
    /// (monotonic ns the offset took effect, offset ms), in order; the first from time 0.
    offsets: Vec<(u64, i64)>,
}

impl BrokerClock {
    /// A clock whose offset is `offset_ms` from the start.
    pub fn new(offset_ms: i64) -> BrokerClock {
        BrokerClock {
            offsets: vec![(0, offset_ms)],
        }
    }

    /// The server's offset became `offset_ms` at monotonic time `at_ns`.
    pub fn jumped(&mut self, at_ns: u64, offset_ms: i64) {
        self.offsets.push((at_ns, offset_ms));
    }

    /// The monotonic time at which the server's clock read `broker_ms`, given that the wall
    /// clock reads `wall_now_ms` at monotonic `mono_now_ns`. A time the server's clock
    /// skipped (inside a jump) is placed at the jump.
    pub fn to_monotonic(&self, broker_ms: i64, wall_now_ms: i64, mono_now_ns: u64) -> u64 {
        let mut later_start: Option<u64> = None;
        for &(start, offset) in self.offsets.iter().rev() {
            let wall_ms = broker_ms - offset;
            let before_now_ns = (i128::from(wall_now_ms) - i128::from(wall_ms)) * 1_000_000;
            let mono = (i128::from(mono_now_ns) - before_now_ns).max(0) as u64;
            if mono >= start {
                return later_start.map_or(mono, |next| mono.min(next));
            }
            later_start = Some(start);
        }
        0
    }
}

/// Milliseconds of the wall clock, as the server's clock reads it without an offset.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn without_jumps_a_broker_time_is_the_wall_time_placed_before_now() {
        let clock = BrokerClock::new(0);
        // Now is wall 10_000 ms at monotonic 50_000 ms: wall 9_000 was monotonic 49_000.
        assert_eq!(clock.to_monotonic(9_000, 10_000, 50_000 * MS), 49_000 * MS);
    }

    #[test]
    fn a_jump_moves_later_broker_times_and_a_skipped_time_lands_on_the_jump() {
        let mut clock = BrokerClock::new(0);
        // At monotonic 45_000 ms (wall 5_000) the server's clock jumped 1_000 ms forward.
        clock.jumped(45_000 * MS, 1_000);
        let (wall_now, mono_now) = (10_000, 50_000 * MS);
        // Before the jump: broker time is wall time.
        assert_eq!(clock.to_monotonic(4_000, wall_now, mono_now), 44_000 * MS);
        // After it: broker 8_000 is wall 7_000.
        assert_eq!(clock.to_monotonic(8_000, wall_now, mono_now), 47_000 * MS);
        // Broker 5_500 was never read: it was skipped at the jump.
        assert_eq!(clock.to_monotonic(5_500, wall_now, mono_now), 45_000 * MS);
    }
}
