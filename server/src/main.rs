//! The `cairn` binary: read the command line (and `--config` file), start logging, run the server.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let config = cairn_server::config::Config::load();
    let logging = match cairn_server::logging::init(&config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cairn: cannot start logging: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Storage calls run on the blocking pool (`cairn_server::offload`); its bound is named once.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(cairn_server::limits::STORAGE_THREADS_MAX)
        // Idle workers hand their allocator caches back once work has been done.
        .on_thread_park(cairn_server::alloc_trim::on_thread_idle)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cairn_server::server::run(config, argv, logging)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "cairn exiting on error");
            eprintln!("cairn: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
