//! `acmdump`: decode raw ACM messages (client protocol, MADs, GRH+MAD receive buffers,
//! RDMA netlink) from a file or stdin and print them field by field.
//!
//! Exit status: 0 when everything decoded (and, with `--roundtrip`, re-encoded byte for
//! byte); 1 when a message could not be decoded or re-encoded differently (the error
//! names the offset); 2 for usage and I/O errors.

use acm_proto::client::Direction;
use acmdump::{Kind, Options};
use clap::Parser;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Decode raw InfiniBand ACM messages field by field.
#[derive(Debug, Parser)]
#[command(name = "acmdump", version)]
struct Args {
    /// Input file; `-` or nothing reads stdin.
    file: Option<PathBuf>,
    /// What the input holds.
    #[arg(long, value_enum, default_value = "client")]
    kind: Kind,
    /// Client messages only: request or response stream. `auto` picks `response` when
    /// the file name contains "resp" (as in `LABEL.responses.bin`) and `request`
    /// otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    direction: DirectionArg,
    /// The input is hex text (whitespace, `:`, `0x` and `#` comments are ignored).
    #[arg(long)]
    hex: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Re-encode every decoded message and fail, naming the first differing offset,
    /// unless it reproduces the input byte for byte.
    #[arg(long)]
    roundtrip: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DirectionArg {
    Auto,
    Request,
    Response,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let name = args
        .file
        .as_ref()
        .map_or_else(|| "<stdin>".to_owned(), |p| p.display().to_string());
    let raw = match read_input(args.file.as_ref()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("acmdump: {name}: {e}");
            return ExitCode::from(2);
        }
    };
    let bytes = if args.hex {
        match acmdump::decode_hex(&String::from_utf8_lossy(&raw)) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("acmdump: {name}: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        raw
    };
    let direction = match args.direction {
        DirectionArg::Request => Direction::Request,
        DirectionArg::Response => Direction::Response,
        DirectionArg::Auto if name.contains("resp") => Direction::Response,
        DirectionArg::Auto => Direction::Request,
    };
    let opts = Options {
        kind: args.kind,
        direction,
    };
    let (decoded, error) = acmdump::dump(&bytes, opts, args.roundtrip);
    let text = if args.json {
        acmdump::to_json(&decoded)
    } else {
        acmdump::to_text(&decoded)
    };
    let mut stdout = std::io::stdout().lock();
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
    match error {
        None => {
            if args.roundtrip {
                eprintln!(
                    "acmdump: {name}: {} message(s), {} bytes re-encoded identically",
                    decoded.len(),
                    bytes.len()
                );
            }
            ExitCode::SUCCESS
        }
        Some(e) => {
            eprintln!("acmdump: {name}: {e}");
            ExitCode::from(1)
        }
    }
}

fn read_input(file: Option<&PathBuf>) -> std::io::Result<Vec<u8>> {
    match file {
        Some(p) if p.as_os_str() != "-" => std::fs::read(p),
        _ => {
            let mut b = Vec::new();
            std::io::stdin().read_to_end(&mut b)?;
            Ok(b)
        }
    }
}
