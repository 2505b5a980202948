//! The catastrophic-command guard.

use mpa_exec::dangerous_reason;

#[test]
fn blocks_the_classic_disasters() {
    for cmd in [
        "rm -rf /",
        "sudo rm -fr / --no-preserve-root",
        "rm -r -f /*",
        "cd /tmp && rm --recursive --force /",
        "mkfs.ext4 /dev/sdb1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "cat image.iso > /dev/nvme0n1",
        ":(){ :|:& };:",
        "bomb() { bomb | bomb & }; bomb",
        "shutdown -h now",
        "sudo reboot",
        "systemctl poweroff",
        "chmod -R 777 /",
        "sudo -u root rm -rf /",
        "doas -u root reboot",
        "nice -n 10 rm -rf /",
        "env -u HOME rm -rf /*",
    ] {
        assert!(dangerous_reason(cmd).is_some(), "{cmd}");
    }
}

#[test]
fn lets_ordinary_commands_through() {
    for cmd in [
        "rm -rf /tmp/build",
        "rm -rf ./cache",
        "dd if=/dev/zero of=/tmp/file bs=1M count=1",
        "grep shutdown /var/log/syslog",
        "echo reboot later",
        "ls -la /",
        "chmod -R 755 /opt/app",
        "docker restart moviepilot",
    ] {
        assert_eq!(dangerous_reason(cmd), None, "{cmd}");
    }
}
