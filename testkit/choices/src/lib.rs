//! Generators driven by a tape of choices that proptest draws and shrinks.
//!
//! A hand-written generator (a random program, a random module) asks
//! [`Choices`] for each decision instead of a seeded PRNG. proptest draws the
//! tape ([`tape`]) and, when a case fails, shrinks it: it drops choices and
//! lowers their values. A missing or zero choice takes the first option, so
//! the generators' first options being their smallest makes a failure shrink
//! to a small input (a `u64` seed shrinks to nothing meaningful).

use proptest::collection::vec;
use proptest::prelude::*;

/// Enough choices for the largest generated inputs; past the end every
/// choice is 0.
pub const MAX_CHOICES: usize = 512;

/// A tape of up to [`MAX_CHOICES`] choices.
pub fn tape() -> impl Strategy<Value = Choices> {
    vec(any::<u32>(), 0..MAX_CHOICES).prop_map(Choices::new)
}

/// The decisions of one generated input, taken in order.
#[derive(Clone, Debug)]
pub struct Choices {
    tape: Vec<u32>,
    at: usize,
}

impl Choices {
    pub fn new(tape: Vec<u32>) -> Choices {
        Choices { tape, at: 0 }
    }

    /// The next raw choice (0 past the end of the tape).
    pub fn choice(&mut self) -> u32 {
        let c = self.tape.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        c
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.choice() as usize % n.max(1)
    }

    /// One of `xs` (which must not be empty), the first when the choice is 0.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exhausted_tape_takes_first_options() {
        let mut c = Choices::new(vec![7, 2]);
        assert_eq!(c.below(5), 2);
        assert_eq!(*c.pick(&["a", "b", "c"]), "c");
        assert_eq!(c.below(5), 0);
        assert_eq!(*c.pick(&["a", "b"]), "a");
        assert_eq!(c.below(0), 0);
    }
}
