//! `connect`: what the host checks before it sends a spawner anything, on real sockets.

use super::*;
use std::time::Duration;

const NAME: &str = "exec-0123456789abcdef.sock";

/// A place in a fresh folder, and a record there for process `pid`.
fn place_for(pid: u32, start_time: u64) -> (tempfile::TempDir, Place) {
    let dir = tempfile::tempdir().unwrap();
    let place = Place {
        record: dir.path().join("w1.exec"),
        host_dir: dir.path().to_path_buf(),
        container_dir: "/run/po-broker".into(),
    };
    let rec = Record {
        container_id: "c1".into(),
        pid,
        start_time,
        socket: NAME.into(),
        failed: None,
    };
    std::fs::write(&place.record, serde_json::to_vec(&rec).unwrap()).unwrap();
    (dir, place)
}

fn ours() -> (u32, u64) {
    let pid = std::process::id();
    (pid, start_time(pid).unwrap())
}

#[tokio::test]
async fn the_recorded_process_listening_is_connected_to_and_nothing_else() {
    let (pid, start) = ours();
    let (_dir, place) = place_for(pid, start);
    let _listener = tokio::net::UnixListener::bind(place.host_dir.join(NAME)).unwrap();
    assert!(matches!(connect(&place, "c1").await, Found::Connected(_)));
    // Another container's record, or a start time that is not this process's.
    assert!(matches!(connect(&place, "c2").await, Found::Absent));
    let (_d, other) = place_for(pid, start + 1);
    let _l = tokio::net::UnixListener::bind(other.host_dir.join(NAME)).unwrap();
    assert!(matches!(connect(&other, "c1").await, Found::Absent));
    // A record of a process that is gone.
    let (_d, gone) = place_for(u32::MAX - 7, start);
    assert!(matches!(connect(&gone, "c1").await, Found::Absent));
}

/// A spawner that cannot run in its container (no mkfifo) says why beside its socket and exits:
/// the host records it once, and no later exec launches another for that container.
#[tokio::test]
async fn a_spawner_that_said_it_cannot_run_is_recorded_and_never_launched_again() {
    let (_, start) = ours();
    let (dir, place) = place_for(u32::MAX - 7, start);
    std::fs::write(
        dir.path().join(format!("{NAME}.failed")),
        "mkfifo could not make a FIFO in /tmp\x1b]0;x",
    )
    .unwrap();
    let Found::Unusable(why) = connect(&place, "c1").await else {
        panic!("not unusable");
    };
    assert!(why.contains("mkfifo could not make a FIFO"), "{why}");
    assert!(!why.chars().any(char::is_control), "{why:?}");
    assert!(!dir.path().join(format!("{NAME}.failed")).exists());
    let rec = read_record(&place.record).unwrap();
    assert_eq!(rec.failed.as_deref(), Some(why.as_str()));
    // Said once: the record answers from now on, for this container only.
    assert!(matches!(connect(&place, "c1").await, Found::Unusable(w) if w == why));
    assert!(matches!(connect(&place, "c2").await, Found::Absent));
    // A spawner that is gone without a word (killed) is launched again.
    let (_d, killed) = place_for(u32::MAX - 7, start);
    assert!(matches!(connect(&killed, "c1").await, Found::Absent));
}

#[tokio::test]
async fn a_link_or_a_file_at_the_name_is_never_followed() {
    let (pid, start) = ours();
    let (dir, place) = place_for(pid, start);
    // A socket of the host's (ours: the pid would even match) behind a link planted at the name.
    let host = tempfile::tempdir().unwrap();
    let target = host.path().join("host.sock");
    let listener = tokio::net::UnixListener::bind(&target).unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join(NAME)).unwrap();
    assert!(matches!(connect(&place, "c1").await, Found::Absent));
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the host connected through the link");
    std::fs::remove_file(dir.path().join(NAME)).unwrap();
    std::fs::write(dir.path().join(NAME), b"").unwrap();
    assert!(matches!(connect(&place, "c1").await, Found::Absent));
}

#[tokio::test]
async fn another_process_listening_at_the_name_is_passed_over() {
    let (pid, start) = ours();
    let (dir, place) = place_for(pid, start);
    let path = dir.path().join(NAME);
    let script = "require('net').createServer().listen(process.argv[1], () => console.log('up'))";
    let mut squatter = std::process::Command::new("node")
        .args(["-e", script])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node runs the squatter");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(squatter.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "up");
    let found = connect(&place, "c1").await;
    squatter.kill().unwrap();
    let _ = squatter.wait();
    assert!(matches!(found, Found::Absent));
}

#[tokio::test(start_paused = true)]
async fn a_spawner_that_runs_but_does_not_listen_yet_is_waited_for_then_passed_over() {
    let (pid, start) = ours();
    let (_dir, place) = place_for(pid, start);
    let started = tokio::time::Instant::now();
    assert!(matches!(connect(&place, "c1").await, Found::Starting));
    assert!(started.elapsed() >= LISTEN_WAIT);
    // Listening before the wait is over: connected.
    let path = place.host_dir.join(NAME);
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tokio::net::UnixListener::bind(path).unwrap()
    });
    let found = connect(&place, "c1").await;
    let _listener = later.await.unwrap();
    assert!(matches!(found, Found::Connected(_)));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_launch_under_way_is_not_joined_by_a_second() {
    let (_dir, place) = place_for(1, 1);
    let engine = crate::engine::fake::FakeEngine::default();
    let lock_path = launch_lock_path(&place.record);
    assert_eq!(lock_path, place.host_dir.join("w1.exec.lock"));
    let held = crate::sandbox::folder::locks::HostLock::try_acquire(&lock_path)
        .unwrap()
        .unwrap();
    let second = launch(&engine, "c1", &place, "node", None).await;
    assert_eq!(
        second,
        Err("another exec is starting the sandbox's spawner".into())
    );
    assert_eq!(
        engine.count("create_exec"),
        0,
        "nothing asked of the engine"
    );
    drop(held);
    // Free again: the next launch asks the engine (which fails here) and leaves no lock file.
    let third = launch(&engine, "c1", &place, "node", None).await;
    assert!(third.unwrap_err().starts_with("create:"));
    assert_eq!(engine.count("create_exec"), 1);
    assert!(!lock_path.exists(), "the lock file goes with the launch");
}
