//! `ferry topology …`: topology as code. `lint` checks a design file against the rules;
//! `plan`, `apply` and `export` compare it with, carry it out on, and read it back from
//! the server the other remote commands talk to (`--server`, `--token`, `--tls-ca`);
//! `import` and `convert` translate files from and to AsyncAPI and RabbitMQ's definitions.
//!
//! Exit codes, for CI to gate on (docs/topology.md, "Plan, apply and export"):
//! 0 done, or no changes; 1 lint found an error, or plan found changes; 2 no verdict (the
//! file cannot be read, the server cannot be reached, no plan can be made); 3 apply refused
//! a plan that loses data without `--allow-data-loss`, nothing changed; 4 apply failed
//! part way: the changes printed before the error were made.

mod apply;
mod check;
mod export;
mod interop;
mod lint;
mod spec;

use std::path::PathBuf;

use ferry_client::ConnectOptions;

pub use interop::ImportFormat;
pub use lint::LintFormat;

/// Exit code: lint found an error; plan found changes.
const EXIT_FINDINGS: i32 = 1;
/// Exit code: no verdict. The file could not be read or parsed, the server could not be
/// read, no plan can be made, or the output could not be written; nothing was changed.
const EXIT_NO_VERDICT: i32 = 2;
/// Exit code: apply refused a plan that loses data; nothing was changed.
const EXIT_DATA_LOSS_REFUSED: i32 = 3;
/// Exit code: apply stopped at a change the server refused; the earlier ones were made.
const EXIT_PARTLY_APPLIED: i32 = 4;

#[derive(clap::Subcommand, Debug)]
pub enum TopologyCommand {
    /// Check FILE against the design rules (docs/topology.md): one finding per line,
    /// `FILE: ID severity element: message (fix: …)`. Exits 1 if any finding is an
    /// error, 2 if FILE cannot be read or is not a valid topology file.
    Lint {
        /// The topology file (YAML).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// How to print the findings.
        #[arg(long, value_enum, default_value_t = LintFormat::Text)]
        format: LintFormat,
    },
    /// Show what `apply` would change on the server to make it hold FILE's design:
    /// `+` create, `~` update, `-` delete, each marked when it loses data. Exits 0 when
    /// there is nothing to change, 1 when there is, 2 when no plan can be made.
    Plan {
        #[command(flatten)]
        args: PlanArgs,
        /// How to print the plan.
        #[arg(long, value_enum, default_value_t = PlanFormat::Text)]
        format: PlanFormat,
    },
    /// Make the server hold FILE's design: the plan's changes, dead-letter queues before
    /// the channels that send to them, topics before subscriptions. A second apply has no
    /// changes. Exits 3 without changing anything when a change loses data and
    /// `--allow-data-loss` is not given; 4 when the server refused a change part way.
    Apply {
        #[command(flatten)]
        args: PlanArgs,
        /// Carry out changes that lose messages: deletes, recreating a channel to change
        /// a setting the server cannot change in place, shorter retention.
        #[arg(long)]
        allow_data_loss: bool,
    },
    /// Print the server's queues, topics, subscriptions and consumer groups with their
    /// settings as a topology file, which `plan` against the same server finds equal.
    Export {
        /// Write the file here instead of to stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = ExportFormat::Yaml)]
        format: ExportFormat,
    },
    /// Read a design written in another format (an AsyncAPI 3.0 document, RabbitMQ's
    /// `rabbitmqctl export_definitions` file) and print it as a topology file. What does
    /// not carry over is printed on stderr, one `note:` a line. Exits 2 when FILE cannot
    /// be read or is not in the format.
    Import {
        /// The document to read (JSON or YAML).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// What FILE is.
        #[arg(long, value_enum)]
        from: ImportFormat,
        /// With `--from rabbitmq`: the virtual host to read, when FILE holds several.
        #[arg(long)]
        vhost: Option<String>,
        /// Write the topology file here instead of to stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Write a topology file in another format (as `export` does from a server), without
    /// a server. Exits 2 when FILE cannot be read or is not a topology file.
    Convert {
        /// The topology file (YAML).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The format to write.
        #[arg(long, value_enum)]
        to: ExportFormat,
        /// Write the result here instead of to stdout.
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
    },
}

/// What plan and apply compare.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The topology file (YAML).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Also delete the queues, topics and subscriptions the server has and FILE does not.
    #[arg(long)]
    pub prune: bool,
    /// Leave out FILE's channels on brokers the Ferry server does not serve (RabbitMQ,
    /// NATS, Redis, Pub/Sub; Kafka and SNS topics and SQS queues are served), printing
    /// each one; without it such a file is refused.
    #[arg(long)]
    pub skip_other_brokers: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum PlanFormat {
    /// One change per line.
    Text,
    /// An object: changes (kind, name, action, setting, from, to, loses_data), unmanaged,
    /// skipped.
    Json,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ExportFormat {
    /// The topology file format that `lint`, `plan` and `apply` read.
    Yaml,
    /// An AsyncAPI 3.0 document, in YAML (`ferry topology import --from asyncapi` reads
    /// it back to the same design).
    Asyncapi,
    /// The same AsyncAPI 3.0 document, in JSON.
    AsyncapiJson,
}

/// `topology` written in `format`.
fn render(topology: &ferry_topology::Topology, format: ExportFormat) -> String {
    match format {
        ExportFormat::Yaml => topology.to_yaml(),
        ExportFormat::Asyncapi => ferry_topology::asyncapi::to_yaml_document(topology),
        ExportFormat::AsyncapiJson => {
            let mut text =
                serde_json::to_string_pretty(&ferry_topology::asyncapi::to_document(topology))
                    .expect("a JSON value serializes");
            text.push('\n');
            text
        }
    }
}

/// Writes `text` to `output`, or to stdout (a closed pipe is not an error: `| head` is
/// a reader that has seen enough). Returns the exit code.
fn write_output(output: Option<&std::path::Path>, text: &str) -> i32 {
    let written = match output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
        }
        None => std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::BrokenPipe => Ok(()),
                _ => Err(e),
            })
            .map_err(|e| format!("writing the file: {e}")),
    };
    match written {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("ferry: error: {error}");
            EXIT_NO_VERDICT
        }
    }
}

/// Where the server is and how to reach it: the client flags of every remote command.
pub struct Connection {
    pub server: String,
    pub options: ConnectOptions,
}

/// Runs the command and returns the process exit code. `connection` is asked for only by
/// the commands that talk to a server.
pub fn run(
    command: TopologyCommand,
    connection: impl FnOnce() -> anyhow::Result<Connection>,
) -> i32 {
    match command {
        TopologyCommand::Lint { file, format } => lint::lint(&file, format),
        TopologyCommand::Plan { args, format } => apply::plan(&args, format, connection),
        TopologyCommand::Apply {
            args,
            allow_data_loss,
        } => apply::apply(&args, allow_data_loss, connection),
        TopologyCommand::Export { output, format } => {
            export::run(output.as_deref(), format, connection)
        }
        TopologyCommand::Import {
            file,
            from,
            vhost,
            output,
        } => interop::import(&file, from, vhost.as_deref(), output.as_deref()),
        TopologyCommand::Convert { file, to, output } => {
            interop::convert(&file, to, output.as_deref())
        }
    }
}

/// Connects and runs `body` on a runtime, turning any error into one `ferry: error:` line
/// and [`EXIT_NO_VERDICT`].
fn with_server<T>(
    connection: impl FnOnce() -> anyhow::Result<Connection>,
    body: impl AsyncFnOnce(&crate::remote::Remote) -> anyhow::Result<T>,
) -> Result<T, i32> {
    let result = connection().and_then(|connection| {
        crate::remote::runtime()?.block_on(async {
            let remote =
                crate::remote::Remote::connect(&connection.server, connection.options, false)
                    .await?;
            body(&remote).await
        })
    });
    result.map_err(|error| {
        eprintln!("ferry: error: {error:#}");
        EXIT_NO_VERDICT
    })
}
