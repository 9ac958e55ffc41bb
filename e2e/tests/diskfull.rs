//! Proves a real server survives its disk filling up: the write that finds no room fails with
//! mongod's OutOfDiskSpace, the failure is logged once, reads keep working, writes resume by
//! themselves once space is freed (no restart), and a kill -9 afterwards loses no acknowledged
//! write. How: a 128 MiB tmpfs mounted for the test (root only; skipped with a message
//! otherwise) holds the data directory; a ballast file fills it, then is deleted.

use bson::{Document, doc};
use cairn_e2e::{Server, error_code};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cairn");
const DOC_PAD_BYTES: usize = 256 * 1024;

/// A tmpfs mounted for the test, unmounted (after the server is gone) when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Appends to `path` until the filesystem is full.
fn fill(path: &Path) {
    let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    else {
        return;
    };
    let chunk = vec![0x5au8; 64 * 1024];
    while f.write_all(&chunk).and_then(|()| f.sync_data()).is_ok() {}
}

fn padded(id: i32) -> Document {
    doc! { "_id": id, "pad": "p".repeat(DOC_PAD_BYTES) }
}

#[tokio::test]
async fn a_full_disk_fails_writes_until_space_is_freed_then_writes_resume() {
    let Some(disk) = SmallDisk::mount("128m") else {
        eprintln!(
            "SKIPPED: cannot mount a tmpfs here (needs root); the simulated backend's disk-full tests still run"
        );
        return;
    };
    let dbpath: PathBuf = disk.path().join("db");
    // No checkpoint during the test: they write the page file, which is not what is tested.
    let mut server = Server::start_at(
        BIN,
        &dbpath,
        &["--syncdelay", "0", "--checkpointLogSizeMB", "100000"],
    );
    let client = server.client().await;
    let c = client.database("full").collection::<Document>("c");
    let mut acked: Vec<i32> = Vec::new();
    for id in 0..20 {
        c.insert_one(padded(id)).await.expect("room at first");
        acked.push(id);
    }
    let ballast = disk.path().join("ballast");
    fill(&ballast);
    // Space the preallocator gives back, or free pages left, are taken by writes or ballast.
    let mut next = 1000;
    let failed = loop {
        match c.insert_one(padded(next)).await {
            Ok(_) => acked.push(next),
            Err(e) => break e,
        }
        next += 1;
        fill(&ballast);
        assert!(next < 2000, "the disk never filled");
    };
    assert_eq!(error_code(&failed), 14031, "OutOfDiskSpace: {failed}");
    for id in 5000..5010 {
        let e = c.insert_one(padded(id)).await.unwrap_err();
        assert_eq!(error_code(&e), 14031, "{e}");
    }
    let count = c
        .count_documents(doc! {})
        .await
        .expect("reads work on a full disk");
    assert_eq!(count as usize, acked.len());
    // Lines reach the test through a reader thread: wait for the first, then count.
    server.log_shows("the log refuses writes", Duration::from_secs(10));
    let logged = server.log_text().matches("the log refuses writes").count();
    assert_eq!(
        logged,
        1,
        "the failure is logged once:\n{}",
        server.log_text()
    );
    std::fs::remove_file(&ballast).expect("free the space");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match c.insert_one(padded(9000)).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline && error_code(&e) == 14031 => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("writes did not resume after space returned: {e}"),
        }
    }
    acked.push(9000);
    for id in 9001..9010 {
        c.insert_one(padded(id)).await.expect("writes resumed");
        acked.push(id);
    }
    assert!(
        server.log_shows("writes resume", Duration::from_secs(10)),
        "{}",
        server.log_text()
    );
    drop(client);
    server.restart_after_kill();
    let c = server
        .client()
        .await
        .database("full")
        .collection::<Document>("c");
    for id in &acked {
        let got = c
            .find_one(doc! { "_id": id })
            .projection(doc! { "_id": 1 })
            .await
            .unwrap();
        assert!(got.is_some(), "acknowledged write {id} lost");
    }
    server.kill();
}
