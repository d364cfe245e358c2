//! The `ferry` command: run a server, administer and use one, and benchmarks.

mod remote;
mod serve;
mod test_clock;
mod topology;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ferry_bench::suites as bench;
use ferry_cli::config;
use remote::{Remote, admin, dead_letters, messages, stats};
use tracing_subscriber::EnvFilter;

#[derive(Parser, Debug)]
#[command(
    name = "ferry",
    version,
    about = "Ferry: a message broker, its tools and benchmarks"
)]
struct Cli {
    /// The server to talk to: ferry://host:port, or ferrys://host:port over TLS.
    #[arg(
        long,
        global = true,
        default_value = "ferry://127.0.0.1:7070",
        env = "FERRY_SERVER"
    )]
    server: String,
    /// The API token sent with every call, for a server that requires one.
    #[arg(
        long,
        global = true,
        env = "FERRY_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// Connect over TLS, trusting the CA certificate (PEM) in FILE; with it a
    /// `ferry://` server address is reached over TLS too (`ferrys://` says so explicitly).
    #[arg(long, global = true, env = "FERRY_TLS_CA", value_name = "FILE")]
    tls_ca: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Validate FILE (if given) with the FERRY_* variables over it, and print the
    /// effective configuration: each value and where it came from; never a token hash.
    Check {
        #[arg(value_name = "FILE", env = "FERRY_CONFIG")]
        file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Print the SHA-256 (hex) of TOKEN, as the config file's `sha256` wants it. Without
    /// TOKEN it is read from stdin (`ferry token hash < token.txt`, or
    /// `printf %s "$TOKEN" | ferry token hash`), which keeps it out of the shell's
    /// history and `ps`; one trailing newline is not part of it.
    Hash {
        // Not the id `token`: that is the global `--token`'s, which would take this value.
        #[arg(id = "token_to_hash", value_name = "TOKEN")]
        token: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the broker as a server (gRPC and HTTP), durable, until Ctrl-C or SIGTERM.
    Serve(serve::ServeArgs),
    /// Check a server config file and print what the server would run with.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// API tokens: print the SHA-256 of a token, for the config file.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Create, list, describe and delete queues; park and unpark keys.
    Queue {
        #[command(flatten)]
        output: Output,
        #[command(subcommand)]
        command: admin::QueueCommand,
    },
    /// Create, list, describe and delete topics.
    Topic {
        #[command(flatten)]
        output: Output,
        #[command(subcommand)]
        command: admin::TopicCommand,
    },
    /// Create, describe and delete subscriptions (a queue fed from a topic).
    Sub {
        #[command(flatten)]
        output: Output,
        #[command(subcommand)]
        command: admin::SubCommand,
    },
    /// Describe consumer groups of a topic.
    Group {
        #[command(flatten)]
        output: Output,
        #[command(subcommand)]
        command: admin::GroupCommand,
    },
    /// Publish messages to a queue: arguments, stdin lines (`-`) or a file's lines.
    Publish {
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        args: messages::PublishArgs,
    },
    /// Receive messages from a queue, print them, and ack, nack or reject them.
    Consume {
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        args: messages::ConsumeArgs,
    },
    /// Dead letters: list, peek, redrive.
    Dlq {
        #[command(flatten)]
        output: Output,
        #[command(subcommand)]
        command: dead_letters::DlqCommand,
    },
    /// Every queue's counts in one table.
    Stats {
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        args: stats::StatsArgs,
    },
    /// Print a shell completion script: `ferry completions bash > ~/.ferry.bash`.
    Completions { shell: clap_complete::Shell },
    /// Chaos tests of a real server: faults injected, histories checked.
    Chaos {
        #[command(subcommand)]
        command: ferry_chaos::cli::ChaosCommand,
    },
    /// Topology as code: check a design file against the messaging rules, and plan, apply
    /// and export it against the server.
    Topology {
        #[command(subcommand)]
        command: topology::TopologyCommand,
    },
    /// Measure performance on this machine.
    Bench {
        #[command(subcommand)]
        target: BenchTarget,
    },
}

#[derive(Subcommand, Debug)]
enum BenchTarget {
    /// The storage engine, next to the device's own limits measured in the same run.
    Storage(bench::StorageArgs),
    /// The broker engine: steady traffic, a large backlog and delayed messages, in process.
    Broker(bench::broker::BrokerArgs),
    /// A partitioned topic alone, then fanned out to many subscriptions, in process.
    Fanout(bench::fanout::FanoutArgs),
    /// The server over loopback with the Rust client, next to the embedded broker.
    Remote(bench::remote::RemoteArgs),
    /// The server's publish-ack of 1 KiB messages against the disk's sequential bandwidth,
    /// in alternating rounds on the file system of its data directory.
    DiskRatio(bench::disk_ratio::DiskRatioArgs),
    /// The same SDK code on every transport this build has, side by side.
    Transports(bench::transports::TransportsArgs),
    /// Internal to `bench storage`: fills a log in DIR with about BYTES of records, then
    /// aborts without closing it, so the parent can time recovery after an unclean stop.
    #[command(name = "storage-child-fill", hide = true)]
    StorageChildFill { dir: PathBuf, bytes: u64 },
}

/// The client flags: global, so that they go before or after a client command
/// (`ferry --server URL queue list`, `ferry queue list --token T`), as they always have.
const CLIENT_FLAGS: [&str; 3] = ["server", "token", "tls_ca"];

/// The commands that never talk to a server through the client flags (`serve` is the
/// server; `chaos` and `bench` start their own).
const LOCAL_COMMANDS: [&str; 6] = ["serve", "config", "token", "completions", "chaos", "bench"];

/// Subcommands of a command that talks to a server that themselves do not: `topology
/// lint` reads a file only, while `topology plan`, `apply` and `export` use the server.
const LOCAL_SUBCOMMANDS: [(&str, &str); 3] = [
    ("topology", "lint"),
    ("topology", "import"),
    ("topology", "convert"),
];

/// The command line, with the client flags hidden under the commands that do not use
/// them: `ferry serve --help` showing `--server` and `--token` read as if `serve` took
/// them. Clap copies a global flag into every subcommand that has none of that name, and
/// has no per-subcommand opt-out, so these commands get a hidden copy of their own (global
/// too, so their subcommands inherit the hidden one).
fn command() -> clap::Command {
    let command = Cli::command();
    let hidden: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|arg| CLIENT_FLAGS.contains(&arg.get_id().as_str()))
        .map(|arg| arg.clone().hide(true))
        .collect();
    let command = LOCAL_COMMANDS.iter().fold(command, |command, name| {
        command.mut_subcommand(name, |sub| sub.args(hidden.iter().cloned()))
    });
    LOCAL_SUBCOMMANDS
        .iter()
        .fold(command, |command, (name, local)| {
            command.mut_subcommand(name, |sub| {
                sub.mut_subcommand(local, |sub| sub.args(hidden.iter().cloned()))
            })
        })
}

/// Exits with a usage error when a client flag is given on the command line to a command
/// that does not use it (`ferry serve --server …`): taking it silently would let the user
/// think it did something. From the environment (`FERRY_SERVER` in the shell) it is fine.
fn refuse_misplaced_client_flags(matches: &clap::ArgMatches) {
    let Some((name, sub)) = matches.subcommand() else {
        return;
    };
    let local_sub = sub
        .subcommand_name()
        .filter(|s| LOCAL_SUBCOMMANDS.contains(&(name, s)));
    if !LOCAL_COMMANDS.contains(&name) && local_sub.is_none() {
        return;
    }
    let name = match local_sub {
        Some(sub) => format!("{name} {sub}"),
        None => name.to_owned(),
    };
    // Clap gathers a global flag's value at the top, wherever it was written.
    for flag in CLIENT_FLAGS {
        if matches.value_source(flag) == Some(clap::parser::ValueSource::CommandLine) {
            let long = flag.replace('_', "-");
            command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "--{long} is for the commands that talk to a server (queue, publish, \
                         consume, …), not `ferry {name}`"
                    ),
                )
                .exit();
        }
    }
}

fn main() -> ExitCode {
    // Warnings from the storage engine (e.g. a failed checkpoint) must not pass silently
    // during a benchmark; RUST_LOG can ask for more.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    let matches = command().get_matches();
    refuse_misplaced_client_flags(&matches);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: what went wrong and, where known, what to do.
            eprintln!("ferry: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let server = cli.server;
    let mut options = ferry_client::ConnectOptions::new();
    if let Some(token) = cli.token {
        options = options.token(token);
    }
    let tls_ca = cli.tls_ca;
    let connect_options = || -> anyhow::Result<ferry_client::ConnectOptions> {
        let mut options = options.clone();
        if let Some(path) = &tls_ca {
            let pem = std::fs::read(path).with_context(|| {
                format!(
                    "reading the CA certificate {} (--tls-ca, FERRY_TLS_CA)",
                    path.display()
                )
            })?;
            options = options.tls_ca_pem(pem);
        }
        Ok(options)
    };
    let remote = |output: Output, command: RemoteCommand| -> anyhow::Result<()> {
        let options = connect_options()?;
        remote::runtime()?.block_on(async {
            let remote = Remote::connect(&server, options, output.json).await?;
            match command {
                RemoteCommand::Queue(c) => admin::queue(&remote, c).await,
                RemoteCommand::Topic(c) => admin::topic(&remote, c).await,
                RemoteCommand::Sub(c) => admin::sub(&remote, c).await,
                RemoteCommand::Group(c) => admin::group(&remote, c).await,
                RemoteCommand::Publish(a) => messages::publish(&remote, a).await,
                RemoteCommand::Consume(a) => messages::consume(&remote, a).await,
                RemoteCommand::Dlq(c) => dead_letters::dlq(&remote, c).await,
                RemoteCommand::Stats(a) => stats::stats(&remote, a).await,
            }
        })
    };
    match cli.command {
        Command::Serve(args) => serve::run(&args),
        Command::Config {
            command: ConfigCommand::Check { file },
        } => config::load(
            file.as_deref(),
            &config::process_env,
            &config::Flags::default(),
        )
        .map(|effective| print!("{}", config::describe(&effective))),
        Command::Token {
            command: TokenCommand::Hash { token },
        } => {
            let token = match token {
                Some(token) => token,
                None => token_from_stdin()?,
            };
            let hash = ferry_server::sha256(&token);
            println!(
                "{}",
                hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            Ok(())
        }
        Command::Queue { output, command } => remote(output, RemoteCommand::Queue(command)),
        Command::Topic { output, command } => remote(output, RemoteCommand::Topic(command)),
        Command::Sub { output, command } => remote(output, RemoteCommand::Sub(command)),
        Command::Group { output, command } => remote(output, RemoteCommand::Group(command)),
        Command::Publish { output, args } => remote(output, RemoteCommand::Publish(args)),
        Command::Consume { output, args } => remote(output, RemoteCommand::Consume(args)),
        Command::Dlq { output, command } => remote(output, RemoteCommand::Dlq(command)),
        Command::Stats { output, args } => remote(output, RemoteCommand::Stats(args)),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command(), "ferry", &mut script);
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                // `ferry completions bash | head` is not a failure.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
        Command::Chaos { command } => {
            if ferry_chaos::cli::run(command)? {
                Ok(())
            } else {
                anyhow::bail!("the chaos checks failed (see the verdict above)")
            }
        }
        // Its own exit codes (topology/mod.rs): CI gates on lint and plan.
        Command::Topology { command } => std::process::exit(topology::run(command, || {
            Ok(topology::Connection {
                server: server.clone(),
                options: connect_options()?,
            })
        })),
        Command::Bench { target } => match target {
            BenchTarget::Storage(args) => bench::run_storage(&args),
            BenchTarget::Broker(args) => bench::broker::run(&args),
            BenchTarget::Fanout(args) => bench::fanout::run(&args),
            BenchTarget::Remote(args) => bench::remote::run(&args),
            BenchTarget::DiskRatio(args) => bench::disk_ratio::run(&args),
            BenchTarget::Transports(args) => bench::transports::run(&args),
            BenchTarget::StorageChildFill { dir, bytes } => bench::reopen::child_fill(&dir, bytes),
        },
    }
}

/// The token `ferry token hash` reads from stdin: all of it but one trailing newline
/// (`\n` or `\r\n`), which `echo` and editors add and which is not part of the token.
fn token_from_stdin() -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .context("reading the token from stdin")?;
    let token = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if token.is_empty() {
        anyhow::bail!(
            "no token on stdin: give it as an argument or on stdin \
             (`printf %s \"$TOKEN\" | ferry token hash`)"
        );
    }
    Ok(token.to_owned())
}

/// `--json`, on the commands that talk to a server only: `bench` has its own `--json FILE`.
#[derive(clap::Args, Debug)]
struct Output {
    /// Print JSON instead of tables and text.
    #[arg(long, global = true)]
    json: bool,
}

/// The commands that need a connection to a server.
enum RemoteCommand {
    Queue(admin::QueueCommand),
    Topic(admin::TopicCommand),
    Sub(admin::SubCommand),
    Group(admin::GroupCommand),
    Publish(messages::PublishArgs),
    Consume(messages::ConsumeArgs),
    Dlq(dead_letters::DlqCommand),
    Stats(stats::StatsArgs),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clap checks the whole command tree here rather than at the first run of a
    /// subcommand: a flag defined twice (say a global `--json` beside `bench`'s
    /// `--json FILE`) fails this test instead of panicking in a user's hands.
    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
        command().debug_assert();
    }
}
