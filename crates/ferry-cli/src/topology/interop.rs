//! `ferry topology import` and `convert`: a design read from another format, or written in
//! one, offline. The translations are `ferry_topology::asyncapi` and `::rabbitmq`; this
//! reads the file, prints each note of what did not carry over, and writes the result.

use std::path::Path;

use ferry_topology::{Imported, Topology};

use super::{EXIT_NO_VERDICT, ExportFormat, render, write_output};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ImportFormat {
    /// An AsyncAPI 3.0 document (2.x is refused: convert it with `asyncapi convert`).
    Asyncapi,
    /// RabbitMQ's definitions (`rabbitmqctl export_definitions`, or the management
    /// API's `/api/definitions`).
    Rabbitmq,
}

pub fn import(file: &Path, from: ImportFormat, vhost: Option<&str>, output: Option<&Path>) -> i32 {
    let imported = read(file).and_then(|text| {
        let imported = match (from, vhost) {
            (ImportFormat::Asyncapi, None) => {
                ferry_topology::asyncapi::import(&text).map_err(|e| e.to_string())
            }
            (ImportFormat::Asyncapi, Some(_)) => {
                Err("--vhost is for RabbitMQ definitions, not AsyncAPI documents".to_owned())
            }
            (ImportFormat::Rabbitmq, None) => {
                ferry_topology::rabbitmq::from_definitions(&text).map_err(|e| e.to_string())
            }
            (ImportFormat::Rabbitmq, Some(vhost)) => {
                ferry_topology::rabbitmq::from_vhost_definitions(&text, vhost)
                    .map_err(|e| e.to_string())
            }
        };
        imported.map_err(|e| format!("{}: {e}", file.display()))
    });
    let Imported { topology, notes } = match imported {
        Ok(imported) => imported,
        Err(error) => {
            eprintln!("ferry: error: {error}");
            return EXIT_NO_VERDICT;
        }
    };
    for note in &notes {
        eprintln!("note: {note}");
    }
    write_output(output, &topology.to_yaml())
}

pub fn convert(file: &Path, to: ExportFormat, output: Option<&Path>) -> i32 {
    let topology = read(file).and_then(|text| {
        Topology::from_yaml(&text).map_err(|e| format!("{}: {e}", file.display()))
    });
    match topology {
        Ok(topology) => write_output(output, &render(&topology, to)),
        Err(error) => {
            eprintln!("ferry: error: {error}");
            EXIT_NO_VERDICT
        }
    }
}

fn read(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("{}: cannot read it: {e}", file.display()))
}
