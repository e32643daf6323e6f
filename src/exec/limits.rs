//! The executor's limits, each answered in-band when reached, and how a size
//! is written in the messages that name one.

/// Size and nesting limits of arguments, checked before any parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArgumentLimits {
    pub(crate) max_bytes: usize,
    pub(crate) max_depth: usize,
}

impl Default for ArgumentLimits {
    fn default() -> Self {
        Self { max_bytes: 1024 * 1024, max_depth: 64 }
    }
}

/// Limits of the executor; every one answers in-band when reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExecLimits {
    pub(crate) arguments: ArgumentLimits,
    /// The "available tools" inventory lists at most this many names.
    pub(crate) inventory_cap: usize,
    /// A larger result is TOOL_CRASHED.
    pub(crate) max_result_bytes: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        Self { arguments: ArgumentLimits::default(), inventory_cap: 100, max_result_bytes: 1024 * 1024 }
    }
}

/// A size as messages write it: `1 MiB`, `64 KiB`, else in bytes.
pub(crate) fn byte_size(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// A duration for a reader: milliseconds below a second (`28 ms`), else
/// seconds with at most one decimal (`1.5 s`, `30 s`), rounded.
pub(crate) fn readable_duration(duration: std::time::Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 999.5 {
        return format!("{} ms", ms.round().max(1.0) as u64);
    }
    let tenths = (ms / 100.0).round() as u64;
    match tenths % 10 {
        0 => format!("{} s", tenths / 10),
        d => format!("{}.{d} s", tenths / 10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_for_a_reader() {
        use std::time::Duration;
        assert_eq!(readable_duration(Duration::from_micros(27_900)), "28 ms");
        assert_eq!(readable_duration(Duration::from_micros(300)), "1 ms");
        assert_eq!(readable_duration(Duration::from_millis(500)), "500 ms");
        assert_eq!(readable_duration(Duration::from_millis(999_600) / 1000), "1 s");
        assert_eq!(readable_duration(Duration::from_millis(1_540)), "1.5 s");
        assert_eq!(readable_duration(Duration::from_secs(30)), "30 s");
    }

    #[test]
    fn sizes_in_the_largest_whole_unit() {
        assert_eq!(byte_size(1024 * 1024), "1 MiB");
        assert_eq!(byte_size(3 * 1024 * 1024), "3 MiB");
        assert_eq!(byte_size(64 * 1024), "64 KiB");
        assert_eq!(byte_size(1536 * 1024), "1536 KiB");
        assert_eq!(byte_size(1000), "1000 bytes");
        assert_eq!(byte_size(0), "0 bytes");
    }
}
