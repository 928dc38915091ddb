use super::*;

fn list(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn ok(items: &[&str]) -> RunFlags {
    parse(&list(items), 2048).unwrap_or_else(|e| panic!("{items:?}: {e}"))
}

/// The flag is refused with RUN_FLAGS_INVALID, its message naming the flag and `why`.
fn refused_with(items: &[&str], why: &str) {
    let e = parse(&list(items), 2048).expect_err(&format!("{items:?} must be refused"));
    assert_eq!(e.code(), "RUN_FLAGS_INVALID", "{e}");
    let msg = e.to_string();
    assert!(msg.contains(why), "{items:?}: {msg:?} lacks {why:?}");
    assert!(
        !msg.contains("  "),
        "{items:?}: {msg:?} has a run of spaces"
    );
    assert!(
        items.iter().any(|i| msg.contains(&format!("'{i}'"))),
        "{msg} names no flag"
    );
}

#[test]
fn none_given_is_no_flags_and_the_option_wins_over_the_variable() {
    assert_eq!(resolve(None, None, 2048).unwrap(), RunFlags::default());
    let from_var = resolve(None, Some("  --runtime=runsc \t --memory=1g\n"), 2048).unwrap();
    assert_eq!(from_var.given, ["--runtime=runsc", "--memory=1g"]);
    let option = list(&["--cpus=2"]);
    let both = resolve(Some(&option), Some("--privileged"), 2048).unwrap();
    assert_eq!(both.given, ["--cpus=2"]);
    assert_eq!(
        resolve(Some(&[]), Some("--runtime=runsc"), 2048).unwrap(),
        RunFlags::default()
    );
    assert_eq!(
        resolve(None, Some("   "), 2048).unwrap(),
        RunFlags::default()
    );
}

#[test]
fn the_accepted_flags_are_decoded_for_the_engine() {
    let f = ok(&[
        "--runtime=runsc",
        "--memory=512m",
        "--memory-swap=1g",
        "--cpus=1.5",
        "--cpu-shares=512",
        "--pids-limit=256",
        "--shm-size=64m",
        "--ulimit=nofile=1024:2048",
        "--ulimit=core=0",
        "--gpus=all",
        "--dns=192.0.2.53",
        "--dns=2001:db8::1",
        "--dns-search=example.test",
        "--dns-option=ndots:2",
        "--dns-opt=rotate",
        "--tmpfs=/scratch:rw,size=64m,mode=1777,noexec,nosuid,nodev",
        "--tmpfs=/var/tmp",
        "--label=team=a=b",
        "--label=flag",
        "--security-opt=no-new-privileges",
        "--security-opt=label=level:s0:c100,c200",
    ]);
    assert_eq!(f.runtime.as_deref(), Some("runsc"));
    assert_eq!(f.memory, Some(512 << 20));
    assert_eq!(f.memory_swap, Some(1 << 30));
    assert_eq!(f.nano_cpus, Some(1_500_000_000));
    assert_eq!(f.cpu_shares, Some(512));
    assert_eq!(f.pids_limit, Some(256));
    assert_eq!(f.shm_size, Some(64 << 20));
    let u = |name: &str, soft, hard| Ulimit {
        name: name.into(),
        soft,
        hard,
    };
    assert_eq!(f.ulimits, [u("nofile", 1024, 2048), u("core", 0, 0)]);
    assert_eq!(f.gpus, Some(Gpus::All));
    assert_eq!(f.dns, ["192.0.2.53", "2001:db8::1"]);
    assert_eq!(f.dns_search, ["example.test"]);
    assert_eq!(f.dns_options, ["ndots:2", "rotate"]);
    assert_eq!(
        f.tmpfs["/scratch"],
        "rw,size=64m,mode=1777,noexec,nosuid,nodev"
    );
    assert_eq!(f.tmpfs["/var/tmp"], "");
    assert_eq!(f.labels["team"], "a=b");
    assert_eq!(f.labels["flag"], "");
    assert_eq!(f.security_opt, ["label=level:s0:c100,c200"]);
    assert_eq!(f.given.len(), 21);
    assert_eq!(f.given[0], "--runtime=runsc");
}

#[test]
fn short_forms_of_accepted_flags_are_given_in_their_long_form() {
    let f = ok(&["-m512m", "-c=100", "-lkey=v"]);
    assert_eq!(f.memory, Some(512 << 20));
    assert_eq!(f.cpu_shares, Some(100));
    assert_eq!(f.labels["key"], "v");
    assert_eq!(
        f.given,
        ["--memory=512m", "--cpu-shares=100", "--label=key=v"]
    );
}

#[test]
fn sizes_read_as_the_engine_reads_them() {
    assert_eq!(bytes("100"), Ok(100));
    assert_eq!(bytes("1k"), Ok(1024));
    assert_eq!(bytes("1KiB"), Ok(1024));
    assert_eq!(bytes("1.5g"), Ok(3 << 29));
    assert_eq!(bytes("2MB"), Ok(2 << 20));
    assert_eq!(bytes("1t"), Ok(1 << 40));
    for bad in [
        "",
        "m",
        "1x",
        "-1",
        "1.",
        ".5m",
        "1..2m",
        "1m1",
        "0",
        "99999999999t",
        "1 m",
    ] {
        assert!(bytes(bad).is_err(), "{bad:?}");
    }
    refused_with(&["--memory=5m"], "minimum memory limit is 6m");
    refused_with(&["--shm-size=0"], "is zero");
}

#[test]
fn cpus_and_shares_are_bounded() {
    assert_eq!(ok(&["--cpus=0.01"]).nano_cpus, Some(10_000_000));
    assert_eq!(ok(&["--cpus=2"]).nano_cpus, Some(2_000_000_000));
    for bad in [
        "--cpus=0",
        "--cpus=-1",
        "--cpus=1025",
        "--cpus=1e3",
        "--cpus=.5",
        "--cpus=0.0000000001",
    ] {
        refused_with(&[bad], "not a number of CPUs");
    }
    refused_with(&["--cpu-shares=1"], "not a whole number from 2 to 262144");
    refused_with(&["--cpu-shares=+5"], "not a whole number");
}

#[test]
fn a_pid_limit_may_only_lower_the_layers() {
    assert_eq!(ok(&["--pids-limit=2048"]).pids_limit, Some(2048));
    assert_eq!(ok(&["--pids-limit=16"]).pids_limit, Some(16));
    refused_with(&["--pids-limit=2049"], "above the layer's pid limit 2048");
    refused_with(&["--pids-limit=-1"], "would lift the pid limit");
    refused_with(&["--pids-limit=0"], "would lift the pid limit");
    refused_with(&["--pids-limit=1e3"], "not a whole number");
    let lower = parse(&list(&["--pids-limit=100"]), 64).unwrap_err();
    assert!(
        lower.to_string().contains("above the layer's pid limit 64"),
        "{lower}"
    );
}

#[test]
fn memory_swap_needs_memory_and_at_least_as_much() {
    assert_eq!(
        ok(&["--memory=1g", "--memory-swap=-1"]).memory_swap,
        Some(-1)
    );
    refused_with(&["--memory-swap=1g"], "needs --memory as well");
    refused_with(
        &["--memory=1g", "--memory-swap=512m"],
        "must be at least --memory",
    );
}

#[test]
fn ulimits_that_raise_priority_or_are_unknown_are_refused() {
    assert_eq!(ok(&["--ulimit=nproc=-1"]).ulimits[0].soft, -1);
    assert_eq!(ok(&["--ulimit=nofile=10:-1"]).ulimits[0].hard, -1);
    for name in ["rtprio", "rttime", "nice"] {
        refused_with(&[&format!("--ulimit={name}=99")], "scheduling priority");
    }
    refused_with(&["--ulimit=bogus=1"], "not a resource limit");
    refused_with(&["--ulimit=nofile"], "not name=soft[:hard]");
    refused_with(&["--ulimit=nofile=20:10"], "above its hard limit");
    refused_with(&["--ulimit=nofile=-1:10"], "above its hard limit");
    refused_with(&["--ulimit=nofile=-2"], "not a whole number");
    refused_with(&["--ulimit=nofile=1:2:3"], "not a whole number");
    refused_with(&["--ulimit=nofile=1", "--ulimit=nofile=2"], "given twice");
}

#[test]
fn gpus_dns_and_labels_are_checked() {
    assert_eq!(ok(&["--gpus=2"]).gpus, Some(Gpus::Count(2)));
    assert_eq!(
        ok(&["--gpus=device=0,GPU-3a2b"]).gpus,
        Some(Gpus::Devices(vec!["0".into(), "GPU-3a2b".into()]))
    );
    refused_with(&["--gpus=device="], "is not all, a count");
    refused_with(&["--gpus=0"], "is not all, a count");
    refused_with(&["--gpus=all", "--gpus=1"], "more than once");
    refused_with(&["--dns=resolver.example"], "not an IP address");
    refused_with(&["--dns-search=-x"], "not a domain name");
    assert_eq!(ok(&["--dns-search=."]).dns_search, ["."]);
    refused_with(&["--dns-option=;x"], "not a resolver option");
    for key in [
        "po.owner=x",
        "PO.spec-hash=x",
        "po.sandbox",
        "Po.Workspace=y",
        "po=x",
    ] {
        refused_with(&[&format!("--label={key}")], "po.* namespace");
    }
    refused_with(&["--label==v"], "needs a key");
    refused_with(&["--label=a=1", "--label=a=2"], "given twice");
}

#[test]
fn tmpfs_may_not_touch_the_layers_mounts_or_the_kernels() {
    for (path, how) in [
        ("/po-home", "at /po-home"),
        ("/po-home/x", "inside /po-home"),
        ("/run", "over /run/po-sandbox"),
        ("/run/po-broker", "at /run/po-broker"),
        ("/opt", "over /opt/po"),
        ("/proc", "at /proc"),
        ("/sys/fs/cgroup", "inside /sys"),
        ("/dev/shm", "inside /dev"),
    ] {
        refused_with(&[&format!("--tmpfs={path}")], how);
    }
    for bad in ["/", "relative", "/a/../b", "/a/./b", "/a//b", "/a/", "/a,b"] {
        refused_with(
            &[&format!("--tmpfs={bad}")],
            "not an absolute, normal container path",
        );
    }
    refused_with(&["--tmpfs=/x:suid"], "setuid files or device files");
    refused_with(&["--tmpfs=/x:dev"], "setuid files or device files");
    refused_with(&["--tmpfs=/x:size=1x"], "not a tmpfs option");
    refused_with(&["--tmpfs=/x:mode=999"], "not a tmpfs option");
    refused_with(&["--tmpfs=/x:exec=1"], "not a tmpfs option");
    refused_with(&["--tmpfs=/x", "--tmpfs=/x:ro"], "given twice");
    assert_eq!(ok(&["--tmpfs=/x:"]).tmpfs["/x"], "");
}

#[test]
fn tmpfs_is_checked_against_each_containers_own_mounts() {
    let f = ok(&["--tmpfs=/home:size=1m"]);
    let targets = ["/home/ann/app", "/opt/po"];
    let e = check_tmpfs_against(&f, targets.iter().copied()).unwrap_err();
    assert_eq!(e.code(), "RUN_FLAGS_INVALID");
    assert!(e.to_string().contains("'--tmpfs=/home:size=1m'"), "{e}");
    assert!(
        e.to_string()
            .contains("over the container's mount /home/ann/app"),
        "{e}"
    );
    let inside = ok(&["--tmpfs=/home/ann/app/node_modules"]);
    let e = check_tmpfs_against(&inside, targets.iter().copied()).unwrap_err();
    assert!(
        e.to_string()
            .contains("inside the container's mount /home/ann/app"),
        "{e}"
    );
    let apart = ok(&["--tmpfs=/home/ann/other"]);
    assert!(check_tmpfs_against(&apart, targets.iter().copied()).is_ok());
    // A sibling sharing a prefix is apart.
    let sibling = ok(&["--tmpfs=/home/ann/app2"]);
    assert!(check_tmpfs_against(&sibling, targets.iter().copied()).is_ok());
}

#[test]
fn security_options_are_accepted_only_when_they_tighten() {
    for same in [
        "no-new-privileges",
        "no-new-privileges=true",
        "no-new-privileges:true",
        "No-New-Privileges=TRUE",
    ] {
        let f = ok(&[&format!("--security-opt={same}")]);
        assert!(f.security_opt.is_empty(), "{same}");
    }
    for (opt, why) in [
        ("no-new-privileges=false", "would allow new privileges"),
        ("no-new-privileges:false", "would allow new privileges"),
        ("no-new-privileges=", "would allow new privileges"),
        ("seccomp=unconfined", "turn off the system-call filter"),
        ("seccomp:unconfined", "turn off the system-call filter"),
        ("Seccomp=Unconfined", "turn off the system-call filter"),
        ("seccomp=/etc/profile.json", "custom seccomp profile"),
        ("apparmor=unconfined", "default AppArmor profile"),
        ("apparmor=docker-default", "default AppArmor profile"),
        ("label=disable", "turn off SELinux separation"),
        ("label:disable", "turn off SELinux separation"),
        ("label=type:spc_t", "only label=level:<level>"),
        ("label=user:system_u", "only label=level:<level>"),
        ("label=level:", "only label=level:<level>"),
        ("systempaths=unconfined", "unmask the kernel paths"),
        ("unmask=ALL", "not one the layer accepts"),
        ("mask=/x", "not one the layer accepts"),
    ] {
        refused_with(&[&format!("--security-opt={opt}")], why);
    }
}

#[test]
fn every_refused_class_names_why_in_any_form() {
    for (item, why) in [
        ("--privileged", "every capability"),
        ("--privileged=false", "=false too"),
        ("--privileged=true", "every capability"),
        ("--Privileged", "every capability"),
        ("--PRIVILEGED=false", "every capability"),
        ("--cap-add=SYS_ADMIN", "would add capabilities"),
        ("--cap-add=all", "would add capabilities"),
        ("--cap-drop=ALL", "already dropped"),
        ("--device=/dev/kvm", "host devices"),
        ("--device-cgroup-rule=a *:* rwm", "whitespace"),
        ("--device-cgroup-rule=a", "host devices"),
        ("--device-read-bps=/dev/sda:1mb", "host devices"),
        ("--pid=host", "namespace"),
        ("--ipc=host", "namespace"),
        ("--uts=host", "namespace"),
        ("--userns=host", "namespace"),
        ("--cgroupns=host", "namespace"),
        ("--pid=container:abc", "namespace"),
        ("--network=host", "owns the network"),
        ("--network=none", "owns the network"),
        ("--net=host", "owns the network"),
        ("--network-alias=x", "owns the network"),
        ("--user=0", "`user` option"),
        ("--user=0:0", "`user` option"),
        ("--user", "`user` option"),
        ("-u0", "`user` option"),
        ("-u=root", "`user` option"),
        ("-u", "`user` option"),
        ("--group-add=0", "`user` option"),
        ("-v/:/host", "owns every mount"),
        ("--volume=/:/host", "owns every mount"),
        ("--mount=type=bind,src=/,dst=/h", "owns every mount"),
        ("--volumes-from=other", "owns every mount"),
        ("-e", "owns the environment"),
        ("-ePO_X=1", "owns the environment"),
        ("-e=PO_SANDBOX=0", "owns the environment"),
        ("--env=PO_X=1", "owns the environment"),
        ("--env-file=/etc/passwd", "owns the environment"),
        ("-p8080:80", "publishes exactly one"),
        ("--publish=0.0.0.0:80:80", "publishes exactly one"),
        ("-P", "publishes exactly one"),
        ("--publish-all", "publishes exactly one"),
        ("--add-host=x:1.2.3.4", "owns them"),
        ("--cgroup-parent=/", "out of the engine's cgroup"),
        ("--entrypoint=/bin/sh", "the layer owns it"),
        ("-w/tmp", "the layer owns it"),
        (
            "--sysctl=net.ipv4.ip_forward=1",
            "not a flag the layer maps",
        ),
        ("--read-only", "not a flag the layer maps"),
        ("-it", "-i is not a flag the layer maps"),
        ("-d", "-d is not a flag the layer maps"),
    ] {
        refused_with(&[item], why);
    }
}

#[test]
fn malformed_items_are_refused_saying_how_to_write_them() {
    for (items, why) in [
        (&["--runtime", "runsc"][..], "needs its value attached"),
        (
            &["runsc"][..],
            "bare word cannot be told from an image name",
        ),
        (&["--memory=1g", "alpine"][..], "it is not a flag"),
        (&[""][..], "it is empty"),
        (&["--runtime="][..], "its value is empty"),
        (&["--memory"][..], "needs its value attached"),
        (&["-m"][..], "needs its value attached"),
        (&["--"][..], "ends the options"),
        (&["-"][..], "it is not a flag"),
        (&["---privileged"][..], "not a well-formed flag"),
        (&["--=x"][..], "not a well-formed flag"),
        (&["--cap_add=x"][..], "not a well-formed flag"),
        (&["--memory-=1g"][..], "not a well-formed flag"),
        (
            &["--Memory=1g"][..],
            "flag names are lower-case: write --memory",
        ),
        (&["--runtime=runsc --privileged"][..], "whitespace"),
        (&["--label=a=b\nc"][..], "control character"),
        (&["--label=a\u{0}"][..], "control character"),
        (&["\u{2014}privileged"][..], "U+2014"),
        (&["\u{2013}\u{2013}runtime=runsc"][..], "U+2013"),
        (&["\u{2212}m=1g"][..], "U+2212"),
        (&["\u{FF0D}\u{FF0D}privileged"][..], "U+FF0D"),
        (&["-\u{2010}privileged"][..], "-\u{2010} is not a flag"),
        (&["--pri\u{0076}ileged"][..], "every capability"),
        (&["--privil\u{0435}ged"][..], "not a well-formed flag"),
        (&["--runtime=run sc"][..], "whitespace"),
        (&["--runtime=../runc"][..], "not a runtime name"),
        (&["--runtime=runsc", "--runtime=runc"][..], "more than once"),
        (&["--memory=1g", "-m2g"][..], "more than once"),
        (&["--cpus=1", "--cpus=1"][..], "more than once"),
    ] {
        refused_with(items, why);
    }
}

#[test]
fn the_first_bad_flag_is_the_error() {
    let e = parse(
        &list(&["--memory=1g", "--privileged", "--cap-add=ALL"]),
        2048,
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("Run flag '--privileged'"), "{e}");
}

#[test]
fn a_bad_value_says_what_was_expected_and_whether_it_loosens() {
    use values::{tmpfs, ulimit};
    let e = ulimit("nofile=x:1").unwrap_err();
    assert_eq!(
        e.to_string(),
        r#""x" in "nofile=x:1" is not a whole number (or -1, unlimited)"#
    );
    assert_eq!(
        bytes("1q").unwrap_err().to_string(),
        r#""1q" is not a size (a number and an optional unit b, k, m, g, t)"#
    );
    assert!(matches!(bytes("0"), Err(BadValue::Unaccepted(_))));
    assert!(matches!(ulimit("nice=1"), Err(BadValue::Loosens(_))));
    assert!(matches!(tmpfs("/proc"), Err(BadValue::Loosens(_))));
    assert!(matches!(
        tmpfs("/scratch:bogus"),
        Err(BadValue::NotA { value, .. }) if value == "bogus"
    ));
}
