//! What one flush of a thread's allocator cache costs (`cairn_server::alloc_trim`, issue 12),
//! and what the allocations right after it pay to refill the cache, against the same
//! allocations with a warm cache. The program allocates through jemalloc as the server does;
//! each round fills the cache with a request-like mix of sizes first.
//!
//! `cargo bench -p cairn --bench tcache_flush`

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::hint::black_box;
use std::time::Instant;

/// Allocates `n` buffers of a mix of sizes (8 B to 32 KiB, the classes jemalloc caches per
/// thread), then frees them all into the thread's cache.
fn churn(n: usize) -> usize {
    const SIZES: [usize; 19] = [
        8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192, 16384, 24576,
        32768,
    ];
    let kept: Vec<Vec<u8>> = (0..n).map(|i| vec![1u8; SIZES[i % SIZES.len()]]).collect();
    black_box(kept.iter().map(Vec::len).sum())
}

fn micros(ns: u128, rounds: usize) -> f64 {
    ns as f64 / rounds as f64 / 1e3
}

fn main() {
    const ROUNDS: usize = 2_000;
    let (mut flush_ns, mut cold_ns, mut warm_ns) = (0u128, 0u128, 0u128);
    for _ in 0..ROUNDS {
        churn(4_000);
        let t = Instant::now();
        churn(200);
        warm_ns += t.elapsed().as_nanos();
        churn(4_000);
        let t = Instant::now();
        assert!(cairn_server::alloc_trim::flush_thread_cache());
        flush_ns += t.elapsed().as_nanos();
        let t = Instant::now();
        churn(200);
        cold_ns += t.elapsed().as_nanos();
    }
    churn(4_000);
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let full = cairn_server::alloc_trim::thread_cache_bytes();
    cairn_server::alloc_trim::flush_thread_cache();
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let flushed = cairn_server::alloc_trim::thread_cache_bytes();
    println!(
        "one flush of a full cache ({full} B cached, {flushed} B after): {:.1} us",
        micros(flush_ns, ROUNDS)
    );
    println!(
        "200 allocations (and frees) right after a flush: {:.1} us; with a warm cache: {:.1} us",
        micros(cold_ns, ROUNDS),
        micros(warm_ns, ROUNDS)
    );
}
