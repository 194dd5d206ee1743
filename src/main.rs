//! The `telestore` binary: a thin shell over `cli::run`.

mod cli;

// The global allocator (README, "Memory"): glibc's malloc grows one arena
// per thread that allocated, and repeated exports fragmented them to
// ~2 GB RSS.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    std::process::exit(cli::run());
}
