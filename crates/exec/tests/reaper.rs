//! The subreaper's rule: which zombies are ours to reap.

use mpa_exec::{Stat, parse_stat};

#[test]
fn stat_lines_with_odd_command_names_parse() {
    let stat = parse_stat("4242 (a) b (c) Z 7 4200 4200 0 -1 4227148 0 0").unwrap();
    assert_eq!(
        stat,
        Stat {
            state: 'Z',
            ppid: 7,
            session: 4200
        }
    );
    assert_eq!(parse_stat("garbage"), None);
}

#[test]
fn only_adopted_zombies_qualify() {
    let zombie = |ppid, session| Stat {
        state: 'Z',
        ppid,
        session,
    };
    // An orphan from a terminal session (leader 500) adopted by us (pid 100, session 90).
    assert!(zombie(100, 500).is_adopted_zombie_of(100, 90, 501));
    // Our own child in our session, or one that called setsid: someone may wait for it.
    assert!(!zombie(100, 90).is_adopted_zombie_of(100, 90, 501));
    assert!(!zombie(100, 501).is_adopted_zombie_of(100, 90, 501));
    // Somebody else's child, or not dead yet.
    assert!(!zombie(7, 500).is_adopted_zombie_of(100, 90, 501));
    let alive = Stat {
        state: 'S',
        ..zombie(100, 500)
    };
    assert!(!alive.is_adopted_zombie_of(100, 90, 501));
}
