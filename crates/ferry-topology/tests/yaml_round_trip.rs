//! A design written by `to_yaml` reads back as the same design: what `ferry topology
//! export` writes, `plan` and `apply` can take.

use ferry_topology::{Topology, lint};

fn read(path: &str) -> Topology {
    let text = std::fs::read_to_string(format!(
        "{}/../../examples/topology/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    Topology::from_yaml(&text).unwrap()
}

fn round_trip(topology: &Topology) {
    let written = topology.to_yaml();
    let again = Topology::from_yaml(&written)
        .unwrap_or_else(|error| panic!("written file does not read back: {error}\n{written}"));
    assert_eq!(
        again.to_yaml(),
        written,
        "a second round trip changed the file"
    );
    // The same design: the linter finds exactly the same things in both.
    let ids = |t: &Topology| {
        lint(t)
            .into_iter()
            .map(|f| format!("{} {}", f.id, f.message))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&again), ids(topology));
}

#[test]
fn the_example_designs_survive_a_round_trip() {
    round_trip(&read("ecommerce.yaml"));
    round_trip(&read("bad.yaml"));
}

#[test]
fn absent_options_and_empty_lists_are_left_out() {
    let text = "version: 1\nname: small\nqueues:\n- name: q\n  broker: ferry\n  type: queue\n";
    assert_eq!(Topology::from_yaml(text).unwrap().to_yaml(), text);
}

#[test]
fn units_are_written_as_they_are_read() {
    let text = "version: 1\nname: units\nlongest_consumer_outage: 2d\nqueues:\n  - name: q\n    broker: ferry\n    type: queue\n    retention: 90s\n    limits:\n      max_message_size: 256KiB\n";
    let written = Topology::from_yaml(text).unwrap().to_yaml();
    assert!(written.contains("longest_consumer_outage: 2d"), "{written}");
    assert!(written.contains("retention: 90s"), "{written}");
    assert!(written.contains("max_message_size: 256KiB"), "{written}");
}
