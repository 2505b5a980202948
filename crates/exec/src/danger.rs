//! The dangerous-command guard: a conservative screen for commands whose damage cannot be undone
//! (recursive delete of `/`, filesystem creation, raw disk writes, fork bombs, power-off). It is
//! a seat belt for an admin's agent, not a sandbox: it refuses with a reason and the caller may
//! confirm with `confirm_dangerous=true`.

/// Returns why `command` is considered dangerous, or `None`.
pub fn dangerous_reason(command: &str) -> Option<&'static str> {
    let squeezed: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    if is_fork_bomb(&squeezed) {
        return Some("fork bomb (a function that recursively spawns itself in the background)");
    }
    for segment in segments(command) {
        let words = command_words(&segment);
        let Some(program) = words.first() else {
            continue;
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        let args = &words[1..];
        match program {
            "rm" => {
                let recursive = args.iter().any(|a| {
                    a == "--recursive"
                        || (a.starts_with('-') && !a.starts_with("--") && a.contains(['r', 'R']))
                });
                let root = args.iter().any(|a| is_root_target(a))
                    || args.iter().any(|a| a == "--no-preserve-root");
                if recursive && root {
                    return Some("recursive delete of the root filesystem");
                }
            }
            "chmod" | "chown" | "chgrp" => {
                let recursive = args.iter().any(|a| {
                    a == "-R" || a == "--recursive" || (a.starts_with('-') && a.contains('R'))
                });
                if recursive && args.iter().any(|a| is_root_target(a)) {
                    return Some("recursive permission or ownership change of the root filesystem");
                }
            }
            p if p == "mkfs" || p.starts_with("mkfs.") || p == "mke2fs" || p == "mkswap" => {
                return Some("creating a filesystem erases the target device");
            }
            "wipefs" | "sgdisk" | "fdisk" | "sfdisk" | "parted" | "blkdiscard" | "shred"
                if args.iter().any(|a| is_disk_device(a)) =>
            {
                return Some("partitioning or wiping a disk device");
            }
            "dd" if args
                .iter()
                .any(|a| a.strip_prefix("of=").is_some_and(is_disk_device)) =>
            {
                return Some("raw write to a disk device");
            }
            "shutdown" | "reboot" | "halt" | "poweroff" => {
                return Some("shutting down or rebooting the machine");
            }
            "init" | "telinit" if args.iter().any(|a| a == "0" || a == "6") => {
                return Some("shutting down or rebooting the machine");
            }
            "systemctl"
                if args.iter().any(|a| {
                    matches!(
                        a.as_str(),
                        "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot"
                    )
                }) =>
            {
                return Some("shutting down or rebooting the machine");
            }
            _ => {}
        }
        // Redirections onto a block device, e.g. `cat img > /dev/sda`.
        if let Some(pos) = segment.find('>') {
            let target = segment[pos + 1..].trim_start_matches(['>', '|', ' ']);
            let target = target.split_whitespace().next().unwrap_or("");
            if is_disk_device(target) {
                return Some("raw write to a disk device");
            }
        }
    }
    None
}

fn is_root_target(arg: &str) -> bool {
    let trimmed = arg.trim_matches(['"', '\'']);
    matches!(trimmed, "/" | "/*" | "/." | "/.." | "//")
}

fn is_disk_device(path: &str) -> bool {
    let path = path.trim_matches(['"', '\'']);
    let Some(name) = path.strip_prefix("/dev/") else {
        return false;
    };
    [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "md", "dm-", "disk/", "mapper/",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// `name(){ name|name& };name` with any function name, whitespace removed.
fn is_fork_bomb(squeezed: &str) -> bool {
    let mut search = squeezed;
    while let Some(pos) = search.find("(){") {
        let before = &search[..pos];
        let name_start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '.'))
            .map_or(0, |i| i + 1);
        let name = &before[name_start..];
        let body = &search[pos + 3..];
        if !name.is_empty() && body.starts_with(&format!("{name}|{name}&")) {
            return true;
        }
        search = &search[pos + 3..];
    }
    false
}

/// Splits a command line at shell separators (`;`, `&`, `|`, newlines, `$(`, backticks).
fn segments(command: &str) -> Vec<String> {
    command
        .split([';', '&', '|', '\n', '`', '(', ')'])
        .map(|s| s.trim().trim_start_matches('$').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Words of one segment with wrappers (`sudo`, `env`, `exec`, `nohup`, `time`, `command`,
/// variable assignments and their flags) removed, so the real program comes first.
fn command_words(segment: &str) -> Vec<String> {
    let words: Vec<String> = segment
        .split_whitespace()
        .map(|w| w.trim_matches(['"', '\'']).to_string())
        .collect();
    let mut start = 0;
    let mut wrapper_name = "";
    while let Some(word) = words.get(start) {
        let wrapper = matches!(
            word.as_str(),
            "sudo" | "env" | "exec" | "nohup" | "time" | "command" | "nice" | "doas" | "busybox"
        );
        if wrapper {
            wrapper_name = word.as_str();
            start += 1;
        } else if start > 0 && word.starts_with('-') {
            // `sudo -u root rm …`: an option that takes its value as the next word.
            start += if option_takes_value(wrapper_name, word) {
                2
            } else {
                1
            };
        } else if word.contains('=') && !word.starts_with('-') {
            start += 1;
        } else {
            break;
        }
    }
    words[start.min(words.len())..].to_vec()
}

/// Wrapper options whose value is the next word (so it is not taken for the program).
fn option_takes_value(wrapper: &str, option: &str) -> bool {
    let with_value: &[&str] = match wrapper {
        "sudo" => &[
            "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R",
        ],
        "doas" => &["-u", "-C"],
        "env" => &["-u", "-C", "-S"],
        "nice" => &["-n"],
        "time" => &["-o", "-f"],
        _ => &[],
    };
    with_value.contains(&option)
}
