//! Times the recall modes on a database a kept `mpagent bench history --keep --dir DIR` run
//! left behind, without the rest of the host: `cargo run --release -p mpa-history --example
//! recall_timing -- DIR [ITERATIONS]`. Prints the benchmark's JSON.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: recall_timing DIR [ITERATIONS]")?;
    let iterations = args.next().map(|s| s.parse()).transpose()?.unwrap_or(160);
    let opts = mpa_history::bench::SyntheticOptions {
        messages: 0,
        seed: 42,
        iterations,
        like_iterations: Some(0),
        backfill_batch: 500,
        dir: dir.into(),
        reuse: true,
    };
    let v = mpa_history::bench::synthetic(&opts, &|e| {
        if let mpa_history::bench::BenchEvent::Note(n) = e {
            eprintln!("{n}");
        }
    })
    .await?;
    println!("{v}");
    Ok(())
}
