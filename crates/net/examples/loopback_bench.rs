//! Loopback benchmark of the runtime: unshaped local servers on 127.0.0.1 (one origin, the
//! rest edges, all serving one store) and one fetch of a large content, in one process.
//! Prints goodput (Gbit/s) and the process's CPU seconds per GB delivered.
//!
//! `cargo run --release -p pcdn-net --example loopback_bench -- [--size 200MB] [--servers 4]
//! [--scheduler NAME] [--cc NAME]`

use std::io::Write;

use anyhow::Context as _;
use pcdn_net::{FetchConfig, ServerConfig, Store, fetch, spawn_server};

struct Options {
    size: u64,
    servers: usize,
    scheduler: String,
    cc: String,
}

fn options() -> anyhow::Result<Options> {
    let mut o = Options {
        size: 200_000_000,
        servers: 4,
        scheduler: "default".to_owned(),
        cc: pcdn_net::fetch::DEFAULT_CC.to_owned(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--size" => o.size = pcdn_core::units::parse_size(&value()?)?,
            "--servers" => o.servers = value()?.parse().context("--servers: expected a count")?,
            "--scheduler" => o.scheduler = value()?,
            "--cc" => o.cc = value()?,
            "-h" | "--help" => {
                println!(
                    "loopback_bench [--size 200MB] [--servers 4] [--scheduler default] [--cc default]\n\
                     Fetches --size from --servers unshaped servers on 127.0.0.1 in this process and\n\
                     prints goodput, the wall-clock rate and CPU seconds per GB (docs/benchmarks.md)."
                );
                std::process::exit(0);
            }
            other => anyhow::bail!("unknown argument {other}; expected --size, --servers, --scheduler or --cc"),
        }
    }
    anyhow::ensure!(o.servers >= 1, "--servers: expected at least 1");
    Ok(o)
}

fn main() -> anyhow::Result<()> {
    let o = options()?;
    let dir = tempfile::tempdir()?;
    let store_dir = dir.path().join("store");
    let id = {
        let source = dir.path().join("content.bin");
        let mut file = std::io::BufWriter::new(std::fs::File::create(&source)?);
        let mut written = 0u64;
        let mut counter = 0u64;
        while written < o.size {
            let block = blake3::hash(&counter.to_le_bytes());
            let mut chunk = [0u8; 1 << 16];
            let mut xof = blake3::Hasher::new_keyed(block.as_bytes()).finalize_xof();
            xof.fill(&mut chunk);
            let n = chunk.len().min((o.size - written) as usize);
            file.write_all(&chunk[..n])?;
            written += n as u64;
            counter += 1;
        }
        file.flush()?;
        drop(file);
        let id = Store::open(&store_dir)?.add(&source)?;
        std::fs::remove_file(&source)?;
        id
    };

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        let mut servers = Vec::new();
        for i in 0..o.servers {
            let mut config = ServerConfig::new(&store_dir, "127.0.0.1:0".parse()?);
            config.origin = i == 0;
            servers.push(spawn_server(config).await?);
        }
        let store = Store::open(&store_dir)?;
        let output = dir.path().join("out.bin");
        let mut config = FetchConfig::new(id, &output);
        config.manifest = Some(store.manifest_bytes(&id)?);
        config.origin_key = Some(store.public_key());
        config.origins = vec![servers[0].local_addr()];
        config.edges = Some(servers[1..].iter().map(|s| s.local_addr()).collect());
        config.scheduler = o.scheduler.clone();
        config.cc = o.cc.clone();

        let cpu = cpu_time::ProcessTime::now();
        let wall = std::time::Instant::now();
        let report = fetch(config).await?;
        let wall = wall.elapsed().as_secs_f64();
        let cpu = cpu.elapsed().as_secs_f64();

        let gb = report.bytes as f64 / 1e9;
        println!(
            "loopback: {} MB from {} servers ({} / {})",
            report.bytes / 1_000_000,
            o.servers,
            report.scheduler,
            report.cc
        );
        println!(
            "goodput {:.3} Gbit/s (first request to last byte)",
            report.goodput_mbps / 1e3
        );
        println!(
            "wall    {:.3} Gbit/s ({wall:.2} s, lookups and the final fsync included)",
            gb * 8.0 / wall
        );
        println!(
            "cpu     {:.2} s per GB ({cpu:.2} s, servers and client together)",
            cpu / gb
        );
        print!("{}", report.to_text());
        for server in servers {
            server.shutdown().await?;
        }
        anyhow::Ok(())
    })
}
