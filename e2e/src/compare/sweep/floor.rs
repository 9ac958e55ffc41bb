//! What this machine can do at best for one durable write from a client: an fdatasync of 4 KiB
//! on the work directory's filesystem, and a loopback TCP round trip. A durable single insert
//! costs at least one of each, so their sum is the floor the report measures systems against.
//! This virtual disk's sync latency jumps between ~0.1 ms and ~4 ms within seconds, so the sync
//! probe is built to take turns with a system's inserts (see `SyncProbe::rounds`).

use crate::compare::limits::{FLOOR_LOOPBACK_MESSAGE_BYTES, FLOOR_SYNC_FILE_BYTES};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// "Write a block + fdatasync" rounds, block after block (wrapping), on a file in the work
/// directory that was written and synced in full first, so the syncs are data-only (no size
/// change for the journal to commit), like a preallocated log. With 4 KiB blocks every sync
/// writes a new page; with small blocks several syncs rewrite the same page, as a log of small
/// records does. The file is removed on drop.
pub struct SyncProbe {
    path: PathBuf,
    file: File,
    block_bytes: usize,
    next_block: u64,
}

impl SyncProbe {
    pub fn new(dir: &Path, block_bytes: usize) -> std::io::Result<SyncProbe> {
        let path = dir.join(format!("floor-fdatasync-{block_bytes}.bin"));
        let mut file = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)?;
        file.write_all(&vec![0u8; FLOOR_SYNC_FILE_BYTES])?;
        file.sync_all()?;
        Ok(SyncProbe {
            path,
            file,
            block_bytes: block_bytes.clamp(1, FLOOR_SYNC_FILE_BYTES),
            next_block: 0,
        })
    }

    /// Microseconds of each of `rounds` rounds.
    pub fn rounds(&mut self, rounds: usize) -> std::io::Result<Vec<f64>> {
        let block = vec![0xA5u8; self.block_bytes];
        let blocks = (FLOOR_SYNC_FILE_BYTES / self.block_bytes) as u64;
        let mut out = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let offset = (self.next_block % blocks) * self.block_bytes as u64;
            self.next_block += 1;
            let start = Instant::now();
            self.file.seek(SeekFrom::Start(offset))?;
            self.file.write_all(&block)?;
            self.file.sync_data()?;
            out.push(start.elapsed().as_secs_f64() * 1e6);
        }
        Ok(out)
    }
}

impl Drop for SyncProbe {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Microseconds of each round trip of a small message over loopback TCP (no Nagle delay) to an
/// echo thread.
pub fn loopback_us(rounds: usize) -> std::io::Result<Vec<f64>> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; FLOOR_LOOPBACK_MESSAGE_BYTES];
        for _ in 0..rounds {
            s.read_exact(&mut buf)?;
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let msg = [7u8; FLOOR_LOOPBACK_MESSAGE_BYTES];
    let mut buf = [0u8; FLOOR_LOOPBACK_MESSAGE_BYTES];
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let start = Instant::now();
        s.write_all(&msg)?;
        s.read_exact(&mut buf)?;
        out.push(start.elapsed().as_secs_f64() * 1e6);
    }
    echo.join()
        .map_err(|_| std::io::Error::other("echo thread panicked"))??;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_measure_every_round() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut probe = SyncProbe::new(dir.path(), 512).expect("probe");
        let sync = probe.rounds(3).expect("fdatasync");
        assert_eq!(sync.len(), 3);
        assert!(sync.iter().all(|us| *us > 0.0));
        assert_eq!(probe.next_block, 3);
        drop(probe);
        assert!(!dir.path().join("floor-fdatasync-512.bin").exists());
        assert_eq!(loopback_us(20).expect("loopback").len(), 20);
    }
}
