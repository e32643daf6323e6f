//! The work one call's preparation may do, metered. Every reader and repair
//! stage that scans text (the whole-call reader, the syntax repairs, the
//! name's residue reading) charges the bytes it visits to the meter of the
//! preparation running on this thread. Each scan first asks whether the
//! meter is spent and, if so, stops at once; so whatever shape a hostile
//! text takes (`{` repeated, `<a>` repeated, `a.a.a…`), preparing a call
//! costs at most [`PER_BYTE`] times its length plus [`FLOOR`] bytes visited,
//! plus one scan. A call whose preparation spent its meter is refused
//! ([`super::prepare`]): a reading cut short is never acted on
//! (docs/limits.md, "Reading a call": linear).
//!
//! The meter lives in a thread-local because the stages are plain
//! functions of text that run synchronously inside [`metered`]; outside it
//! (unit tests of one stage) nothing is limited, but the work is counted
//! all the same.

use std::cell::Cell;

/// Bytes the stages may visit per byte of the call's name and arguments.
/// Every stage reads its text a bounded number of times (the whole-call
/// reader nests at most four wrappers deep, each level a few passes): the
/// calls of the repository's repair tests, every family, spend at most
/// 7.3 bytes per byte.
pub(crate) const PER_BYTE: u64 = 32;

/// Bytes any preparation may visit, however short its text.
pub(crate) const FLOOR: u64 = 1 << 20;

#[derive(Clone, Copy)]
struct Meter {
    spent: u64,
    allowed: u64,
}

thread_local! {
    static METER: Cell<Meter> = const { Cell::new(Meter { spent: 0, allowed: u64::MAX }) };
}

/// What a metered preparation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Work {
    /// Bytes visited.
    pub(crate) spent: u64,
    /// The meter ran out: some stage stopped reading early.
    pub(crate) exhausted: bool,
}

/// Runs `f` under a meter for `input` bytes of text; its value, and what
/// it did. The meter of an enclosing call, if any, is put back after.
pub(crate) fn metered<T>(input: usize, f: impl FnOnce() -> T) -> (T, Work) {
    let allowed = (input as u64).saturating_mul(PER_BYTE).saturating_add(FLOOR);
    let outer = METER.with(|m| m.replace(Meter { spent: 0, allowed }));
    let value = f();
    let meter = METER.with(|m| m.replace(outer));
    (value, Work { spent: meter.spent, exhausted: meter.spent > meter.allowed })
}

/// Charges `bytes` visited; whether the meter still has room (a scan that
/// gets `false` stops).
pub(crate) fn charge(bytes: usize) -> bool {
    METER.with(|m| {
        let mut meter = m.get();
        meter.spent = meter.spent.saturating_add(bytes as u64);
        m.set(meter);
        meter.spent <= meter.allowed
    })
}

/// Whether the meter is spent: a scan asks before it starts.
pub(crate) fn spent() -> bool {
    METER.with(|m| {
        let meter = m.get();
        meter.spent > meter.allowed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_counts_and_runs_out() {
        let ((), work) = metered(0, || {
            assert!(charge(FLOOR as usize));
            assert!(!spent());
            assert!(!charge(1));
            assert!(spent());
        });
        assert_eq!(work, Work { spent: FLOOR + 1, exhausted: true });
        // Outside a meter nothing runs out.
        assert!(charge(usize::MAX) && charge(usize::MAX) && !spent());
    }

    /// `head`, then `unit` repeated to `size` bytes.
    fn shape(head: &str, unit: &str, size: usize) -> String {
        let mut text = head.to_owned();
        while text.len() + unit.len() <= size {
            text.push_str(unit);
        }
        text
    }

    /// What the reader and the syntax stage spend on `text`.
    fn read(text: &str) -> Work {
        let limits = crate::exec::limits::ArgumentLimits::default();
        let ((), work) = metered(text.len(), || {
            let _ = super::super::calls::read(text, limits);
            let _ = super::super::calls::count(text, limits);
            let _ = super::super::syntax::parse(text, false, limits, false, None);
        });
        work
    }

    /// The attack's shapes at 1 MiB are read in a few passes, not cut off by
    /// the meter; and on shapes that still spend it, every scan stops at
    /// once (the work stays within the meter and one more pass).
    #[test]
    fn hostile_shapes_cost_a_few_passes_and_every_scan_stops_with_the_meter() {
        let size = 1 << 20;
        for (head, unit) in [
            ("x{}\"", "{"),
            ("x{} ", "a."),
            ("x{} ", "a-"),
            ("", "<a>"),
            ("", "<a "),
            (r#"{"a": 1 "#, "/* "),
            ("", "<tool_call>"),
            ("", "<function="),
            (r#"{"query": "a"}"#, "{"),
            ("x{} ", "a(b=\""),
            ("{} ", "a() "),
            ("{} ", "Action: a\nAction Input: {"),
        ] {
            let text = shape(head, unit, size);
            let work = read(&text);
            assert!(!work.exhausted && work.spent <= 16 * size as u64, "{head}{unit}…: {work:?}");
        }
        for (head, unit, tail) in [
            ("x{}\"", "{", "}"),
            ("", "<a", ">"),
            ("x{} ", "<b><c>", "</c>"),
            ("{} ", "Action: a\nAction Input: {", "}"),
        ] {
            let text = shape(head, unit, size - tail.len()) + tail;
            let work = read(&text);
            let most = size as u64 * PER_BYTE + FLOOR + 4 * size as u64;
            assert!(work.spent <= most, "{head}{unit}…{tail}: {work:?}");
        }
    }

    #[test]
    fn an_enclosing_meter_is_put_back() {
        let ((), outer) = metered(1, || {
            charge(10);
            let ((), inner) = metered(1, || {
                charge(5);
            });
            assert_eq!(inner.spent, 5);
            charge(1);
        });
        assert_eq!(outer, Work { spent: 11, exhausted: false });
    }
}
