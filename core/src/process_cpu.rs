//! CPU time used by this process, all its threads together (user and system).

use std::time::Duration;

/// The CPU time this process has used so far, where the system tells (Linux: the `utime`
/// and `stime` of `/proc/self/stat`, in clock ticks of 10 ms); `None` elsewhere.
pub(crate) fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat)
}

/// `utime + stime` of a `/proc/<pid>/stat` line. The command name (second field) is in
/// parentheses and may hold spaces and parentheses itself: fields are counted after the
/// last `)`, where the third field (the state) comes first.
fn parse_stat(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // Fields 14 and 15 (1-based) of the line: 11 and 12 after the state (field 3).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // USER_HZ: 100 on every Linux ABI (sysconf(_SC_CLK_TCK) reports it).
    Some(Duration::from_millis((utime + stime) * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_user_plus_system_time() {
        // A command name with a space and a parenthesis in it.
        let line =
            "4242 (my (prog) x) R 1 4242 4242 0 -1 4194304 120 0 0 0 250 17 0 0 20 0 3 0 1000 1 1";
        assert_eq!(parse_stat(line), Some(Duration::from_millis(2670)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_time_grows_while_the_process_computes() {
        let before = process_cpu_time().expect("Linux has /proc/self/stat");
        let start = std::time::Instant::now();
        let mut x = 1u64;
        while start.elapsed() < Duration::from_millis(120) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let after = process_cpu_time().unwrap();
        assert!(
            after >= before + Duration::from_millis(50),
            "{before:?} -> {after:?}"
        );
    }
}
