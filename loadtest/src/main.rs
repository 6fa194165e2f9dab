//! The load generator and benchmark harness. Not written yet: it refuses to
//! run rather than print numbers that measure nothing.

fn main() {
    eprintln!("loadtest: not written yet; there are no figures to report");
    std::process::exit(2);
}
